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
    // Labels at the deepest nodes drew past the plot's edge and were cut ("1→3→6→5→"): they may
    // overflow into a right margin as wide as the longest of them.
    const deepest = Math.max(...nodes.map((n) => n.depth));
    const longest = Math.max(0, ...labels.filter((_, i) => nodes[i].depth === deepest).map((l) => l.length));
    window.Plotly.newPlot(box, [
      { x: ex, y: ey, mode: "lines", line: { color: "#b8bec9", width: 1.2 }, hoverinfo: "skip", showlegend: false },
      { x: nodes.map((n) => n.depth), y: nodes.map((n) => n.y), mode: "markers+text", text: labels,
        textposition: "middle right", textfont: { size: 10 }, hovertext: text, hoverinfo: "text", showlegend: false,
        cliponaxis: false, marker: { size: 15, color, symbol, line } },
    ], {
      // Titled by the whole root id and a number: trees of one trace replayed several times
      // ("t36:trace_0282", "t41:trace_0282") all read "tree trace_0282" before.
      title: { text: treeTitle(tree, index), font: { size: 13 }, x: 0 },
      margin: { l: 30, r: Math.max(30, 12 + 6.2 * longest), t: 30, b: 30 }, height,
      xaxis: { title: { text: "depth" }, dtick: 1, zeroline: false, range: [-0.3, Math.max(...nodes.map((n) => n.depth)) + 0.8] },
      yaxis: { visible: false, autorange: "reversed" }, hovermode: "closest", plot_bgcolor: "#fff", paper_bgcolor: "rgba(0,0,0,0)",
    }, plotConfig());
  });
}

// Lanes top to bottom: the root, then each session followed by its own subtree (depth first,
// siblings in the tree view's order), so a parent sits just above its children.
function laneOrder(tree) {
  const kids = new Map();
  const ids = new Set(tree.nodes.map((n) => n.id));
  for (const n of tree.nodes) {
    if (n.id === tree.root) continue;
    const parent = ids.has(n.parent) ? n.parent : tree.root;
    if (!kids.has(parent)) kids.set(parent, []);
    kids.get(parent).push(n);
  }
  const byId = new Map(tree.nodes.map((n) => [n.id, n]));
  const out = [], stack = [byId.get(tree.root)].filter(Boolean);
  while (stack.length) {
    const n = stack.pop();
    out.push(n);
    const children = (kids.get(n.id) || []).slice().sort((a, b) => b.y - a.y);
    stack.push(...children);
  }
  // Any session the walk missed (a cycle in bad data) still gets its lane.
  for (const n of tree.nodes) if (!out.includes(n)) out.push(n);
  return out;
}

export function treeTitle(tree, index) {
  return `Tree ${index + 1} · ${tree.root}: ${tree.sessions} sessions, ${tree.bounced} bounced`;
}

// What the colours and marks of the tree view mean, in the mode shown, with the workers that
// appear (grey included: a session none of whose requests named a worker, such as a root whose
// requests fell outside the scanned records).
export function treeLegend(el, data, mode, ids = {}) {
  if (!el) return;
  const nodes = ((data && data.trees) || []).flatMap((t) => t.nodes);
  const workers = new Set();
  let grey = false;
  for (const n of nodes) {
    const w = mode === "inference" ? n.inference_worker : n.client_workers.length ? n.client_workers[0] : null;
    if (w === null || w === undefined) grey = true; else workers.add(w);
  }
  const item = (color, text, shape = "dot") => {
    const span = document.createElement("span");
    span.className = "legend-item";
    const mark = document.createElement("i");
    mark.className = `legend-${shape}`;
    mark.style.background = color;
    span.append(mark, text);
    return span;
  };
  const kind = mode === "inference" ? "inference worker" : "client worker";
  const items = [...workers].sort((a, b) => a - b).map((w) => item(workerColor(w),
    mode === "inference" ? inferenceName(w, ids).full.replace("worker", kind) : `${kind} ${w}`));
  if (nodes.some((n) => n.bounced)) {
    const bounce = item("transparent", "bounce: a session that changed client worker", "diamond");
    items.push(bounce);
  }
  if (grey) items.push(item("#c0c4cc", mode === "inference" ? "no worker reported (first turn unanswered or outside the scanned requests)" : "no request of its own in the scanned requests"));
  el.replaceChildren(...items);
  el.hidden = items.length === 0;
}

// The trees over time: one swim-lane chart per tree, each session a lane (in the tree view's
// order), each request a bar from its send to its last token, coloured by the inference worker
// that served it (or the client worker, in that mode); a diamond where a session changed
// client worker (a bounce: the worker it left keeps an orphaned copy of its history). Hover: the
// request's turn, times, both workers and its cached share.
export function drawTimelines(container, data, mode, ids = {}) {
  if (!container) return;
  container.innerHTML = "";
  const trees = (data && data.trees) || [];
  const timed = trees.filter((t) => t.nodes.some((n) => (n.requests || []).length));
  if (!timed.length) {
    container.textContent = trees.length ? "The stored trees carry no request times." : "No records stored for this run.";
    return;
  }
  const boxes = timed.map(() => {
    const box = document.createElement("div");
    box.className = "timeline";
    container.appendChild(box);
    return box;
  });
  timed.forEach((tree, k) => {
    const index = trees.indexOf(tree);
    const lanes = laneOrder(tree);
    const laneOf = new Map(lanes.map((n, i) => [n.id, i]));
    const byColour = new Map();
    const bx = [], by = [], bt = [];
    let first = Infinity, last = 0;
    for (const n of lanes) {
      let prev = null;
      for (const [turn, start, end, client, inference, cached, prompt, error] of n.requests || []) {
        const key = mode === "inference" ? inference : client;
        const k2 = key === null || key === undefined ? "none" : key;
        if (!byColour.has(k2)) byColour.set(k2, { base: [], x: [], y: [], text: [] });
        const g = byColour.get(k2);
        const lane = laneOf.get(n.id);
        const hit = prompt ? `${cached ?? "?"}/${prompt} cached (${Math.round((100 * (cached || 0)) / prompt)} %)` : "no usage";
        const inf = inference === null || inference === undefined ? "?" : inferenceName(inference, ids).full;
        g.base.push(start); g.x.push(Math.max(end - start, 0.001)); g.y.push(lane);
        g.text.push(`<b>${n.id}</b> turn ${turn}<br>${start.toFixed(2)}–${end.toFixed(2)} s` +
          `<br>client worker ${client ?? "?"} · inference ${inf}<br>${hit}${error ? `<br><b>error</b>: ${error}` : ""}`);
        if (prev !== null && client !== null && client !== undefined && client !== prev) {
          bx.push(start); by.push(lane);
          bt.push(`<b>${n.id}</b> turn ${turn}: bounced from client worker ${prev} to ${client}` +
            `<br>worker ${prev} keeps an orphaned copy of its history`);
        }
        if (client !== null && client !== undefined) prev = client;
        first = Math.min(first, start);
        last = Math.max(last, end);
      }
    }
    const kind = mode === "inference" ? "inference" : "client";
    const traces = [...byColour.entries()].sort((a, b) => (a[0] === "none") - (b[0] === "none") || a[0] - b[0])
      .map(([key, g]) => ({
        type: "bar", orientation: "h", base: g.base, x: g.x, y: g.y, hovertext: g.text, hoverinfo: "text",
        name: key === "none" ? "no worker" : mode === "inference" ? inferenceName(key, ids).short : `${kind} ${key}`,
        marker: { color: key === "none" ? "#c0c4cc" : workerColor(key), line: { width: 0.5, color: "rgba(0,0,0,0.35)" } },
        width: 0.62,
      }));
    if (bx.length) {
      traces.push({ type: "scatter", mode: "markers", x: bx, y: by, hovertext: bt, hoverinfo: "text", name: "bounce",
        marker: { symbol: "diamond", size: 11, color: "rgba(0,0,0,0)", line: { width: 2.5, color: "#d93025" } } });
    }
    const labels = lanes.map((n) => `${"· ".repeat(n.depth)}${n.id.split(":").pop()}`);
    // The tree's own span (a tree replayed late sat in the last tenth of the run's range).
    const pad = Math.max(0.05, 0.03 * (last - first));
    window.Plotly.newPlot(boxes[k], traces, {
      title: { text: treeTitle(tree, index), font: { size: 13 }, x: 0 },
      barmode: "overlay", height: Math.max(124, 24 * lanes.length + 96), hovermode: "closest",
      margin: { l: 12, r: 16, t: 30, b: 40 },
      xaxis: { title: { text: "run time (s)", standoff: 4 }, ticksuffix: " s", zeroline: false, range: [Math.max(0, first - pad), last + pad] },
      yaxis: { tickmode: "array", tickvals: lanes.map((_, i) => i), ticktext: labels, autorange: "reversed",
        automargin: true, tickfont: { size: 10 }, showgrid: true, zeroline: false },
      showlegend: false, // the legend above the trees names every colour and the diamond
      plot_bgcolor: "#fff", paper_bgcolor: "rgba(0,0,0,0)",
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
