// The plotly side of every chart: one config, one layout, a Chart that grows in place, and the
// links between a run's time-series charts (one time range, linked zoom, a shared crosshair).
//
// No import of plotly: Plotly is the global /static/plotly/plotly.min.js defines (the offline
// export inlines it the same way).

const NARROW = "(max-width: 640px)";

// On a phone the modebar sat over the chart titles: it is left out there (pinch zoom and a
// double tap still work); elsewhere it shows on hover only.
export function plotConfig() {
  const narrow = typeof window.matchMedia === "function" && window.matchMedia(NARROW).matches;
  return {
    displaylogo: false, responsive: true, displayModeBar: narrow ? false : "hover",
    modeBarButtonsToRemove: ["lasso2d", "select2d", "autoScale2d"],
  };
}

export function isNarrow() {
  return typeof window.matchMedia === "function" && window.matchMedia(NARROW).matches;
}

export const TIME_AXIS = { ticksuffix: " s", zeroline: false, ticklabeloverflow: "allow" };

export function layout(title, yTitle, extra = {}) {
  return {
    title: { text: title, font: { size: 14 }, x: 0, xanchor: "left" },
    margin: { l: 56, r: 22, t: 36, b: 30 },
    height: 270,
    // Run time on x: a tick suffix instead of an axis title leaves room for the legend. Fixed
    // margins (room for the last tick label on the right), no automargin: with it the last
    // label's width moved the margin as the run grew and plotly drew the chart twice. Tick
    // labels may overflow (they fit in the margins): plotly otherwise measures every label.
    xaxis: { ...TIME_AXIS },
    yaxis: { title: { text: yTitle }, rangemode: "tozero", zeroline: false, ticklabeloverflow: "allow" },
    legend: { orientation: "h", y: -0.12, yanchor: "top", font: { size: 11 } },
    hovermode: "x unified",
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: "#fff",
    ...extra,
  };
}

// One chart: its element, its traces, the points waiting to be drawn. It is plotted the first
// time it is drawn (in view, or forced), with every point so far in one Plotly.newPlot: a long
// report's charts below the fold cost nothing until they are scrolled to, and none is drawn
// empty and then extended.
export class Chart {
  constructor(el, traces, lay, { time = true } = {}) {
    this.el = el;
    this.time = time; // x is run time: part of the linked range, zoom and crosshair
    this.traces = traces; // until plotted: then the element's own data
    this.lay = lay;
    this.nTraces = traces.length;
    this.pending = null;
    this.range = null; // the x range last drawn
    this.ready = !!el;
    this.plotted = false;
    this.onPlotted = null;
    this.config = plotConfig();
    this.rebuild = null; // a whole redraw to do instead of extending (catalog.js perWorker)
  }
  get data() { return this.plotted ? this.el.data : this.traces; }
  get layout() { return this.plotted ? this.el.layout : this.lay; }
  // A layout change: applied when plotted, else kept for the first plot (top-level keys).
  relayout(update) {
    if (!this.ready) return;
    if (this.plotted) window.Plotly.relayout(this.el, update);
    else Object.assign(this.lay, update);
  }
  // xs/ys: one array per trace index
  add(indices, xs, ys) {
    if (!this.ready) return;
    if (!this.pending) this.pending = { idx: indices.slice(), x: indices.map(() => []), y: indices.map(() => []) };
    const p = this.pending;
    for (let k = 0; k < indices.length; k++) {
      let j = p.idx.indexOf(indices[k]);
      if (j < 0) { p.idx.push(indices[k]); p.x.push([]); p.y.push([]); j = p.idx.length - 1; }
      const px = p.x[j], py = p.y[j], sx = xs[k], sy = ys[k];
      for (let n = 0; n < sx.length; n++) { px.push(sx[n]); py.push(sy[n]); }
    }
  }
  // Draw the pending points, and the shared x range when it moved (one relayout, rare: the
  // live range grows in steps).
  flush(range) {
    if (!this.ready) return false;
    const r = this.time ? range : null;
    if (this.rebuild) {
      // The chart's traces were re-chosen: drawn whole (their points included), not extended.
      const rebuild = this.rebuild, pending = this.pending;
      this.rebuild = null;
      this.pending = null;
      rebuild(r, pending);
      this.range = r;
      this.markPlotted();
      return true;
    }
    if (!this.plotted) {
      const p = this.pending;
      this.pending = null;
      if (p) {
        p.idx.forEach((i, j) => {
          const tr = this.traces[i];
          for (let n = 0; n < p.x[j].length; n++) { tr.x.push(p.x[j][n]); tr.y.push(p.y[j][n]); }
        });
      }
      if (r) for (const key of axisKeys(this.lay)) this.lay[key] = { ...this.lay[key], range: r.slice(), autorange: false };
      window.Plotly.newPlot(this.el, this.traces, this.lay, this.config);
      this.range = r;
      this.markPlotted();
      return true;
    }
    const moved = !!r && (!this.range || this.range[0] !== r[0] || this.range[1] !== r[1]);
    if (moved) this.range = r;
    if (this.pending) {
      const p = this.pending;
      this.pending = null;
      // New points and a new range in one plotly redraw, not two (extendTraces redraws the
      // whole figure from el.layout, and so did the relayout after it: the live range's steps
      // doubled the latency figure's cost on those snapshots). Our own range needs no relayout
      // event: TimeLink ignores the ones it caused anyway.
      if (moved) for (const key of axisKeys(this.el.layout)) this.el.layout[key] = { ...this.el.layout[key], range: r.slice(), autorange: false };
      window.Plotly.extendTraces(this.el, { x: p.x, y: p.y }, p.idx);
      return true;
    }
    if (moved) window.Plotly.relayout(this.el, xRangeUpdate(this.el.layout, r));
    return moved;
  }
  markPlotted() {
    if (this.plotted) return;
    this.plotted = true;
    this.traces = null;
    this.lay = null;
    if (this.onPlotted) this.onPlotted(this);
  }
  dirty(range) {
    if (!this.ready) return false;
    // Not plotted before its first point: an empty chart drew bare axes (a 0-1 s axis beside
    // the others' run time); until then the element says it waits (data-empty, live.css).
    if (!this.plotted) return !!(this.pending || this.rebuild);
    if (this.pending || this.rebuild) return true;
    return this.time && !!range && (!this.range || this.range[0] !== range[0] || this.range[1] !== range[1]);
  }
  addTraces(traces) {
    if (!this.ready || this.rebuild) return; // a rebuild draws every trace itself
    this.nTraces += traces.length;
    if (!this.plotted) { this.traces.push(...traces); return; }
    if (this.pending) { const p = this.pending; this.pending = null; window.Plotly.extendTraces(this.el, { x: p.x, y: p.y }, p.idx); }
    window.Plotly.addTraces(this.el, traces);
  }
}

function axisKeys(lay) {
  const keys = Object.keys(lay || {}).filter((k) => /^xaxis\d*$/.test(k));
  return keys.length ? keys : ["xaxis"];
}

// Every x axis of a figure (subplots match the first): the update that sets their range.
function xRangeUpdate(lay, range) {
  const update = {};
  for (const key of axisKeys(lay)) { update[`${key}.range`] = range.slice(); update[`${key}.autorange`] = false; }
  return update;
}

// The links between a run's time-series charts. Zoom one (drag, or the modebar) and every
// other follows; double-click gives all of them back the run's range. Hover one and the others
// show the same instant; the readout names it in run time and wall-clock time.
export class TimeLink {
  // charts: () => the Chart objects with time on x; clock(t_s) => wall ms or null;
  // readout: the element that names the instant; virtual: the run's time is the simulator's
  constructor({ charts, clock, readout, virtual, onZoom }) {
    this.charts = charts;
    this.clock = clock;
    this.readout = readout;
    this.virtual = virtual;
    this.onZoom = onZoom;
    this.busy = false;
    this.hoverFrame = null;
  }

  attach(chart) {
    const el = chart.el;
    if (!el || !el.on || el.dataset.linked) return;
    el.dataset.linked = "1";
    el.on("plotly_relayout", (e) => this.relayout(chart, e));
    el.on("plotly_hover", (e) => this.hover(chart, e));
    el.on("plotly_unhover", () => this.unhover(chart));
  }

  relayout(source, e) {
    if (this.busy || !e) return;
    let range = null;
    if (e["xaxis.range[0]"] !== undefined && e["xaxis.range[1]"] !== undefined) range = [e["xaxis.range[0]"], e["xaxis.range[1]"]];
    else if (Array.isArray(e["xaxis.range"])) range = e["xaxis.range"].slice();
    else if (e["xaxis.autorange"] === true) range = "reset";
    if (!range) return;
    // Our own relayouts (the shared range, a zoom passed on) come back as events too: only a
    // range nobody set here is a person's.
    if (range !== "reset" && source.range && Number(range[0]) === source.range[0] && Number(range[1]) === source.range[1]) return;
    this.busy = true;
    try {
      this.onZoom(range === "reset" ? null : range.map(Number), source);
    } finally {
      this.busy = false;
    }
  }

  hover(source, e) {
    if (this.busy || !e || !e.points || !e.points.length) return;
    const x = e.xvals ? e.xvals[0] : e.points[0].x;
    this.show(x);
    // The others in one frame, whatever the mouse does meanwhile.
    this.pendingHover = { source, x };
    if (this.hoverFrame !== null) return;
    this.hoverFrame = window.requestAnimationFrame(() => {
      this.hoverFrame = null;
      const { source: src, x: at } = this.pendingHover;
      this.busy = true;
      try {
        for (const c of this.charts()) {
          if (c === src || !c.plotted || !c.el.isConnected) continue;
          const subplots = Object.keys(c.el._fullLayout || {}).filter((k) => /^xaxis\d*$/.test(k))
            .map((k) => `x${k.slice(5)}y${k.slice(5)}`);
          window.Plotly.Fx.hover(c.el, { xval: at }, subplots.length ? subplots : ["xy"]);
        }
      } finally {
        this.busy = false;
      }
    });
  }

  unhover(source) {
    if (this.busy) return;
    this.busy = true;
    try {
      for (const c of this.charts()) if (c !== source && c.plotted) window.Plotly.Fx.unhover(c.el);
    } finally {
      this.busy = false;
    }
    if (this.readout) this.readout.hidden = true;
  }

  show(x) {
    if (!this.readout || typeof x !== "number") return;
    const wall = this.clock(x);
    const clockText = wall ? ` · ${wall} UTC` : "";
    this.readout.textContent = `${this.virtual ? "virtual time" : "run time"} ${x.toFixed(1)} s${clockText}`;
    this.readout.hidden = false;
  }
}
