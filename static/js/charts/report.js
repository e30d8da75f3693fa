// The report's own charts (latency by tree depth and branch mode, the agent trees) and the run
// page without the socket (report, offline export).
import { inferenceName, workerColor } from "./format.js";
import { layout, plotConfig } from "./plot.js";
import { RunView } from "./view.js";


export function drawSlices(el, slices, title, order) {
  if (!el) return;
  const names = order.filter((n) => slices[n]).concat(Object.keys(slices).filter((n) => !order.includes(n)));
  if (!names.length) { el.textContent = "No requests in this run."; return; }
  const bar = (metric, p, color, axis) => ({
    type: "bar", name: `${metric.replace("_ms", "")} ${p}`, x: names,
    y: names.map((n) => ((slices[n] || {})[metric] || {})[p] ?? null), marker: { color }, xaxis: axis.x, yaxis: axis.y,
  });
  const traces = [
    bar("ttft_ms", "p50", "#7aa2ff", { x: "x", y: "y" }), bar("ttft_ms", "p99", "#2458d6", { x: "x", y: "y" }),
    bar("latency_ms", "p50", "#f6b26b", { x: "x2", y: "y2" }), bar("latency_ms", "p99", "#e8710a", { x: "x2", y: "y2" }),
  ];
  const lay = layout(`${title}<br><sub>TTFT (left) and end-to-end latency (right), ms</sub>`, "", {
    grid: { rows: 1, columns: 2, pattern: "independent" }, barmode: "group", hovermode: "closest",
    xaxis: { type: "category" }, xaxis2: { type: "category" },
    yaxis2: { rangemode: "tozero" }, height: 300, margin: { l: 44, r: 12, t: 54, b: 30 },
  });
  window.Plotly.newPlot(el, traces, lay, plotConfig());
}

// ids: index -> the server's inference worker id (the summary's inference_worker_ids), if any.
export function drawTrees(container, data, mode, ids = {}) {
  if (!container) return;
  container.innerHTML = "";
  const trees = (data && data.trees) || [];
  if (!trees.length) { container.textContent = "No records stored for this run."; return; }
  // Every cell first, then the plots: a plot takes its cell's width when drawn, and the grid's
  // columns are only final once all cells are in (the first tree was drawn full width).
  const boxes = trees.map(() => {
    const box = document.createElement("div");
    box.className = "tree";
    container.appendChild(box);
    return box;
  });
  trees.forEach((tree, index) => {
    const box = boxes[index];
    const nodes = tree.nodes;
    const byId = new Map(nodes.map((n) => [n.id, n]));
    const ex = [], ey = [];
    for (const n of nodes) {
      const p = byId.get(n.parent);
      if (p && n.id !== tree.root) { ex.push(p.depth, n.depth, null); ey.push(p.y, n.y, null); }
    }
    const short = (id) => id.split(":").pop();
    const isChild = (n) => n.depth > 0;
    let color, symbol, line;
    if (mode === "inference") {
      color = nodes.map((n) => (n.inference_worker === null ? "#c0c4cc" : workerColor(n.inference_worker)));
      symbol = nodes.map((n) => (!isChild(n) ? "square" : n.first_turn_hit ? "star" : "circle-open"));
      line = { width: nodes.map((n) => (isChild(n) && !n.first_turn_hit ? 3 : 1)), color };
    } else {
      color = nodes.map((n) => (n.client_workers.length ? workerColor(n.client_workers[0]) : "#c0c4cc"));
      symbol = nodes.map((n) => (n.bounced ? "diamond" : "circle"));
      line = { width: nodes.map((n) => (n.bounced ? 4 : 1)), color: nodes.map((n) => (n.bounced ? "#d93025" : "#fff")) };
    }
    const text = nodes.map((n) => {
      const workers = [...new Set(n.client_workers)].join("→");
      const hit = n.first_prompt_tokens ? `${n.first_cached_tokens ?? "?"}/${n.first_prompt_tokens} cached` : "no usage";
      return `<b>${short(n.id)}</b> (${n.branch_mode}, depth ${n.depth})<br>${n.turns} turns on client worker ${workers}` +
        `${n.bounced ? ` — <b>bounced</b>, ${n.switches} switches` : ""}<br>first turn: ${n.inference_worker === null ? "inference worker ?" : `inference ${inferenceName(n.inference_worker, ids).full}`}, ${hit}`;
    });
    const labels = nodes.map((n) => (mode === "inference"
      ? (n.inference_worker === null ? "" : (ids[String(n.inference_worker)] === undefined ? `i${n.inference_worker}`
        : inferenceName(n.inference_worker, ids).short))
      : (n.bounced ? [...new Set(n.client_workers)].join("→") : n.client_workers.length ? `c${n.client_workers[0]}` : "")));
    const height = Math.max(160, 28 * (Math.max(...nodes.map((n) => n.y)) + 1) + 70);
    window.Plotly.newPlot(box, [
      { x: ex, y: ey, mode: "lines", line: { color: "#b8bec9", width: 1.2 }, hoverinfo: "skip", showlegend: false },
      { x: nodes.map((n) => n.depth), y: nodes.map((n) => n.y), mode: "markers+text", text: labels,
        textposition: "middle right", textfont: { size: 10 }, hovertext: text, hoverinfo: "text", showlegend: false,
        marker: { size: 15, color, symbol, line } },
    ], {
      title: { text: `tree ${short(tree.root)}: ${tree.sessions} sessions, ${tree.bounced} bounced`, font: { size: 13 }, x: 0 },
      margin: { l: 30, r: 60, t: 30, b: 30 }, height,
      xaxis: { title: { text: "depth" }, dtick: 1, zeroline: false, range: [-0.3, Math.max(...nodes.map((n) => n.depth)) + 0.8] },
      yaxis: { visible: false, autorange: "reversed" }, hovermode: "closest", plot_bgcolor: "#fff", paper_bgcolor: "rgba(0,0,0,0)",
    }, plotConfig());
  });
}

// What a RunView needs to know of its run: from the page data and the root's data attributes
// (data-started-at, ISO; data-virtual, a simulated run).
export function viewOptions(root, page, { live = false } = {}) {
  return {
    intervalS: page.interval_s, workerIds: page.inference_worker_ids, live,
    startedAt: root.dataset.startedAt || null, virtual: root.dataset.virtual === "1",
  };
}

// The run page's drawing from the server's data: the history and latest snapshot, then the
// report's own charts. `live`: the run is still going (its time range grows).
// The offline export draws every chart at once (it may be printed); the page draws those in
// view, the others as they are scrolled to.
export function drawRunPage(root, page, { live = false } = {}) {
  const view = new RunView(root, viewOptions(root, page, { live }));
  return finishRunPage(root, page, view, { all: true });
}

// marks (optional): performance.now() after each step, for the benchmark.
export function finishRunPage(root, page, view, { all = false, marks = {} } = {}) {
  view.loadHistory(page.history);
  marks.history = performance.now();
  view.draw(all);
  marks.firstFrame = performance.now();
  const slices = () => {
    drawSlices(root.querySelector("#chart-depth"), page.by_depth || {}, "Latency by tree depth", ["0", "1", "2", "3+"]);
    drawSlices(root.querySelector("#chart-branch"), page.by_branch_mode || {}, "Latency by branch mode", ["root", "fork", "spawn"]);
    marks.slices = performance.now();
  };
  // The two slice charts sit at the report's end: on the page, after the charts in view (they
  // took 45-95 ms before those were drawn on a 1M-request report); the export draws all now.
  if (all) slices();
  else (window.requestIdleCallback || ((f) => setTimeout(f, 50)))(slices, { timeout: 1500 });
  return view;
}
