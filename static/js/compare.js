// The comparison: each run's stored series overlaid (one colour per run). While a run of the
// set is still going, the runs-list socket tells when one ends and the page reloads.
// The charts (id, title, axis) are the compare entries of the declared list
// (aiperf_web/live/charts.py); plot config and layout are the run page's (charts/plot.js).
import { workerColor } from "./charts/format.js";
import { layout, plotConfig } from "./charts/plot.js";
import { chartSpecs } from "./charts/view.js";
import { connectRunsList, showState } from "./live.js";
import { FINAL_STATUSES } from "./vocabulary.js";

const data = JSON.parse(document.getElementById("compare-data").textContent);

// Per run: interval points (deduped by t_s) and per-sample cumulative figures.
function extract(samples) {
  const pts = new Map();
  const t = [], orphans = [], switches = [], hit = [];
  for (const s of samples) {
    const d = s.data || {};
    for (const p of d.recent || []) pts.set(p.t_s, p);
    t.push(d.t_s ?? s.t_s);
    orphans.push((d.routing || {}).orphaned_session_copies ?? null);
    switches.push((d.routing || {}).worker_switches ?? null);
    hit.push(d.prefix_cache_hit_ratio ?? null);
  }
  const points = [...pts.values()].sort((a, b) => a.t_s - b.t_s);
  let gap = Infinity;
  for (let i = 1; i < points.length; i++) gap = Math.min(gap, points[i].t_s - points[i - 1].t_s);
  if (!Number.isFinite(gap) || gap <= 0) gap = 1;
  return {
    pt: points.map((p) => p.t_s),
    ttft: points.map((p) => (p.ttft_ms || {}).p99 ?? null),
    latency: points.map((p) => (p.latency_ms || {}).p99 ?? null),
    rps: points.map((p) => p.requests / gap),
    t, orphans, switches, hit,
  };
}

const series = data.series.map((s) => extract(s.samples));
const line = (i, x, y, extra = {}) => ({
  name: data.runs[i].label, x, y, mode: "lines", line: { color: workerColor(i), width: 2 }, ...extra,
});
// What each declared comparison chart draws of a run's series.
const PICK = {
  "cmp-ttft": (s, i) => line(i, s.pt, s.ttft),
  "cmp-latency": (s, i) => line(i, s.pt, s.latency),
  "cmp-throughput": (s, i) => line(i, s.pt, s.rps),
  "cmp-orphans": (s, i) => line(i, s.t, s.orphans),
  "cmp-switches": (s, i) => line(i, s.t, s.switches),
  "cmp-hit": (s, i) => line(i, s.t, s.hit),
};
for (const spec of chartSpecs()) {
  const el = document.getElementById(spec.id);
  const pick = PICK[spec.id];
  if (!el || !pick) continue;
  window.Plotly.newPlot(el, series.map((s, i) => pick(s, i)), layout(spec.title, spec.y_title), plotConfig());
}

// The reference: choosing another run reloads the page against it (the button does the same
// without script).
const refSelect = document.getElementById("ref-select");
if (refSelect) {
  document.getElementById("ref-apply").hidden = true;
  refSelect.addEventListener("change", () => refSelect.form.submit());
}
// A figures table wider than the screen says so above it (the edge shadows say where).
const wrap = document.getElementById("delta-scroll");
const hint = document.getElementById("scroll-hint");
if (wrap && hint) {
  const check = () => { hint.hidden = wrap.scrollWidth <= wrap.clientWidth + 1; };
  check();
  window.addEventListener("resize", check);
}

if (data.active) {
  const ids = new Set(data.runs.map((r) => r.id));
  const status = Object.fromEntries(data.runs.map((r) => [r.id, r.status]));
  const stateEl = document.getElementById("live-state");
  stateEl.hidden = false;
  connectRunsList({
    onState: (s) => showState(stateEl, s),
    onMessage: (m) => {
      if (m.type !== "runs") return;
      let ended = false;
      for (const row of m.rows) {
        if (!ids.has(row.id)) continue;
        const box = document.querySelector(`.compared-run[data-run-id="${row.id}"] [data-status]`);
        if (box) {
          const pct = row.progress === null || row.progress === undefined ? "" : ` ${Math.round(100 * row.progress)} %`;
          box.textContent = row.status === "running" ? `running${pct}` : row.status;
          box.className = `status s-${row.status}`;
        }
        if (status[row.id] !== row.status && FINAL_STATUSES.has(row.status)) ended = true;
        status[row.id] = row.status;
      }
      if (ended) setTimeout(() => window.location.reload(), 800);
    },
  });
}
