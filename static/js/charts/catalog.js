// What each chart of a run draws: its traces and how it reads a snapshot. The charts
// themselves (id, title, kind, the snapshot fields they read, how often they redraw) are
// declared once, on the server, in aiperf_web/live/charts.py; the page receives that list
// (json_script "chart-specs") and the view looks each entry up here by id.
//
// A "series" chart: build(el, spec, view) -> Chart, ingest(chart, s, view) with s = {t, d,
// points, widths}: the sample's time, its data, the latency intervals it closed, and their
// widths (s). A "latest" chart: draw(el, d, view, spec) from the latest whole snapshot;
// changed(d, view) (optional) says whether it needs drawing again.
import { inferenceName, shortId, workerColor } from "./format.js";
import { Chart, TIME_AXIS, isNarrow, layout, plotConfig } from "./plot.js";
import { ERROR_COLOURS } from "../vocabulary.js";

const PCT_STYLE = { p50: { color: "#2458d6" }, p90: { color: "#e8710a" }, p99: { color: "#d93025" } };
const NO_ERRORS = {
  text: "no errors", showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5,
  font: { size: 14, color: "#1e8e3e" },
};
// The colour of a chart's "all" line (all errors, all workers, mean of workers): the page's
// chart text colour, so it stays visible in dark mode (#1d2330 vanished on the dark card).
const TOTAL = () => (typeof getComputedStyle === "function"
  && getComputedStyle(document.documentElement).getPropertyValue("--chart-fg").trim()) || "#1d2330";
const line = (name, color, extra = {}) => ({ name, x: [], y: [], mode: "lines", line: { color, ...extra } });

// Per-worker lines after `fixed` fixed traces. Up to MANY_WORKERS workers, one line each (added
// as workers appear). Beyond, the TOP_WORKERS with the highest latest value, in their worker
// colours, re-chosen as the run goes (a redraw of the whole chart, at most every RERANK_SAMPLES
// samples): 64 lines cannot be told apart, and each redraw cost 40-160 ms of the main thread; the
// leak table names every leaking worker.
const MANY_WORKERS = 16;
const TOP_WORKERS = 8;
const RERANK_SAMPLES = 10;

function perWorker(unit, scale = 1, fixed = 0) {
  const trace = (w) => ({
    name: `worker ${w}`, x: [], y: [], mode: "lines", line: { color: workerColor(w), width: 1.4 },
    showlegend: false, hovertemplate: `worker ${w}: %{y}${unit}<extra></extra>`,
  });
  return {
    add(chart, t, values) {
      const k = values.length;
      // Every worker's series, for the re-chosen lines.
      const store = chart.workerStore || (chart.workerStore = { t: [], y: [], shown: [], since: 0 });
      store.t.push(t);
      for (let w = 0; w < k; w++) (store.y[w] || (store.y[w] = new Array(store.t.length - 1).fill(null))).push((values[w] || 0) / scale);
      if (k <= MANY_WORKERS) {
        const have = chart.nTraces - fixed;
        if (k > have) chart.addTraces(Array.from({ length: k - have }, (_, n) => trace(have + n)));
        const idx = Array.from({ length: k }, (_, i) => i + fixed);
        chart.add(idx, idx.map(() => [t]), values.map((v) => [(v || 0) / scale]));
        return;
      }
      store.since += 1;
      const top = () => Array.from({ length: k }, (_, w) => w)
        .sort((a, b) => (values[b] || 0) - (values[a] || 0) || a - b).slice(0, TOP_WORKERS).sort((a, b) => a - b);
      if (!store.shown.length || (store.since >= RERANK_SAMPLES && top().join() !== store.shown.join())) {
        store.shown = top();
        store.since = 0;
        // pending: points added since the last draw (the fixed traces' are kept; the workers'
        // lines come whole from the store).
        chart.rebuild = (range, pending) => {
          const keep = (chart.data || []).slice(0, fixed).map((tr, i) => {
            const j = pending ? pending.idx.indexOf(i) : -1;
            return j < 0 ? tr : { ...tr, x: [...tr.x, ...pending.x[j]], y: [...tr.y, ...pending.y[j]] };
          });
          const lines = store.shown.map((w) => ({ ...trace(w), x: store.t.slice(), y: store.y[w].slice() }));
          const base = chart.layout;
          chart.baseTitle = chart.baseTitle || base.title.text;
          const lay = { ...base, title: { ...base.title, text: `${chart.baseTitle}` +
            ` <span style="font-size:11px;color:#667085">· the ${TOP_WORKERS} highest of ${k} workers</span>` } };
          if (range) lay.xaxis = { ...lay.xaxis, range: range.slice(), autorange: false };
          window.Plotly.react(chart.el, [...keep, ...lines], lay, chart.config);
          chart.nTraces = fixed + lines.length;
        };
        return;
      }
      const idx = store.shown.map((_, i) => i + fixed);
      chart.add(idx, idx.map(() => [t]), store.shown.map((w) => [(values[w] || 0) / scale]));
    },
  };
}

const workerSeries = (field, unit, scale = 1) => {
  const lines = perWorker(unit, scale);
  return {
    build: (el, spec) => new Chart(el, [], layout(spec.title, spec.y_title, { hovermode: "closest" })),
    ingest(chart, s) {
      const w = s.d.client_workers;
      if (w && w[field]) lines.add(chart, s.t, w[field]);
    },
  };
};

const orphanLines = perWorker("", 1, 1);

export const CATALOG = {
  // The three latency percentiles: one figure of three subplots (one plotly redraw per snapshot
  // instead of three). Side by side on a wide page, stacked on a narrow one. Trace 3k+i: metric
  // k, percentile i.
  "chart-ttft": {
    build(el, spec) {
      const wide = !el || el.clientWidth === 0 || el.clientWidth >= 760;
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
        axes[`xaxis${sx}`] = { ...TIME_AXIS, domain: dom, anchor: `y${sx}`, ...(k ? { matches: "x" } : {}) };
        axes[`yaxis${sx}`] = { title: { text: "ms", standoff: 4 }, rangemode: "tozero", zeroline: false,
          ticklabeloverflow: "allow", domain: ydom, anchor: `x${sx}` };
        titles.push({ text: `<b>${long}</b> (ms)`, showarrow: false, xref: `x${sx} domain`, yref: `y${sx} domain`,
          x: 0, y: 1, xanchor: "left", yanchor: "bottom", font: { size: 13 } });
      });
      return new Chart(el, traces, layout(spec.title, spec.y_title, {
        ...axes, annotations: titles, height: wide ? 290 : 640,
        margin: { l: 56, r: 22, t: wide ? 58 : 76, b: 30 },
        // Top right beside the title; on a narrow page, on a line of its own under it.
        legend: wide ? { orientation: "h", x: 1, xanchor: "right", y: 1, yanchor: "top", yref: "container", font: { size: 11 } }
          : { orientation: "h", x: 0, xanchor: "left", y: 1 - 30 / 640, yanchor: "top", yref: "container", font: { size: 11 } },
      }));
    },
    ingest(chart, s) {
      if (!s.points.length) return;
      const xs = s.points.map((p) => p.t_s);
      const ys = [];
      for (const key of ["ttft_ms", "itl_ms", "latency_ms"]) {
        // An interval with no answered request has no percentile (a gap, never a 0).
        for (const q of ["p50", "p90", "p99"]) ys.push(s.points.map((p) => (p.requests > 0 ? (p[key] || {})[q] ?? null : null)));
      }
      chart.add([0, 1, 2, 3, 4, 5, 6, 7, 8], ys.map(() => xs), ys);
    },
  },
  "chart-throughput": {
    build: (el, spec) => new Chart(el, [
      line("requests/s", "#1e8e3e", { width: 2 }),
      line("errors/s", "#d93025", { width: 1.5 }),
    ], layout(spec.title, spec.y_title)),
    ingest(chart, s) {
      if (!s.points.length) return;
      const xs = s.points.map((p) => p.t_s);
      chart.add([0, 1], [xs, xs], [s.points.map((p, i) => p.requests / s.widths[i]), s.points.map((p, i) => p.errors / s.widths[i])]);
    },
  },
  // Output tokens per second of each interval (the interval points' output_tokens); the line
  // of the run's average since the start beside it when the snapshot carries one.
  "chart-tokens": {
    build: (el, spec) => new Chart(el, [
      { ...line("output tokens/s", "#9334e6", { width: 2 }), hovertemplate: "%{y:,.0f} tokens/s<extra>interval</extra>" },
      { ...line("run average", "#5f6368", { width: 1.2, dash: "dot" }), hovertemplate: "%{y:,.0f} tokens/s<extra>average</extra>" },
    ], layout(spec.title, spec.y_title)),
    ingest(chart, s) {
      if (s.points.length) {
        const xs = s.points.map((p) => p.t_s);
        chart.add([0], [xs], [s.points.map((p, i) => (p.output_tokens ?? 0) / s.widths[i])]);
      }
      const avg = s.d.output_tokens_per_s;
      if (typeof avg === "number") chart.add([1], [[s.t]], [[avg]]);
    },
  },
  // Errors by category (cumulative per sample); a category starts from 0 at the sample before
  // it first appeared, so its area rises where the errors began.
  "chart-errors": {
    build(el, spec, view) {
      view.categories = [];
      return new Chart(el, [line("all errors", TOTAL(), { width: 1.5 })],
        layout(spec.title, spec.y_title, { annotations: [NO_ERRORS], showlegend: true }));
    },
    ingest(chart, s, view) {
      const cats = s.d.errors_by_category || {};
      const names = Object.keys(cats);
      chart.add([0], [[s.t]], [[s.d.errors ?? 0]]);
      if (!names.length && !view.categories.length) return;
      const fresh = names.filter((n) => !view.categories.includes(n));
      if (fresh.length) {
        if (!view.categories.length) chart.relayout({ annotations: [] });
        chart.addTraces(fresh.map((n) => ({ ...line(n, ERROR_COLOURS[n] || "#80868b"), stackgroup: "errors" })));
        view.categories.push(...fresh);
      }
      const start = view.prevSampleT ?? s.t;
      const grew = (n) => fresh.includes(n) && start < s.t;
      chart.add(view.categories.map((_, i) => i + 1),
        view.categories.map((n) => (grew(n) ? [start, s.t] : [s.t])),
        view.categories.map((n) => (grew(n) ? [0, cats[n] || 0] : [cats[n] || 0])));
    },
  },
  "chart-orphans": {
    build: (el, spec) => new Chart(el, [line("all workers", TOTAL(), { width: 3 })],
      layout(spec.title, spec.y_title, { hovermode: "closest" })),
    ingest(chart, s) {
      const w = s.d.client_workers;
      if (!w || !w.orphaned_copies) return;
      let total = 0;
      for (const n of w.orphaned_copies) total += n || 0;
      chart.add([0], [[s.t]], [[total]]);
      orphanLines.add(chart, s.t, w.orphaned_copies);
    },
  },
  // The client's own load (runner/wallclock/load.py): CPU of its process against aiperf's 85 %
  // line, and the event loop's latest wake-up on the right axis.
  "chart-client-load": {
    build: (el, spec) => new Chart(el, [
      { ...line("CPU", "#2458d6", { width: 2 }), hovertemplate: "CPU %{y:.0f} %<extra></extra>" },
      { ...line("loop lag", "#e8710a", { width: 1.5 }), yaxis: "y2", hovertemplate: "loop lag %{y:.0f} ms<extra></extra>" },
    ], layout(spec.title, spec.y_title, {
      yaxis: { title: { text: spec.y_title }, rangemode: "tozero", zeroline: false, ticksuffix: " %", ticklabeloverflow: "allow" },
      yaxis2: { title: { text: "loop lag (ms)" }, overlaying: "y", side: "right", rangemode: "tozero", showgrid: false },
      margin: { l: 56, r: 56, t: 36, b: 30 },
      shapes: [{ type: "line", xref: "paper", x0: 0, x1: 1, y0: 85, y1: 85, line: { color: "#d93025", width: 1, dash: "dot" } }],
      annotations: [{ text: "85 %", xref: "paper", x: 0, y: 85, showarrow: false, yanchor: "bottom", xanchor: "left", font: { size: 10, color: "#d93025" } }],
    })),
    ingest(chart, s) {
      const c = s.d.client;
      if (!c || (c.cpu_pct === null && c.loop_lag_ms === null)) return;
      chart.add([0, 1], [[s.t], [s.t]], [[c.cpu_pct ?? null], [c.loop_lag_ms ?? null]]);
    },
  },
  "chart-copies": workerSeries("session_copies", ""),
  "chart-bytes": workerSeries("cached_bytes", " MiB", 1048576),
  "chart-migration-total": {
    build: (el, spec) => new Chart(el, [
      line("worker switches", "#e8710a", { width: 2 }),
      line("sessions on >1 worker", "#9334e6"),
    ], layout(spec.title, spec.y_title)),
    ingest(chart, s) {
      const r = s.d.routing;
      if (r) chart.add([0, 1], [[s.t], [s.t]], [[r.worker_switches], [r.sessions_multi_worker]]);
    },
  },
  "chart-affinity": {
    build: (el, spec) => new Chart(el, [
      line("binds", "#2458d6"), line("closes", "#1e8e3e"), line("early closes", "#d93025", { width: 2.5 }),
      line("keys bound", "#9334e6", { dash: "dot" }),
    ], layout(spec.title, spec.y_title)),
    ingest(chart, s) {
      const a = s.d.affinity;
      if (a) chart.add([0, 1, 2, 3], [[s.t], [s.t], [s.t], [s.t]], [[a.binds], [a.closes], [a.early_closes], [a.keys_bound]]);
    },
  },
  // Placement as shares (runs of any length compare): lineage holds 0 % split, 100 % on root.
  "chart-placement": {
    build(el, spec) {
      const share = (name, color, dash) => ({ ...line(name, color, { width: 2, dash }), hovertemplate: `${name}: %{y:.1f} %<extra></extra>` });
      return new Chart(el, [
        share("trees split", "#d93025"), share("child requests on root's worker", "#1e8e3e"), share("key misses", "#9334e6", "dot"),
      ], layout(spec.title, spec.y_title, {
        yaxis: { title: { text: spec.y_title }, range: [0, 105], zeroline: false, ticksuffix: " %", ticklabeloverflow: "allow" },
      }));
    },
    ingest(chart, s) {
      const pl = s.d.placement;
      if (!pl || !pl.trees) return;
      // The engine's percentages (runner/affinity/placement.py), not divided again here.
      chart.add([0, 1, 2], [[s.t], [s.t], [s.t]], [[pl.trees_split_pct ?? null],
        [pl.child_requests_on_root_worker_pct ?? null], [pl.key_misses_pct ?? null]]);
    },
  },
  // The endpoint's own /metrics (a point per scrape, deduped by its t_s): KV use and queue per
  // server worker, with the overall line; workers get their traces as they first appear.
  "chart-sm-kv": serverMetrics("kv_usage", (f) => (f.kv_usage === null || f.kv_usage === undefined ? [null] : [100 * f.kv_usage]),
    [{ ...line("mean of workers", TOTAL(), { width: 2.5 }), hovertemplate: "mean: %{y:.1f} %<extra></extra>" }],
    (v) => (v === null || v === undefined ? null : 100 * v), " %", ":.1f"),
  "chart-sm-queue": serverMetrics("queue_depth", (f) => [f.queue_depth ?? null, f.running ?? null], [
    { ...line("waiting", "#d93025", { width: 2.5 }), hovertemplate: "waiting (all): %{y}<extra></extra>" },
    { ...line("running", "#2458d6", { width: 1.5, dash: "dot" }), hovertemplate: "running (all): %{y}<extra></extra>" },
  ], (v) => v, " waiting", ""),

  // -- drawn from the latest snapshot --------------------------------------------------------

  "chart-workers": {
    draw(el, d, view, spec) {
      const w = d.client_workers;
      if (!w) return;
      const k = (w.in_flight || w.session_copies || []).length;
      const ids = Array.from({ length: k }, (_, i) => i);
      const bar = (name, values, color) => ({ type: "bar", name, x: ids, y: values || [], marker: { color } });
      window.Plotly.react(el, [
        bar("in flight", w.in_flight, "#2458d6"),
        bar("sticky entries", w.sticky_entries, "#12b5cb"),
        bar("session copies", w.session_copies, "#1e8e3e"),
        bar("orphaned copies", w.orphaned_copies, "#d93025"),
      // The x axis is named in the title: an axis title would sit on the legend below it.
      ], layout(spec.title, spec.y_title, {
        barmode: "group", xaxis: { dtick: k > 24 ? 4 : 1, ticklabeloverflow: "allow" }, hovermode: "x unified",
      }), plotConfig());
    },
  },
  "chart-heatmap": {
    changed: (d, view) => d.migrations_total !== view.heatmapTotal,
    draw(el, d, view, spec) {
      view.heatmapTotal = d.migrations_total;
      const k = ((d.client_workers || {}).in_flight || []).length || view.workers;
      const pairs = d.migrations || [];
      const z = Array.from({ length: k }, () => new Array(k).fill(null));
      let most = 0;
      for (const [from, to, n] of pairs) if (from < k && to < k) { z[to][from] = n; most = Math.max(most, n); }
      const ids = Array.from({ length: k }, (_, i) => i);
      const narrow = isNarrow();
      // Whole turns: integer ticks on the colour bar (0.6-1.4 for a single migration before).
      const step = Math.max(1, Math.ceil(most / 5));
      window.Plotly.react(el, [{
        type: "heatmap", x: ids, y: ids, z, colorscale: [[0, "#fdd9b5"], [1, "#b42318"]], zmin: 0,
        zmax: Math.max(1, most), hoverongaps: false,
        colorbar: { title: { text: "turns", side: "right" }, thickness: 10, tickmode: "linear", tick0: 0, dtick: step, tickformat: "d" },
        hovertemplate: "from worker %{x} to worker %{y}: %{z} turns<extra></extra>",
      }], layout(spec.title, spec.y_title, {
        // Ranges fixed to the workers (an empty matrix drew -1 to 6 with zero lines).
        xaxis: { title: { text: "from worker", standoff: 8 }, dtick: k > 24 ? 4 : k > 12 && narrow ? 2 : 1, constrain: "domain",
          range: [-0.5, k - 0.5], zeroline: false, showgrid: false, ticklabeloverflow: "allow", automargin: true },
        yaxis: { title: { text: "to worker", standoff: 8 }, dtick: k > 24 ? 4 : k > 12 && narrow ? 2 : 1, range: [k - 0.5, -0.5],
          zeroline: false, showgrid: false, ticklabeloverflow: "allow", automargin: true },
        margin: { l: 56, r: 22, t: 36, b: 44 }, height: 300, hovermode: "closest",
      }), plotConfig());
      const empty = view.$("#heatmap-empty");
      if (empty) empty.hidden = pairs.length > 0;
    },
  },
  "chart-inference": {
    draw(el, d, view, spec) {
      const inf = d.inference_workers;
      const note = view.$("#inference-note");
      if (!inf) return;
      const reported = (inf.ids || []).length > 0;
      if (note) note.hidden = reported;
      el.hidden = !reported;
      if (!reported) return;
      // The server's own worker ids (shortened; whole on hover) when it named them.
      const names = inf.ids.map((i) => inferenceName(i, view.workerIds));
      const x = names.map((n) => n.short);
      const traces = [
        { type: "bar", name: "requests", x, y: inf.requests, marker: { color: "#2458d6" },
          customdata: names.map((n) => n.full), hovertemplate: "%{customdata}: %{y} requests<extra></extra>" },
        { type: "scatter", mode: "markers+lines", name: "cached-token ratio", x, y: inf.cached_token_ratio,
          yaxis: "y2", marker: { color: "#1e8e3e" }, line: { width: 1 } },
      ];
      if (inf.bound_keys) traces.push({ type: "bar", name: "bound keys", x, y: inf.bound_keys, marker: { color: "#9334e6" } });
      // Too narrow for long ids side by side (a phone): upright, with the legend at the bottom.
      const named = Object.keys(view.workerIds).length > 0;
      const upright = named && el.clientWidth / Math.max(1, x.length) < 64;
      // The card is titled "Inference workers": the chart's title only says what x is.
      const title = named ? spec.title_named : spec.title;
      window.Plotly.react(el, traces, layout(title, spec.y_title, {
        barmode: "group",
        xaxis: { type: "category", tickangle: upright ? -90 : 0, tickfont: { size: named ? 10 : 12 }, ticklabeloverflow: "allow" },
        // Counts are whole: integer ticks (small counts drew 0.257, 0.513, 0.77).
        yaxis: { title: { text: spec.y_title }, rangemode: "tozero", zeroline: false, ticklabeloverflow: "allow", tickformat: "d",
          ...(Math.max(0, ...(inf.requests || []), ...(inf.bound_keys || [])) <= 5 ? { dtick: 1 } : {}) },
        yaxis2: { title: { text: "cached tokens, % of prompt" }, overlaying: "y", side: "right", range: [0, 1], showgrid: false,
          tickmode: "linear", dtick: 0.25, tickformat: ".0%" },
        margin: { l: 56, r: 56, t: 36, b: upright ? 84 : 30 }, hovermode: "x unified",
        ...(upright ? { height: 320, legend: { orientation: "h", x: 0, y: 0, yanchor: "bottom", yref: "container", font: { size: 11 } } } : {}),
      }), plotConfig());
    },
  },
};

function serverMetrics(field, overall, fixed, scale, unit, format) {
  return {
    build(el, spec, view) {
      view.smWorkers = view.smWorkers || new Map(); // server worker id -> its colour index
      const chart = new Chart(el, fixed, layout(spec.title, spec.y_title, { hovermode: "closest" }));
      chart.fixed = fixed.length;
      chart.workerTrace = new Map(); // server worker id -> trace index
      chart.lastScrape = -Infinity;
      return chart;
    },
    ingest(chart, s, view) {
      const sm = s.d.server_metrics;
      if (!sm || !sm.available || sm.t_s === null || sm.t_s === undefined || sm.t_s <= chart.lastScrape) return;
      chart.lastScrape = sm.t_s;
      const x = sm.t_s;
      const values = overall(sm.figures || {});
      chart.add(values.map((_, i) => i), values.map(() => [x]), values.map((v) => [v]));
      const w = sm.workers;
      if (!w || !(w.ids || []).length || !(w[field] || []).length) return;
      const fresh = w.ids.filter((id) => !chart.workerTrace.has(id));
      if (fresh.length) {
        for (const id of fresh) if (!view.smWorkers.has(id)) view.smWorkers.set(id, view.smWorkers.size);
        // No legend entry per server worker: a worker reporting no value for this figure drew
        // no line, yet was listed (w0-w7 beside the totals alone). Hover names each line.
        chart.addTraces(fresh.map((id) => ({
          name: `w ${shortId(id)}`, x: [], y: [], mode: "lines", showlegend: false, legendgroup: String(id),
          line: { color: workerColor(view.smWorkers.get(id)), width: 1.3 },
          hovertemplate: `worker ${shortId(id)}: %{y${format}}${unit}<extra></extra>`,
        })));
        fresh.forEach((id, n) => chart.workerTrace.set(id, chart.nTraces - fresh.length + n));
      }
      const idx = w.ids.map((id) => chart.workerTrace.get(id));
      chart.add(idx, idx.map(() => [x]), w[field].map((v) => [scale(v)]));
    },
  };
}
