// Charts of a run, shared by the live page, the report and the offline HTML export.
//
// No imports (the export inlines this file next to plotly.js): Plotly is the global that
// /static/plotly/plotly.min.js defines. A RunView owns every chart of one run page. It is fed
// samples ({seq, t_s, data}: slim ones from the history, whole ones from the socket), keeps the
// series, and draws in place: time series grow with Plotly.extendTraces, the "latest" panels
// (worker bars and table, migration heatmap, inference workers) are replaced with
// Plotly.react, at most once per animation frame however many samples arrived. Charts
// scrolled out of view keep their pending points and draw when they come back.

const PALETTE = [
  "#2458d6", "#e8710a", "#1e8e3e", "#d93025", "#9334e6", "#12b5cb", "#c5221f", "#f9ab00",
  "#5f6368", "#185abc", "#b06000", "#137333", "#a50e0e", "#681da8", "#007b83", "#795548",
];
const PCT_STYLE = { p50: { color: "#2458d6" }, p90: { color: "#e8710a" }, p99: { color: "#d93025" } };
const CATEGORY_COLORS = {
  connect: "#5f6368", timeout: "#f9ab00", http_4xx: "#9334e6", http_429: "#e8710a",
  http_5xx: "#d93025", stream_broken: "#12b5cb", bad_payload: "#795548", cancelled: "#9aa0a6",
};
const NO_ERRORS = {
  text: "no errors", showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5,
  font: { size: 14, color: "#1e8e3e" },
};
const FRAME_BUDGET_MS = 12;
const SLOW_REDRAW_MS = 3000;
const COUNTER_REDRAW_MS = 2000;
const CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };

// Server worker ids can be long (Dynamo's are 20-digit numbers): their tail names them.
function shortId(id) {
  const s = String(id);
  return s.length > 8 ? `…${s.slice(-6)}` : s;
}

// An inference worker as the server names it: records use small indices, and a server with
// long instance ids has them in the summary's inference_worker_ids ({"0": "1767…"}).
export function inferenceName(index, ids) {
  const id = ids && ids[String(index)];
  return id === undefined ? { short: `w${index}`, full: `worker ${index}` } : { short: shortId(id), full: `worker ${id}` };
}

const percent = (part, whole) => (typeof part === "number" && whole > 0 ? (100 * part) / whole : null);

export function workerColor(i) {
  if (i < PALETTE.length) return PALETTE[i];
  return `hsl(${(i * 137.508) % 360}, 62%, ${i % 2 ? 42 : 55}%)`;
}

function layout(title, yTitle, extra = {}) {
  return {
    title: { text: title, font: { size: 14 }, x: 0, xanchor: "left" },
    margin: { l: 56, r: 22, t: 36, b: 30 },
    height: 270,
    // Run time on x: a tick suffix instead of an axis title leaves room for the legend. Fixed
    // margins (room for the last tick label on the right), no automargin: with it the last
    // label's width moved the margin as the run grew and plotly drew the chart twice. Tick
    // labels may overflow (they fit in the margins): plotly otherwise measures every label.
    xaxis: { ticksuffix: " s", zeroline: false, ticklabeloverflow: "allow" },
    yaxis: { title: { text: yTitle }, rangemode: "tozero", zeroline: false, ticklabeloverflow: "allow" },
    legend: { orientation: "h", y: -0.12, yanchor: "top", font: { size: 11 } },
    hovermode: "x unified",
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: "#fff",
    ...extra,
  };
}

// One formatter (toLocaleString builds one per call: the worker table's 448 cells per snapshot).
const INTEGER = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });

export function fmt(value, digits = 1) {
  if (value === null || value === undefined || Number.isNaN(value)) return "—";
  if (typeof value !== "number") return String(value);
  if (Math.abs(value) >= 1e6) return (value / 1e6).toFixed(2) + " M";
  if (Math.abs(value) >= 1e4) return INTEGER.format(Math.round(value));
  if (Number.isInteger(value)) return Math.abs(value) < 1000 ? String(value) : INTEGER.format(value);
  return value.toFixed(digits);
}

export function fmtBytes(n) {
  if (n === null || n === undefined) return "—";
  if (n >= 1 << 30) return (n / (1 << 30)).toFixed(2) + " GiB";
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + " MiB";
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(0) + " KiB";
  return n + " B";
}

export function fmtDuration(s) {
  if (s === null || s === undefined) return "—";
  if (s < 90) return `${Math.round(s)} s`;
  if (s < 5400) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  return `${(s / 3600).toFixed(1)} h`;
}

// One chart: its element, its traces, the points waiting to be drawn.
class Chart {
  constructor(el, traces, lay) {
    this.el = el;
    this.nTraces = traces.length;
    this.pending = null;
    this.visible = true;
    this.ready = !!el;
    if (el) window.Plotly.newPlot(el, traces, lay, CONFIG);
  }
  // xs/ys: one array per trace (same length as traces)
  add(indices, xs, ys) {
    if (!this.ready) return;
    if (!this.pending) this.pending = { idx: indices, x: indices.map(() => []), y: indices.map(() => []) };
    const p = this.pending;
    for (let k = 0; k < indices.length; k++) {
      let j = p.idx.indexOf(indices[k]);
      if (j < 0) { p.idx.push(indices[k]); p.x.push([]); p.y.push([]); j = p.idx.length - 1; }
      const px = p.x[j], py = p.y[j], sx = xs[k], sy = ys[k];
      for (let n = 0; n < sx.length; n++) { px.push(sx[n]); py.push(sy[n]); }
    }
  }
  flush() {
    if (!this.ready || !this.pending) return false;
    const p = this.pending;
    this.pending = null;
    window.Plotly.extendTraces(this.el, { x: p.x, y: p.y }, p.idx);
    return true;
  }
  addTraces(traces) {
    if (!this.ready) return;
    this.flush();
    window.Plotly.addTraces(this.el, traces);
    this.nTraces += traces.length;
  }
}

export class RunView {
  // root: the page element; opts: {intervalS, workerIds (index -> the server's worker id)}
  constructor(root, opts = {}) {
    this.root = root;
    this.$ = (sel) => root.querySelector(sel);
    this.lastSeq = -1;
    this.lastPointT = -Infinity;
    this.prevPointT = null;
    this.intervalS = opts.intervalS || 1.0;
    this.workerIds = opts.workerIds || {};
    this.workers = 0;
    this.categories = [];
    this.latest = null;
    this.leak = null;
    this.frame = null;
    this.drawnSeqs = [];
    this.charts = {};
    this.panelDirty = {};
    this.build();
    this.observe();
  }

  build() {
    const c = this.charts;
    const el = (id) => this.$(`#${id}`);
    // The three latency percentiles: one figure of three subplots (one plotly redraw per
    // snapshot instead of three), drawn in #chart-ttft, the two other cells hidden. Side by
    // side on a wide page, stacked on a narrow one. Trace 3k+i: metric k, percentile i.
    const host = el("chart-ttft");
    for (const id of ["chart-itl", "chart-latency"]) { const o = el(id); if (o) o.hidden = true; }
    if (host) host.classList.add("latency-subplots");
    const wide = !host || host.clientWidth === 0 || host.clientWidth >= 760;
    const metrics = [["TTFT", "Time to first token"], ["ITL", "Inter-token latency"], ["latency", "End-to-end latency"]];
    const traces = [], axes = {}, titles = [];
    metrics.forEach(([short, long], k) => {
      const sx = k ? `${k + 1}` : "";
      for (const p of ["p50", "p90", "p99"]) {
        traces.push({
          name: p, x: [], y: [], mode: "lines", xaxis: `x${sx}`, yaxis: `y${sx}`, legendgroup: p, showlegend: k === 0,
          line: { width: p === "p50" ? 2 : 1.5, ...PCT_STYLE[p] },
          hovertemplate: `%{y:.1f} ms<extra>${short} ${p}</extra>`,
        });
      }
      const dom = wide ? [k / 3 + (k ? 0.03 : 0), (k + 1) / 3 - (k < 2 ? 0.03 : 0)] : [0, 1];
      const ydom = wide ? [0, 1] : [(2 - k) / 3 + 0.07, (3 - k) / 3 - 0.04];
      axes[`xaxis${sx}`] = { ticksuffix: " s", zeroline: false, ticklabeloverflow: "allow", domain: dom, anchor: `y${sx}`,
        ...(k ? { matches: "x" } : {}) };
      axes[`yaxis${sx}`] = { title: { text: "ms", standoff: 4 }, rangemode: "tozero", zeroline: false, ticklabeloverflow: "allow",
        domain: ydom, anchor: `x${sx}` };
      titles.push({ text: `<b>${long}</b> (ms)`, showarrow: false, xref: `x${sx} domain`, yref: `y${sx} domain`,
        x: 0, y: 1, xanchor: "left", yanchor: "bottom", font: { size: 13 } });
    });
    c.latencies = new Chart(host, traces, layout("Latency percentiles per interval", "ms", {
      ...axes, annotations: titles, height: wide ? 290 : 640,
      margin: { l: 56, r: 22, t: wide ? 58 : 76, b: 30 },
      // Top right beside the title; on a narrow page, on a line of its own under it.
      legend: wide ? { orientation: "h", x: 1, xanchor: "right", y: 1, yanchor: "top", yref: "container", font: { size: 11 } }
        : { orientation: "h", x: 0, xanchor: "left", y: 1 - 30 / 640, yanchor: "top", yref: "container", font: { size: 11 } },
    }));
    c.throughput = new Chart(el("chart-throughput"), [
      { name: "requests/s", x: [], y: [], mode: "lines", line: { color: "#1e8e3e", width: 2 } },
      { name: "errors/s", x: [], y: [], mode: "lines", line: { color: "#d93025", width: 1.5 } },
    ], layout("Throughput, per interval", "requests / s"));
    c.errors = new Chart(el("chart-errors"), [
      { name: "all errors", x: [], y: [], mode: "lines", line: { color: "#1d2330", width: 1.5 } },
    ], layout("Errors by category (cumulative)", "errors", {
      hovermode: "x unified", annotations: [NO_ERRORS], showlegend: true,
    }));
    c.copies = new Chart(el("chart-copies"), [], layout("Session copies per client worker", "copies", { hovermode: "closest" }));
    c.orphans = new Chart(el("chart-orphans"), [
      { name: "all workers", x: [], y: [], mode: "lines", line: { color: "#1d2330", width: 3 } },
    ], layout("Orphaned session copies (the leak)", "orphaned copies", { hovermode: "closest" }));
    c.bytes = new Chart(el("chart-bytes"), [], layout("Cached history per client worker", "MiB", { hovermode: "closest" }));
    c.affinity = new Chart(el("chart-affinity"), [
      { name: "binds", x: [], y: [], mode: "lines", line: { color: "#2458d6" } },
      { name: "closes", x: [], y: [], mode: "lines", line: { color: "#1e8e3e" } },
      { name: "early closes", x: [], y: [], mode: "lines", line: { color: "#d93025", width: 2.5 } },
      { name: "keys bound", x: [], y: [], mode: "lines", line: { color: "#9334e6", dash: "dot" } },
    ], layout("Affinity events (cumulative)", "events"));
    // Placement as shares (runs of any length compare): lineage holds 0 % split, 100 % on root.
    const share = (name, color, dash) => ({ name, x: [], y: [], mode: "lines", line: { color, width: 2, dash },
      hovertemplate: `${name}: %{y:.1f} %<extra></extra>` });
    c.placement = new Chart(el("chart-placement"), [
      share("trees split", "#d93025"),
      share("child requests on root's worker", "#1e8e3e"),
      share("key misses", "#9334e6", "dot"),
    ], layout("Placement over the run (cumulative shares)", "share", {
      yaxis: { title: { text: "share" }, range: [0, 105], zeroline: false, ticksuffix: " %", ticklabeloverflow: "allow" },
      hovermode: "x unified", legend: { orientation: "h", y: -0.12, yanchor: "top", font: { size: 11 } },
    }));
    c.migrations = new Chart(el("chart-migration-total"), [
      { name: "worker switches", x: [], y: [], mode: "lines", line: { color: "#e8710a", width: 2 } },
      { name: "sessions on >1 worker", x: [], y: [], mode: "lines", line: { color: "#9334e6" } },
    ], layout("Client-worker migrations (cumulative)", "count"));
    // The endpoint's own /metrics (a point per scrape): KV use and queue per server worker,
    // with the overall line; workers get their traces as they first appear.
    c.smKv = new Chart(el("chart-sm-kv"), [
      { name: "mean of workers", x: [], y: [], mode: "lines", line: { color: "#1d2330", width: 2.5 },
        hovertemplate: "mean: %{y:.1f} %<extra></extra>" },
    ], layout("KV-cache usage per server worker", "% of KV blocks", { hovermode: "closest" }));
    c.smQueue = new Chart(el("chart-sm-queue"), [
      { name: "waiting", x: [], y: [], mode: "lines", line: { color: "#d93025", width: 2.5 },
        hovertemplate: "waiting (all): %{y}<extra></extra>" },
      { name: "running", x: [], y: [], mode: "lines", line: { color: "#2458d6", width: 1.5, dash: "dot" },
        hovertemplate: "running (all): %{y}<extra></extra>" },
    ], layout("Queue depth and running requests", "requests", { hovermode: "closest" }));
    this.smLastT = -Infinity;
    this.smWorkers = new Map(); // server worker id -> its trace, 1-based after the overall one
    // Latest-only panels: drawn with Plotly.react.
    this.workerBarsEl = el("chart-workers");
    this.heatmapEl = el("chart-heatmap");
    this.inferenceEl = el("chart-inference");
  }

  // Which chart elements are in (or near) view; null = unknown, draw everything.
  observe() {
    if (!("IntersectionObserver" in window)) return;
    const els = [...Object.values(this.charts).map((c) => c.el), this.workerBarsEl, this.heatmapEl, this.inferenceEl]
      .filter(Boolean);
    this.visibleEls = new Set();
    this.observer = new IntersectionObserver((entries) => {
      let woke = false;
      for (const e of entries) {
        if (e.isIntersecting) { this.visibleEls.add(e.target); woke = true; } else this.visibleEls.delete(e.target);
      }
      if (woke) this.schedule();
    }, { rootMargin: "200px" });
    for (const el of els) this.observer.observe(el);
  }

  ensureWorkers(k) {
    if (k <= this.workers) return;
    const from = this.workers;
    const traces = (unit) => Array.from({ length: k - from }, (_, n) => ({
      name: `worker ${from + n}`, x: [], y: [], mode: "lines",
      line: { color: workerColor(from + n), width: 1.4 }, showlegend: false,
      hovertemplate: `worker ${from + n}: %{y}${unit}<extra></extra>`,
    }));
    this.charts.copies.addTraces(traces(""));
    this.charts.orphans.addTraces(traces(""));
    this.charts.bytes.addTraces(traces(" MiB"));
    this.workers = k;
  }

  ensureCategories(names) {
    const fresh = names.filter((n) => !this.categories.includes(n));
    if (!fresh.length) return;
    if (!this.categories.length && this.charts.errors.ready) {
      window.Plotly.relayout(this.charts.errors.el, { annotations: [] });
    }
    this.charts.errors.addTraces(fresh.map((n) => ({
      name: n, x: [], y: [], mode: "lines", stackgroup: "errors",
      line: { color: CATEGORY_COLORS[n] || "#5f6368" },
    })));
    this.categories.push(...fresh);
  }

  // Ingest one sample (slim or whole). Returns false for a duplicate or older one.
  ingest(sample) {
    if (sample.seq <= this.lastSeq) return false;
    this.lastSeq = sample.seq;
    const d = sample.data || {};
    const t = d.t_s ?? sample.t_s;
    const c = this.charts;
    // Percentiles over time: the intervals this sample closed (dedupe by t_s).
    const fresh = (d.recent || []).filter((p) => p.t_s > this.lastPointT).sort((a, b) => a.t_s - b.t_s);
    if (fresh.length) {
      const xs = [], sets = { ttft_ms: [[], [], []], itl_ms: [[], [], []], latency_ms: [[], [], []] }, rps = [], eps = [];
      for (const p of fresh) {
        // Interval width: the smallest gap between points seen (the simulator's intervals are
        // not the spec's snapshot interval), the spec's until two points are known.
        if (this.prevPointT !== null) {
          const gap = p.t_s - this.prevPointT;
          if (gap > 0 && (this.gapS === undefined || gap < this.gapS)) this.gapS = gap;
        }
        this.prevPointT = p.t_s;
        const width = this.gapS || this.intervalS;
        xs.push(p.t_s);
        for (const key of ["ttft_ms", "itl_ms", "latency_ms"]) {
          const v = p[key] || {};
          sets[key][0].push(v.p50 ?? null); sets[key][1].push(v.p90 ?? null); sets[key][2].push(v.p99 ?? null);
        }
        rps.push(p.requests / width);
        eps.push(p.errors / width);
      }
      this.lastPointT = fresh[fresh.length - 1].t_s;
      const x3 = [xs, xs, xs];
      c.latencies.add([0, 1, 2, 3, 4, 5, 6, 7, 8], [...x3, ...x3, ...x3],
        [...sets.ttft_ms, ...sets.itl_ms, ...sets.latency_ms]);
      c.throughput.add([0, 1], [xs, xs], [rps, eps]);
    }
    // Errors by category (cumulative per sample); a category starts from 0 at the sample
    // before it first appeared, so its area rises where the errors began.
    const cats = d.errors_by_category || {};
    const names = Object.keys(cats);
    c.errors.add([0], [[t]], [[d.errors ?? 0]]);
    if (names.length || this.categories.length) {
      const fresh = names.filter((n) => !this.categories.includes(n));
      this.ensureCategories(names);
      const start = this.prevSampleT ?? t;
      c.errors.add(this.categories.map((_, i) => i + 1),
        this.categories.map((n) => (fresh.includes(n) && start < t ? [start, t] : [t])),
        this.categories.map((n) => (fresh.includes(n) && start < t ? [0, cats[n] || 0] : [cats[n] || 0])));
    }
    this.prevSampleT = t;
    // Per-worker books over time.
    const w = d.client_workers;
    if (w) {
      const k = Math.max((w.session_copies || []).length, (w.orphaned_copies || []).length);
      this.ensureWorkers(k);
      const idx = Array.from({ length: k }, (_, i) => i);
      const one = idx.map(() => [t]);
      c.copies.add(idx, one, idx.map((i) => [(w.session_copies || [])[i] || 0]));
      const orphans = w.orphaned_copies || [];
      let total = 0;
      for (const n of orphans) total += n;
      c.orphans.add([0, ...idx.map((i) => i + 1)], [[t], ...one], [[total], ...idx.map((i) => [orphans[i] || 0])]);
      c.bytes.add(idx, one, idx.map((i) => [((w.cached_bytes || [])[i] || 0) / 1048576]));
    }
    this.ingestServerMetrics(d.server_metrics);
    const a = d.affinity;
    if (a) c.affinity.add([0, 1, 2, 3], [[t], [t], [t], [t]], [[a.binds], [a.closes], [a.early_closes], [a.keys_bound]]);
    const r = d.routing;
    if (r) c.migrations.add([0, 1], [[t], [t]], [[r.worker_switches], [r.sessions_multi_worker]]);
    const pl = d.placement;
    if (pl && pl.trees) {
      c.placement.add([0, 1, 2], [[t], [t], [t]], [[percent(pl.trees_split, pl.trees)],
        [percent(pl.child_requests_on_root_worker, pl.child_requests)], [percent(pl.key_misses, pl.keyed_requests)]]);
    }
    this.drawnSeqs.push(sample.seq);
    return true;
  }

  // One point per scrape (snapshots repeat a scrape until the next one: deduped by its t_s).
  ingestServerMetrics(sm) {
    if (!sm || !sm.available || sm.t_s === null || sm.t_s === undefined || sm.t_s <= this.smLastT) return;
    this.smLastT = sm.t_s;
    const c = this.charts, x = sm.t_s, f = sm.figures || {};
    const pct = (v) => (v === null || v === undefined ? null : 100 * v);
    c.smKv.add([0], [[x]], [[pct(f.kv_usage)]]);
    c.smQueue.add([0, 1], [[x], [x]], [[f.queue_depth ?? null], [f.running ?? null]]);
    const w = sm.workers;
    if (!w || !(w.ids || []).length) return;
    const fresh = w.ids.filter((id) => !this.smWorkers.has(id));
    if (fresh.length) {
      const many = this.smWorkers.size + fresh.length > 8;
      const traces = (unit, scale) => fresh.map((id, n) => {
        const i = this.smWorkers.size + n;
        return { name: `w ${shortId(id)}`, x: [], y: [], mode: "lines", showlegend: !many,
          line: { color: workerColor(i), width: 1.3 }, legendgroup: id,
          hovertemplate: `worker ${shortId(id)}: %{y${scale}}${unit}<extra></extra>` };
      });
      if ((w.kv_usage || []).length) c.smKv.addTraces(traces(" %", ":.1f"));
      if ((w.queue_depth || []).length) c.smQueue.addTraces(traces(" waiting", ""));
      fresh.forEach((id) => this.smWorkers.set(id, this.smWorkers.size + 1));
      this.smKvTraces = (this.smKvTraces || 0) + ((w.kv_usage || []).length ? fresh.length : 0);
      this.smQueueTraces = (this.smQueueTraces || 0) + ((w.queue_depth || []).length ? fresh.length : 0);
    }
    const idx = w.ids.map((id) => this.smWorkers.get(id));
    const xs = idx.map(() => [x]);
    if ((w.kv_usage || []).length && this.smKvTraces) {
      c.smKv.add(idx, xs, w.kv_usage.map((v) => [pct(v)]));
    }
    if ((w.queue_depth || []).length && this.smQueueTraces) {
      c.smQueue.add(idx.map((i) => i + 1), xs, w.queue_depth.map((v) => [v]));
    }
  }

  drawServerMetrics(sm) {
    const box = this.$("#server-metrics");
    if (!box || !sm) return;
    const body = this.$("#sm-body");
    if (!sm.available) {
      if (body) body.hidden = true;
      const note = this.$("#sm-note");
      const text = `Unavailable: ${sm.reason}.`;
      if (note && note.textContent !== text) note.textContent = text;
      return;
    }
    if (body) body.hidden = false;
    const kind = this.$("#sm-kind-live");
    if (kind && sm.kind && !kind.textContent) kind.textContent = ` (${sm.kind})`;
    const f = sm.figures || {};
    const put = (key, text) => {
      for (const e of box.querySelectorAll(`[data-sm="${key}"]`)) if (e.textContent !== text) e.textContent = text;
    };
    const pct = (v) => (v === null || v === undefined ? "—" : (100 * v).toFixed(1) + " %");
    put("kv_usage", pct(f.kv_usage));
    put("queue_depth", fmt(f.queue_depth, 0));
    put("running", fmt(f.running, 0));
    put("prefix_hit_ratio", pct(f.prefix_hit_ratio));
    put("requests_total", fmt(f.requests_total, 0));
  }

  // A whole snapshot: its latest-only panels and the KPIs.
  setLatest(sample, leak) {
    if (sample && (!this.latest || sample.seq >= this.latest.seq)) this.latest = sample;
    if (leak) { this.leak = leak; this.leakDirty = true; }
    this.latestDirty = true;
  }

  schedule() {
    if (this.frame !== null) return;
    const raf = window.requestAnimationFrame || ((f) => setTimeout(f, 16));
    this.frame = raf(() => { this.frame = null; this.draw(); });
  }

  // One frame does the cheap DOM work (KPIs, progress, worker table, counters, leak text) and
  // at most FRAME_BUDGET_MS of plotly redraws, the chart drawn longest ago first; the rest
  // waits for the next frames, so no frame blocks the page for long. Charts out of view wait
  // until they are scrolled to; per-worker charts at many workers redraw at most every
  // SLOW_REDRAW_MS. `force` (the first draw, the report, the export) draws everything now.
  draw(force = false) {
    const started = performance.now();
    const cost = {};
    if (this.latestDirty && this.latest) {
      this.latestDirty = false;
      const t0 = performance.now();
      this.drawLatestDom(this.latest.data || {});
      cost.dom = performance.now() - t0;
    }
    if (this.leak && this.leakDirty) { this.leakDirty = false; this.drawLeak(this.leak); }
    const now = performance.now();
    const jobs = [];
    let waiting = Infinity;
    for (const [name, job] of Object.entries(this.jobs())) {
      if (!job.dirty()) continue;
      if (!force && !job.visible()) continue;
      const due = (job.lastAt || 0) + job.minGap;
      if (!force && due > now) { waiting = Math.min(waiting, due - now); continue; }
      jobs.push([name, job]);
    }
    jobs.sort((a, b) => (a[1].lastAt || 0) - (b[1].lastAt || 0));
    // Periodic jobs (counters, per-worker charts) that fall due together take turns: one per
    // round of frames, the others in the next round, so no snapshot pays for all of them.
    if (!force) {
      let periodic = this.periodicInRound ? 1 : 0;
      for (let i = 0; i < jobs.length; i++) {
        if (!jobs[i][1].minGap) continue;
        if (periodic++ > 0) { jobs.splice(i, 1); i -= 1; waiting = Math.min(waiting, 30); }
      }
    }
    let done = 0;
    for (const [name, job] of jobs) {
      if (!force && done > 0 && performance.now() - started > FRAME_BUDGET_MS) break;
      const t0 = performance.now();
      job.run();
      job.lastAt = performance.now();
      if (job.minGap) this.periodicInRound = true;
      cost[name] = job.lastAt - t0;
      done += 1;
    }
    this.lastCost = cost;
    if (done < jobs.length) this.schedule();
    else if (waiting < Infinity) {
      clearTimeout(this.waitTimer);
      this.waitTimer = setTimeout(() => this.schedule(), waiting + 5);
    }
    // A snapshot counts as drawn once no chart in view that is due still waits for it.
    if (done === jobs.length) {
      this.periodicInRound = false;
      const seqs = this.drawnSeqs;
      this.drawnSeqs = [];
      if (this.onDrawn) this.onDrawn(seqs, performance.now() - started, cost);
    } else if (this.onDrawn) this.onDrawn([], performance.now() - started, cost);
  }

  // The plotly work of a frame, by name: dirty? in view? at most how often? what to do?
  jobs() {
    if (this._jobs) return this._jobs;
    const jobs = {};
    const view = this;
    const inView = (el) => () => !el || !this.visibleEls || this.visibleEls.has(el);
    for (const [name, chart] of Object.entries(this.charts)) {
      // Latency and throughput move every second; cumulative counters and, at many workers,
      // the per-worker lines (dozens of traces each) redraw less often.
      const gap = { copies: SLOW_REDRAW_MS, orphans: SLOW_REDRAW_MS, bytes: SLOW_REDRAW_MS,
        errors: COUNTER_REDRAW_MS, affinity: COUNTER_REDRAW_MS, migrations: COUNTER_REDRAW_MS,
        placement: COUNTER_REDRAW_MS }[name] || 0;
      jobs[name] = {
        dirty: () => !!chart.pending,
        visible: inView(chart.el),
        get minGap() { return gap && view.workers > 16 ? gap : 0; },
        run: () => chart.flush(),
      };
    }
    const panel = (key, el, fn) => {
      jobs[key] = {
        dirty: () => !!this.panelDirty[key] && !!this.latest,
        visible: inView(el),
        minGap: 0,
        run: () => { this.panelDirty[key] = false; fn(this.latest.data || {}); },
      };
    };
    panel("workers", this.workerBarsEl, (d) => this.drawWorkerBars(d));
    Object.defineProperty(jobs.workers, "minGap", { get: () => (view.workers > 16 ? COUNTER_REDRAW_MS : 0) });
    panel("inference", this.inferenceEl, (d) => this.drawInference(d));
    Object.defineProperty(jobs.inference, "minGap", { get: () => (view.workers > 16 ? COUNTER_REDRAW_MS : 0) });
    panel("heatmap", this.heatmapEl, (d) => this.drawHeatmap(d));
    this._jobs = jobs;
    return jobs;
  }

  drawLatestDom(d) {
    this.drawKpis(d);
    this.drawServerMetrics(d.server_metrics);
    this.drawProgress(d);
    this.drawWorkerTable(d);
    const a = d.affinity || {};
    const set = (sel, v) => { const e = this.$(sel); if (e) e.textContent = fmt(v, 0); };
    set("#aff-binds", a.binds); set("#aff-closes", a.closes); set("#aff-early", a.early_closes); set("#aff-bound", a.keys_bound);
    set("#migrations-total", d.migrations_total);
    this.drawPlacement(d);
    const early = this.$("#aff-early");
    if (early) early.classList.toggle("bad", (a.early_closes || 0) > 0);
    this.panelDirty.workers = true;
    this.panelDirty.inference = true;
    // The heatmap only changes with the migrations.
    if (d.migrations_total !== this.heatmapTotal || !this.heatmapDrawn) {
      this.heatmapTotal = d.migrations_total;
      this.panelDirty.heatmap = true;
    }
  }

  // The Placement card: the latest figures, or why there are none. A snapshot without the key
  // (a run stored before placement was reported) leaves what the server rendered.
  drawPlacement(d) {
    const box = this.$("#placement");
    if (!box || !("placement" in d)) return;
    const p = d.placement;
    const note = this.$("#placement-note"), body = this.$("#placement-body");
    // Null until a serving worker is reported: "not yet" before any answer, "not reported" after.
    const state = p ? "reported" : (d.requests || 0) > 0 ? "not-reported" : "waiting";
    if (box.dataset.state !== state) {
      box.dataset.state = state;
      if (note) {
        note.hidden = state === "reported";
        if (state !== "reported") note.textContent = state === "waiting" ? note.dataset.waiting : note.dataset.missing;
      }
      if (body) body.hidden = state !== "reported";
      // Plotted while hidden (a live run before its first answer): it takes its width now.
      const chart = this.charts.placement;
      if (state === "reported" && chart && chart.ready) window.Plotly.Plots.resize(chart.el);
    }
    if (!p) return;
    const values = {
      ...p,
      trees_split_pct: percent(p.trees_split, p.trees),
      child_requests_on_root_worker_pct: percent(p.child_requests_on_root_worker, p.child_requests),
      key_misses_pct: percent(p.key_misses, p.keyed_requests),
    };
    for (const e of box.querySelectorAll("[data-pl]")) {
      const v = values[e.dataset.pl];
      const text = e.dataset.pl.endsWith("_pct") ? fmt(v === null ? null : Math.round(10 * v) / 10, 1) : fmt(v, 0);
      if (e.textContent !== text) e.textContent = text;
      if (e.dataset.expect !== undefined) {
        e.classList.toggle("bad", typeof v === "number" && Math.abs(v - Number(e.dataset.expect)) > 1e-9);
      }
    }
  }

  drawKpis(d) {
    const put = (key, text) => {
      for (const e of this.root.querySelectorAll(`[data-kpi="${key}"]`)) {
        if (e.textContent !== text) e.textContent = text;
      }
    };
    put("requests", fmt(d.requests, 0));
    put("requests_per_s", fmt(d.requests_per_s, 2));
    put("errors", fmt(d.errors, 0));
    put("in_flight", fmt(d.in_flight, 0));
    for (const k of ["ttft_ms", "itl_ms", "latency_ms"]) {
      put(`${k}.p50`, fmt((d[k] || {}).p50, 1));
      put(`${k}.p99`, fmt((d[k] || {}).p99, 1));
    }
    const hit = d.prefix_cache_hit_ratio;
    put("prefix_cache_hit_ratio", hit === null || hit === undefined ? "—" : (100 * hit).toFixed(1) + " %");
    const r = d.routing || {};
    put("worker_switches", fmt(r.worker_switches, 0));
    put("orphaned_session_copies", fmt(r.orphaned_session_copies, 0));
    put("rss", fmtBytes(d.rss_bytes));
  }

  drawProgress(d) {
    const bar = this.$("#progress-bar");
    if (!bar) return;
    const pct = Math.round(100 * (d.progress || 0));
    bar.style.width = `${pct}%`;
    const text = this.$("#progress-text");
    if (text) {
      const eta = d.eta_s === null || d.eta_s === undefined ? "" : `, about ${fmtDuration(d.eta_s)} left`;
      text.textContent = `${pct} %${eta} · run time ${fmtDuration(d.t_s)} · ${fmt(d.issued, 0)} sent, ${fmt(d.in_flight, 0)} in flight`;
    }
  }

  drawWorkerBars(d) {
    const w = d.client_workers;
    if (!w) return;
    const k = (w.in_flight || w.session_copies || []).length;
    const ids = Array.from({ length: k }, (_, i) => i);
    if (this.workerBarsEl) {
      const bar = (name, values, color) => ({ type: "bar", name, x: ids, y: values || [], marker: { color } });
      window.Plotly.react(this.workerBarsEl, [
        bar("in flight", w.in_flight, "#2458d6"),
        bar("sticky entries", w.sticky_entries, "#12b5cb"),
        bar("session copies", w.session_copies, "#1e8e3e"),
        bar("orphaned copies", w.orphaned_copies, "#d93025"),
      // The x axis is named in the title: an axis title would sit on the legend below it.
      ], layout("Per client worker, now (x = worker id)", "count", {
        barmode: "group", xaxis: { dtick: k > 24 ? 4 : 1, ticklabeloverflow: "allow" },
        hovermode: "x unified",
      }), CONFIG);
    }
  }

  drawWorkerTable(d) {
    const w = d.client_workers;
    if (!w) return;
    const k = (w.in_flight || w.session_copies || []).length;
    const body = this.$("#workers-body");
    if (!body) return;
    if (body.rows.length !== k) {
      body.innerHTML = "";
      for (let i = 0; i < k; i++) {
        const tr = body.insertRow();
        tr.insertCell().innerHTML = `<span class="swatch" style="background:${workerColor(i)}"></span>${i}`;
        for (let j = 0; j < 7; j++) tr.insertCell().className = "num";
      }
    }
    const cols = [w.in_flight, w.sticky_entries, w.session_copies, w.orphaned_copies, w.cached_bytes, w.completed, w.errors];
    for (let i = 0; i < k; i++) {
      const cells = body.rows[i].cells;
      for (let j = 0; j < cols.length; j++) {
        const v = (cols[j] || [])[i];
        const text = j === 4 ? fmtBytes(v) : fmt(v, 0);
        if (cells[j + 1].textContent !== text) cells[j + 1].textContent = text;
      }
      cells[4].classList.toggle("bad", ((w.orphaned_copies || [])[i] || 0) > 0);
    }
  }

  drawHeatmap(d) {
    if (!this.heatmapEl) return;
    const k = ((d.client_workers || {}).in_flight || []).length || this.workers;
    const pairs = d.migrations || [];
    const z = Array.from({ length: k }, () => new Array(k).fill(null));
    for (const [from, to, n] of pairs) if (from < k && to < k) z[to][from] = n;
    const ids = Array.from({ length: k }, (_, i) => i);
    window.Plotly.react(this.heatmapEl, [{
      type: "heatmap", x: ids, y: ids, z, colorscale: [[0, "#fdd9b5"], [1, "#b42318"]], zmin: 0, hoverongaps: false,
      colorbar: { title: { text: "turns" }, thickness: 10 },
      hovertemplate: "from worker %{x} to worker %{y}: %{z} turns<extra></extra>",
    }], layout("Migrations from → to", "to worker", {
      xaxis: { title: { text: "from worker" }, dtick: k > 24 ? 4 : 1, constrain: "domain", ticklabeloverflow: "allow" },
      yaxis: { title: { text: "to worker" }, dtick: k > 24 ? 4 : 1, autorange: "reversed", ticklabeloverflow: "allow" },
      height: 300, hovermode: "closest",
    }), CONFIG);
    this.heatmapDrawn = true;
    const empty = this.$("#heatmap-empty");
    if (empty) empty.hidden = pairs.length > 0;
  }

  drawInference(d) {
    const inf = d.inference_workers;
    const note = this.$("#inference-note");
    if (!this.inferenceEl || !inf) return;
    const reported = (inf.ids || []).length > 0;
    if (note) note.hidden = reported;
    this.inferenceEl.hidden = !reported;
    if (!reported) return;
    // The server's own worker ids (shortened; whole on hover) when it named them.
    const names = inf.ids.map((i) => inferenceName(i, this.workerIds));
    const x = names.map((n) => n.short);
    const traces = [
      { type: "bar", name: "requests", x, y: inf.requests, marker: { color: "#2458d6" },
        customdata: names.map((n) => n.full), hovertemplate: "%{customdata}: %{y} requests<extra></extra>" },
      { type: "scatter", mode: "markers+lines", name: "cached-token ratio", x, y: inf.cached_token_ratio,
        yaxis: "y2", marker: { color: "#1e8e3e" }, line: { width: 1 } },
    ];
    if (inf.bound_keys) traces.push({ type: "bar", name: "bound keys", x, y: inf.bound_keys, marker: { color: "#9334e6" } });
    // The x axis is named in the title (an axis title would sit on the legend); long server
    // ids are shown by their tail, level, so they never tilt into the legend.
    // Too narrow for them side by side (a phone): upright, with the legend at the very bottom.
    const named = Object.keys(this.workerIds).length > 0;
    const upright = named && this.inferenceEl.clientWidth / Math.max(1, x.length) < 64;
    const title = named ? "Inference workers (x = server id, last digits)" : "Inference workers (x = worker)";
    window.Plotly.react(this.inferenceEl, traces, layout(title, "requests / keys", {
      barmode: "group",
      xaxis: { type: "category", tickangle: upright ? -90 : 0, tickfont: { size: named ? 10 : 12 }, ticklabeloverflow: "allow" },
      yaxis2: { title: { text: "cached tokens, % of prompt" }, overlaying: "y", side: "right", range: [0, 1], showgrid: false,
        tickmode: "linear", dtick: 0.25, tickformat: ".0%" },
      margin: { l: 56, r: 56, t: 36, b: upright ? 84 : 30 }, hovermode: "x unified",
      ...(upright ? { height: 320, legend: { orientation: "h", x: 0, y: 0, yanchor: "bottom", yref: "container", font: { size: 11 } } } : {}),
    }), CONFIG);
  }

  drawLeak(v) {
    const box = this.$("#leak");
    if (!box) return;
    box.className = `leak leak-${v.level}`;
    const msg = this.$("#leak-message");
    if (msg && msg.textContent !== v.message) msg.textContent = v.message;
    const badge = this.$("#leak-badge");
    if (badge) badge.textContent = v.level === "ok" ? "no leak" : v.level === "growing" ? "leak growing" : "leaked";
    const body = this.$("#leak-body");
    if (!body) return;
    const rows = v.workers.filter((w) => w.orphaned > 0 || w.orphans_per_min > 0)
      .sort((a, b) => b.orphans_per_min - a.orphans_per_min || b.orphaned - a.orphaned).slice(0, 16);
    body.innerHTML = rows.map((w) => `<tr><td>${w.worker}</td><td class="num">${w.orphaned}</td>` +
      `<td class="num">${w.orphans_per_min > 0 ? "+" : ""}${w.orphans_per_min}</td><td class="num">${w.copies}</td>` +
      `<td class="num">${w.copies_per_min}</td><td class="num">${fmtBytes(w.cached_bytes)}</td></tr>`).join("");
    const table = this.$("#leak-table");
    if (table) table.hidden = rows.length === 0;
  }

  // Feed a history message (or the server-rendered page data): slim samples, then the latest.
  loadHistory(history) {
    for (const s of history.samples || []) this.ingest(s);
    if (history.latest) this.setLatest(history.latest, history.leak);
    else if (history.leak) this.setLatest(null, history.leak);
    this.schedule();
  }

  // Feed one live message.
  push(message) {
    const fresh = this.ingest(message);
    if (fresh) this.setLatest(message, message.leak);
    this.schedule();
    return fresh;
  }
}

// -- report-only charts -----------------------------------------------------------------------

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
  window.Plotly.newPlot(el, traces, lay, CONFIG);
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
    }, CONFIG);
  });
}

// The run page without the socket: history + latest from the page's data (report, export).
export function drawRunPage(root, page) {
  const view = new RunView(root, { intervalS: page.interval_s, workerIds: page.inference_worker_ids });
  view.loadHistory(page.history);
  view.draw(true);
  drawSlices(root.querySelector("#chart-depth"), page.by_depth || {}, "Latency by tree depth", ["0", "1", "2", "3+"]);
  drawSlices(root.querySelector("#chart-branch"), page.by_branch_mode || {}, "Latency by branch mode", ["root", "fork", "spawn"]);
  return view;
}
