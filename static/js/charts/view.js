// A RunView owns every chart of one run page (live page, report, offline export). It is fed
// samples ({seq, t_s, data}: slim ones from the history, whole ones from the socket), hands each
// to the charts the page declares (json_script "chart-specs", from aiperf_web/live/charts.py;
// their code in catalog.js), and draws in place: time series grow with Plotly.extendTraces, the
// "latest" charts are replaced with Plotly.react, at most FRAME_BUDGET_MS of plotly work per
// animation frame however many samples arrived (a live run with many workers: one chart per
// snapshot). Charts scrolled out of view keep their pending points and draw when they come
// back; the ones never in view are plotted in idle time. The time-series charts share one x range, zoom together
// and show one crosshair (plot.js TimeLink).
import { CATALOG } from "./catalog.js";
import { fmt, fmtBytes, fmtClock, fmtDuration, workerColor } from "./format.js";
import { TimeLink } from "./plot.js";

const FRAME_BUDGET_MS = 12;
// A live run with more client workers than this draws one plotly redraw per snapshot (below).
const MANY_WORKERS = 16;

export function chartSpecs(doc = document) {
  const el = doc.getElementById("chart-specs");
  return el ? JSON.parse(el.textContent) : [];
}

export class RunView {
  // root: the page element; opts: {intervalS, workerIds (index -> the server's worker id),
  // charts (the declared list), startedAt (ISO), virtual (simulated run), live}
  constructor(root, opts = {}) {
    this.root = root;
    this.$ = (sel) => root.querySelector(sel);
    this.lastSeq = -1;
    this.lastPointT = -Infinity;
    this.prevPointT = null;
    this.prevSampleT = null;
    this.intervalS = opts.intervalS || 1.0;
    this.workerIds = opts.workerIds || {};
    this.live = !!opts.live;
    this.ended = opts.live === false;
    this.virtual = !!opts.virtual;
    this.startedMs = opts.startedAt ? Date.parse(opts.startedAt) : null;
    this.clockPoints = []; // [t_s, wall_s] per sample: run time -> wall clock
    this.workers = 0;
    this.latest = null;
    this.leak = null;
    this.frame = null;
    this.drawnSeqs = [];
    this.maxT = null;
    this.zoom = null; // the x range a person zoomed to, or null
    this.specs = (opts.charts || chartSpecs(root.ownerDocument)).filter((s) => CATALOG[s.id]);
    this.series = []; // {spec, code, chart}
    this.panels = []; // {spec, code, el, dirty, lastAt}
    this.build();
    this.observe();
  }

  build() {
    for (const spec of this.specs) {
      const code = CATALOG[spec.id];
      const el = this.$(`#${spec.id}`);
      if (spec.kind === "series") {
        const title = this.virtual ? `${spec.title} <span style="font-size:11px;color:#667085">· virtual time</span>` : spec.title;
        const chart = code.build(el, { ...spec, title }, this);
        chart.visible = () => !el || !this.visibleEls || this.visibleEls.has(el);
        this.series.push({ spec, code, chart });
      } else {
        this.panels.push({ spec, code, el, dirty: false, lastAt: 0 });
      }
    }
    const readout = this.root.ownerDocument.getElementById("crosshair");
    this.link = new TimeLink({
      charts: () => this.series.map((s) => s.chart).filter((c) => c.ready && c.visible()),
      clock: (t) => this.clockAt(t),
      readout,
      virtual: this.virtual,
      onZoom: (range) => { this.zoom = range; this.schedule(); },
    });
    for (const s of this.series) s.chart.onPlotted = (chart) => this.link.attach(chart);
  }

  // Wall-clock time of run time t (seconds), as the viewer's time of day: from the run's start
  // and the samples' wall_s (a simulated run's virtual seconds are not wall seconds).
  clockAt(t) {
    if (this.startedMs === null || Number.isNaN(this.startedMs)) return null;
    const pts = this.clockPoints;
    let wall = t;
    if (pts.length) {
      let lo = 0, hi = pts.length - 1;
      if (t <= pts[0][0]) wall = pts[0][1] * (pts[0][0] > 0 ? t / pts[0][0] : 1);
      else if (t >= pts[hi][0]) wall = pts[hi][1] + (this.virtual ? 0 : t - pts[hi][0]);
      else {
        while (hi - lo > 1) { const mid = (lo + hi) >> 1; if (pts[mid][0] <= t) lo = mid; else hi = mid; }
        const [t0, w0] = pts[lo], [t1, w1] = pts[hi];
        wall = w0 + ((t - t0) / (t1 - t0 || 1)) * (w1 - w0);
      }
    }
    return fmtClock(this.startedMs + 1000 * wall);
  }

  // The x range every time-series chart shows: what a person zoomed to, else the run so far.
  // Live, the end grows in steps of a quarter (a relayout per step, not per snapshot).
  timeRange() {
    if (this.zoom) return this.zoom;
    if (this.maxT === null) return null;
    if (!this.live) return [0, Math.max(this.maxT, 1)];
    if (this.liveEnd === undefined || this.maxT > this.liveEnd) this.liveEnd = Math.max(10, Math.ceil(this.maxT * 1.25));
    return [0, this.liveEnd];
  }

  // Which chart elements are in (or near) view; null = unknown, draw everything.
  observe() {
    if (!("IntersectionObserver" in window)) return;
    const els = [...this.series.map((s) => s.chart.el), ...this.panels.map((p) => p.el)].filter(Boolean);
    // In view now (the observer's first report comes a frame later): the first draw draws these.
    const margin = 200, height = window.innerHeight || document.documentElement.clientHeight;
    this.visibleEls = new Set(els.filter((el) => {
      const r = el.getBoundingClientRect();
      return r.bottom >= -margin && r.top <= height + margin;
    }));
    this.observer = new IntersectionObserver((entries) => {
      let woke = false;
      for (const e of entries) {
        if (e.isIntersecting) { this.visibleEls.add(e.target); woke = true; } else this.visibleEls.delete(e.target);
      }
      if (woke) this.schedule();
    }, { rootMargin: "200px" });
    for (const el of els) this.observer.observe(el);
  }

  // Ingest one sample (slim or whole). Returns false for a duplicate or older one.
  ingest(sample) {
    if (sample.seq <= this.lastSeq) return false;
    this.lastSeq = sample.seq;
    const d = sample.data || {};
    const t = d.t_s ?? sample.t_s;
    // The intervals this sample closed (dedupe by t_s), with their widths: the smallest gap
    // between points seen (the simulator's intervals are not the spec's snapshot interval), the
    // spec's until two points are known.
    const points = (d.recent || []).filter((p) => p.t_s > this.lastPointT).sort((a, b) => a.t_s - b.t_s);
    const widths = [];
    for (const p of points) {
      if (this.prevPointT !== null) {
        const gap = p.t_s - this.prevPointT;
        if (gap > 0 && (this.gapS === undefined || gap < this.gapS)) this.gapS = gap;
      }
      this.prevPointT = p.t_s;
      widths.push(this.gapS || this.intervalS);
    }
    if (points.length) this.lastPointT = points[points.length - 1].t_s;
    const w = d.client_workers;
    if (w) this.workers = Math.max(this.workers, (w.session_copies || w.orphaned_copies || []).length);
    if (typeof d.wall_s === "number") this.clockPoints.push([t, d.wall_s]);
    this.maxT = Math.max(this.maxT ?? 0, t, points.length ? points[points.length - 1].t_s : 0);
    const s = { t, d, points, widths };
    for (const { code, chart } of this.series) code.ingest(chart, s, this);
    this.prevSampleT = t;
    this.drawnSeqs.push(sample.seq);
    this.turnOpen = true; // a new snapshot: the next chart's turn (draw())
    return true;
  }

  // A whole snapshot: its latest-only charts and the KPIs.
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

  // Redraw gap of a chart: its declared one once the run has many workers (dozens of traces,
  // or a table of them), else every snapshot.
  gapOf(spec) {
    return spec.redraw_s && this.workers > MANY_WORKERS ? 1000 * spec.redraw_s : 0;
  }

  // One frame does the cheap DOM work (KPIs, progress, worker table, counters, leak text) and
  // at most FRAME_BUDGET_MS of plotly redraws, the chart drawn longest ago first; the rest
  // waits for the next frames, so no frame blocks the page for long. Charts out of view wait
  // until they are scrolled to; a chart with a redraw interval (at many workers) waits for it.
  // `force` (the first draw, the report, the export) draws everything now.
  //
  // A live run with many client workers draws one chart per snapshot: every plotly redraw there
  // costs 10-40 ms of the main thread whatever it adds (plotly redraws the whole figure), so two
  // in one snapshot interval (the latency figure and a counter falling due, or a chart scrolled
  // into view) were the slow snapshots. The charts in view take turns: the latency figure (and
  // any chart redrawn every snapshot) at least every other snapshot, the others oldest first.
  // A feed that pauses longer than a snapshot interval opens the next turn itself.
  draw(force = false) {
    const started = performance.now();
    const cost = {};
    // Which latest-only charts the new snapshot changed (before the jobs are chosen).
    if (this.latestDirty && this.latest) this.markPanels(this.latest.data || {});
    const range = this.timeRange();
    const now = performance.now();
    let jobs = [];
    let waiting = Infinity;
    for (const job of this.jobs(range)) {
      if (!job.dirty()) continue;
      if (!force && !job.visible()) continue;
      const due = (job.lastAt || 0) + job.gap;
      if (!force && due > now) { waiting = Math.min(waiting, due - now); continue; }
      jobs.push(job);
    }
    jobs.sort((a, b) => (a.lastAt || 0) - (b.lastAt || 0));
    const paced = !force && this.live && this.paced && this.workers > MANY_WORKERS;
    if (paced && jobs.length) {
      const idleMs = 1200 * this.intervalS;
      if (!this.turnOpen && now - (this.turnAt || 0) >= idleMs) this.turnOpen = true;
      if (!this.turnOpen) {
        waiting = Math.min(waiting, idleMs - (now - (this.turnAt || 0)));
        jobs = [];
      } else {
        // Every-snapshot charts (no redraw interval) first, unless one of them had the last turn.
        const steady = jobs.filter((j) => !j.gap), periodic = jobs.filter((j) => j.gap);
        const pick = (this.steadyHadTurn && periodic.length) || !steady.length ? periodic[0] : steady[0];
        if (jobs.length > 1) waiting = Math.min(waiting, idleMs);
        jobs = [pick];
      }
    }
    let done = 0;
    for (const job of jobs) {
      if (!force && done > 0 && performance.now() - started > FRAME_BUDGET_MS) break;
      const t0 = performance.now();
      job.run();
      job.lastAt = performance.now();
      cost[job.name] = job.lastAt - t0;
      done += 1;
      if (this.turnOpen) { this.turnOpen = false; this.turnAt = job.lastAt; this.steadyHadTurn = !job.gap; }
    }
    // The text of the page last: written before the charts, it left the layout dirty and the
    // first chart's measuring paid for laying out the whole page again (the worker table's
    // 448 cells at 64 workers).
    if (this.latestDirty && this.latest) {
      this.latestDirty = false;
      const t0 = performance.now();
      this.drawLatestDom(this.latest.data || {});
      cost.dom = performance.now() - t0;
    }
    if (this.leak && this.leakDirty) { this.leakDirty = false; this.drawLeak(this.leak); }
    this.lastCost = cost;
    if (done < jobs.length) this.schedule();
    else if (waiting < Infinity) {
      clearTimeout(this.waitTimer);
      this.waitTimer = setTimeout(() => this.schedule(), waiting + 5);
    }
    // A snapshot counts as drawn once no chart in view that is due (and, paced, has the turn)
    // still waits for it.
    if (done === jobs.length) {
      if (!paced) this.plotLater();
      // The snapshot is drawn: its turn is over, used or not (a chart scrolled into view after
      // it waits for the next snapshot, not drawn now and paid for by the next one).
      if (paced && this.drawnSeqs.length && this.turnOpen) { this.turnOpen = false; this.turnAt = performance.now(); }
      const seqs = this.drawnSeqs;
      this.drawnSeqs = [];
      if (this.onDrawn) this.onDrawn(seqs, performance.now() - started, cost);
    } else if (this.onDrawn) this.onDrawn([], performance.now() - started, cost);
  }

  // The plotly work of a frame, one job per declared chart: dirty? in view? how often? do it.
  jobs(range) {
    if (!this._jobs) {
      const inView = (el) => () => !el || !this.visibleEls || this.visibleEls.has(el);
      this._jobs = [
        ...this.series.map(({ spec, chart }) => ({
          name: spec.id, visible: inView(chart.el), lastAt: 0, view: this,
          get gap() { return this.view.gapOf(spec); },
          dirty: () => chart.dirty(this.range),
          unplotted: () => !chart.plotted,
          run: () => { chart.flush(this.range); },
        })),
        ...this.panels.map((p) => ({
          name: p.spec.id, visible: inView(p.el), lastAt: 0, view: this,
          get gap() { return this.view.gapOf(p.spec); },
          dirty: () => p.dirty && !!this.latest && !!p.el,
          unplotted: () => !p.plotted,
          run: () => { p.dirty = false; p.plotted = true; p.code.draw(p.el, this.latest.data || {}, this, p.spec); },
        })),
      ];
    }
    this.range = range;
    return this._jobs;
  }

  // Once the charts in view are drawn, the others are plotted in idle time, one per idle
  // callback: a chart scrolled to then only takes its new points (or nothing), not its first
  // plot while the page scrolls. Not while a run with many workers draws a chart per snapshot.
  plotLater() {
    if (this.idleHandle || !this.visibleEls || !this._jobs) return;
    const idle = window.requestIdleCallback || ((f) => setTimeout(f, 100));
    this.idleHandle = idle(() => {
      this.idleHandle = null;
      if (this.live && this.paced && this.workers > MANY_WORKERS) return;
      const job = this._jobs.find((j) => j.unplotted() && j.dirty());
      if (!job) return;
      const t0 = performance.now();
      job.run();
      job.lastAt = performance.now();
      if (this.onDrawn) this.onDrawn([], job.lastAt - t0, { [job.name]: job.lastAt - t0 });
      this.plotLater();
    }, { timeout: 3000 });
  }

  markPanels(d) {
    if (this.panelsMarkedFor === this.latest) return;
    this.panelsMarkedFor = this.latest;
    for (const p of this.panels) {
      if (!p.drawnOnce || !p.code.changed || p.code.changed(d, this)) { p.dirty = true; p.drawnOnce = true; }
    }
  }

  drawLatestDom(d) {
    this.drawKpis(d);
    this.drawServerMetrics(d.server_metrics);
    this.drawProgress(d);
    this.drawWorkerTable(d);
    this.drawHosts(d.hosts);
    const a = d.affinity || {};
    const set = (sel, v) => { const e = this.$(sel); if (e) e.textContent = fmt(v, 0); };
    set("#aff-binds", a.binds); set("#aff-closes", a.closes); set("#aff-early", a.early_closes); set("#aff-bound", a.keys_bound);
    set("#migrations-total", d.migrations_total);
    this.drawPlacement(d);
    const early = this.$("#aff-early");
    if (early) early.classList.toggle("bad", (a.early_closes || 0) > 0);
    const none = this.$("#no-samples");
    if (none) none.hidden = true;
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
      const chart = this.series.find((s) => s.spec.id === "chart-placement");
      if (state === "reported" && chart && chart.chart.plotted) window.Plotly.Plots.resize(chart.chart.el);
    }
    if (!p) return;
    // The percentages come with the counts (the engine's, runner/affinity/placement.py).
    for (const e of box.querySelectorAll("[data-pl]")) {
      const v = p[e.dataset.pl] ?? null;
      const text = e.dataset.pl.endsWith("_pct") ? fmt(v === null ? null : Math.round(10 * v) / 10, 1) : fmt(v, 0);
      if (e.textContent !== text) e.textContent = text;
      if (e.dataset.expect !== undefined) {
        e.classList.toggle("bad", typeof v === "number" && Math.abs(v - Number(e.dataset.expect)) > 1e-9);
      }
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

  drawKpis(d) {
    const put = (key, text) => {
      for (const e of this.root.querySelectorAll(`[data-kpi="${key}"]`)) {
        if (e.textContent !== text) e.textContent = text;
      }
    };
    put("requests", fmt(d.requests, 0));
    put("requests_per_s", fmt(d.requests_per_s, 2));
    put("output_tokens_per_s", fmt(d.output_tokens_per_s, 0));
    put("errors", fmt(d.errors, 0));
    put("in_flight", fmt(d.in_flight, 0));
    // No percentile before a request was answered (nor an ITL before one had two tokens).
    for (const k of ["ttft_ms", "itl_ms", "latency_ms"]) {
      const q = (d.requests || 0) > 0 ? d[k] || {} : {};
      put(`${k}.p50`, fmt(q.p50, 1));
      put(`${k}.p99`, fmt(q.p99, 1));
    }
    const hit = d.prefix_cache_hit_ratio;
    put("prefix_cache_hit_ratio", hit === null || hit === undefined ? "—" : (100 * hit).toFixed(1) + " %");
    const r = d.routing || {};
    put("worker_switches", fmt(r.worker_switches, 0));
    put("orphaned_session_copies", fmt(r.orphaned_session_copies, 0));
    put("rss", fmtBytes(d.rss_bytes));
    this.drawClientLoad(d.client);
  }

  // The client's own load, and a warning once it limits the run: CPU past aiperf's 85 % or the
  // loop waking 100 ms late for 3 snapshots in a row (reports/cards/saturation.py judges the report).
  drawClientLoad(c) {
    const cpu = c ? c.cpu_pct : null, lag = c ? c.loop_lag_ms : null;
    for (const [key, text, over] of [["client_cpu", cpu === null || cpu === undefined ? "—" : `${Math.round(cpu)} %`, cpu >= 85],
      ["client_lag", lag === null || lag === undefined ? "—" : `${fmt(lag, 0)} ms`, lag >= 100]]) {
      for (const e of this.root.querySelectorAll(`[data-kpi="${key}"]`)) {
        if (e.textContent !== text) e.textContent = text;
        e.classList.toggle("bad", !!over);
      }
    }
    if (!c || this.latest === this.clientSeen) return;
    this.clientSeen = this.latest;
    this.clientOver = cpu >= 85 || lag >= 100 ? (this.clientOver || 0) + 1 : 0;
    const note = this.$("#client-limit");
    if (!note) return;
    const limited = this.live && this.clientOver >= 3;
    if (limited) {
      const why = [cpu >= 85 ? `its process uses ${Math.round(cpu)} % of a core (aiperf warns past 85 %)` : "",
        lag >= 100 ? `its event loop wakes ${fmt(lag, 0)} ms late` : ""].filter(Boolean).join(" and ");
      note.textContent = `The client, not the server, limits this run now: ${why}. Latencies include the client's own delay.`;
    }
    note.hidden = !limited;
  }

  drawProgress(d) {
    const bar = this.$("#progress-bar");
    if (!bar) return;
    const pct = Math.round(100 * (d.progress || 0));
    bar.style.width = `${pct}%`;
    const text = this.$("#progress-text");
    if (text) {
      const eta = d.eta_s === null || d.eta_s === undefined ? "" : `, about ${fmtDuration(d.eta_s)} left`;
      const clock = this.virtual ? "virtual time" : "run time";
      text.textContent = `${pct} %${eta} · ${clock} ${fmtDuration(d.t_s)} · ${fmt(d.issued, 0)} sent, ${fmt(d.in_flight, 0)} in flight`;
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
        const swatch = document.createElement("span");
        swatch.className = "swatch";
        swatch.style.background = workerColor(i);
        tr.insertCell().append(swatch, String(i));
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

  // Client workers hosted as processes (runner/fleet), grouped by process: a row per process
  // (RSS and CPU are the process's, shared by the workers it serves), then one per worker.
  drawHosts(hosts) {
    const box = this.$("#hosts");
    if (!box || !hosts) return;
    box.hidden = false;
    const one = this.$("#one-process");
    if (one) one.hidden = true;
    const body = this.$("#hosts-body");
    const groups = hostGroups(hosts);
    const shape = groups.map((g) => `${g.host}=${g.workers.map((h) => h.worker)}`).join(" ");
    if (body.dataset.shape !== shape) {
      body.dataset.shape = shape;
      body.innerHTML = "";
      for (const g of groups) {
        addHostRow(body);
        for (const h of g.workers) addWorkerRow(body, h.worker);
      }
    }
    let row = 0;
    for (const g of groups) {
      showHost(body.rows[row++], g);
      for (const h of g.workers) showWorker(body.rows[row++], h);
    }
  }

  drawLeak(v) {
    const box = this.$("#leak");
    if (!box) return;
    box.className = `leak leak-${v.level}`;
    const msg = this.$("#leak-message");
    if (msg && msg.textContent !== v.message) msg.textContent = v.message;
    const badge = this.$("#leak-badge");
    if (badge) badge.textContent = v.badge;  // the server words the level (runs/leaks.py BADGES)
    // The counts beside the badge: orphans, and the client-worker processes' RSS when any.
    const figures = this.$("#leak-figures");
    if (figures && figures.textContent !== (v.figures || "")) figures.textContent = v.figures || "";
    const body = this.$("#leak-body");
    if (!body) return;
    const rows = v.workers.filter((w) => w.orphaned > 0 || w.orphans_per_min > 0)
      .sort((a, b) => b.orphans_per_min - a.orphans_per_min || b.orphaned - a.orphaned).slice(0, 16);
    // Rates per minute only from a long enough window (runs/leaks.py MIN_RATE_WINDOW_S), none once
    // the run ended (a finished run grows no more).
    const rated = v.rated !== false && !this.ended;
    const rate = (x) => (rated ? `${x > 0 ? "+" : ""}${x}` : "—");
    body.innerHTML = rows.map((w) => `<tr><td>${w.worker}</td><td class="num">${w.orphaned}</td>` +
      `<td class="num">${rate(w.orphans_per_min)}</td><td class="num">${w.copies}</td>` +
      `<td class="num">${rate(w.copies_per_min)}</td><td class="num">${fmtBytes(w.cached_bytes)}</td></tr>`).join("");
    const table = this.$("#leak-table");
    if (table) table.hidden = rows.length === 0;
  }

  // Feed a history message (or the server-rendered page data): slim samples, then the latest.
  loadHistory(history) {
    for (const s of history.samples || []) this.ingest(s);
    if (history.latest) this.setLatest(history.latest, history.leak);
    else if (history.leak) this.setLatest(null, history.leak);
    if (this.ended) this.markEmpty();
    this.schedule();
  }

  // A run that ended: a chart its whole history gave nothing to says so for good (the others
  // say they are drawn when scrolled to, until they are).
  markEmpty() {
    for (const { spec, chart } of this.series) {
      if (chart.el && !chart.plotted && !chart.pending && !chart.rebuild) chart.el.dataset.empty = `${spec.title}: no data in this run`;
    }
    if (!this.latest) for (const p of this.panels) if (p.el) p.el.dataset.empty = `${p.spec.title}: no data in this run`;
  }

  // Feed one live message.
  push(message) {
    // From the first pushed snapshot on, a run with many workers is drawn a chart per snapshot
    // (draw()); what the page loaded with is drawn at once, a frame budget at a time.
    this.paced = true;
    const fresh = this.ingest(message);
    if (fresh) this.setLatest(message, message.leak);
    this.schedule();
    return fresh;
  }
}

// The snapshot's hosts (one entry per client worker, each naming its process) as processes in
// the order of their first worker, each with its workers.
function hostGroups(hosts) {
  const byHost = new Map();
  for (const h of hosts) {
    const key = h.host || "—";
    if (!byHost.has(key)) byHost.set(key, { host: key, workers: [] });
    byHost.get(key).workers.push(h);
  }
  return [...byHost.values()];
}

function addHostRow(body) {
  const tr = body.insertRow();
  tr.className = "host-row";
  const th = document.createElement("th");
  th.colSpan = 6;
  th.scope = "rowgroup";
  const name = document.createElement("span");
  name.className = "host-name";
  const figs = document.createElement("span");
  figs.className = "host-figs";
  figs.append("RSS ", document.createElement("b"), " · CPU ", document.createElement("b"), " · ", document.createElement("span"));
  th.append(name, " ", figs);
  tr.append(th);
}

function addWorkerRow(body, worker) {
  const tr = body.insertRow();
  tr.className = "worker-row";
  const swatch = document.createElement("span");
  swatch.className = "swatch";
  swatch.style.background = workerColor(worker);
  tr.insertCell().append(swatch, String(worker));
  // in flight, session copies, their bytes, sent (left out on a phone), state
  for (const cls of ["num", "num", "num", "num opt", ""]) tr.insertCell().className = cls;
}

function setText(el, text) {
  if (el.textContent !== text) el.textContent = text;
}

// Every worker of a process reports the process's RSS and CPU at its own beat: the latest beat
// (CPU time only grows) gives both figures of one instant.
function showHost(tr, group) {
  const latest = group.workers.reduce((a, b) => ((b.cpu_s ?? -1) > (a.cpu_s ?? -1) ? b : a));
  const [rss, cpu, count] = tr.querySelectorAll(".host-figs > *");
  setText(tr.querySelector(".host-name"), group.host);
  setText(rss, fmtBytes(latest.rss_bytes));
  setText(cpu, `${fmt(latest.cpu_s, 1)} s`);
  const n = group.workers.length;
  // A process whose every worker is lost stopped reporting: its figures are its last word.
  const gone = group.workers.every((h) => h.lost_at_s !== null && h.lost_at_s !== undefined);
  setText(count, `${n} client worker${n === 1 ? "" : "s"}${gone ? " · lost, last report" : ""}`);
  tr.classList.toggle("host-lost", gone);
}

function showWorker(tr, h) {
  const cells = tr.cells;
  const lost = h.lost_at_s !== null && h.lost_at_s !== undefined;
  const texts = [fmt(h.in_flight, 0), fmt(h.copies, 0), fmtBytes(h.copy_bytes), fmt(h.sent, 0), lost ? `lost at ${fmt(h.lost_at_s, 1)} s` : "answering"];
  texts.forEach((text, j) => setText(cells[j + 1], text));
  cells[5].classList.toggle("bad", lost);
}
