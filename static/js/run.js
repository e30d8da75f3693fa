// The run page: draws what the server rendered (history from the database), then, while the
// run is queued or running, extends it with the live feed: snapshots for the charts, the run's
// row (status, reason, started and finished times) and log lines as they change. When the run
// ends the page reloads into the report (the final report always comes from the database).
import { drawTimelines, drawTrees, finishRunPage, treeLegend, viewOptions } from "./charts/report.js";
import { fmtClock } from "./charts/format.js";
import { RunView } from "./charts/view.js";
import { connectRun, showState } from "./live.js";
import { FINAL_STATUSES as FINAL } from "./vocabulary.js";

const page = JSON.parse(document.getElementById("run-data").textContent);
const root = document.getElementById("run");
const view = new RunView(root, viewOptions(root, page, { live: !FINAL.has(page.status) }));

// Instrumentation read by the browser tests and the live benchmark: when each seq was drawn
// (wall clock, ms) and the main-thread time each draw took.
const probe = { view, drawnAt: {}, drawMs: [], frameMs: [], ingestMs: [], costs: [], messages: 0, socket: null };
// The page's own timeline (performance.now(), ms): this script ran, the server's history was
// ingested, the first frame and the slices drawn, the charts in view drawn (bench_live).
probe.marks = { script: performance.now() };
window.aiperfRun = probe;
// Main-thread time: every frame's drawing, and per snapshot the frames until it was drawn.
// costs: per snapshot, the time of each chart (summed over the frames until it was drawn).
let since = 0;
let costs = {};
view.onDrawn = (seqs, ms, cost) => {
  const now = Date.now();
  since += ms;
  probe.frameMs.push(ms);
  for (const [k, v] of Object.entries(cost)) costs[k] = (costs[k] || 0) + v;
  if (seqs.length) {
    if (probe.marks.drawn === undefined) probe.marks.drawn = performance.now();
    for (const s of seqs) probe.drawnAt[s] = now;
    probe.drawMs.push(since);
    probe.costs.push(costs);
    since = 0;
    costs = {};
  }
};

finishRunPage(root, page, view, { marks: probe.marks });

const timeOfDay = (iso) => (iso ? fmtClock(Date.parse(iso)) : "—");

// The header and the status card from the run's row (a status message, or the history's).
function setStatus(state) {
  const status = state.status;
  const badge = document.getElementById("status-badge");
  const cancelling = state.cancel_requested && !FINAL.has(status);
  if (badge) {
    badge.textContent = cancelling ? "cancelling…" : status;
    badge.className = `status s-${status}`;
  }
  const text = document.getElementById("status-text");
  if (text) text.textContent = status; // the server's label is the status itself
  const note = document.getElementById("status-cancelling");
  if (note) note.hidden = !cancelling;
  const started = document.getElementById("started-at");
  if (started && "started_at" in state) started.textContent = timeOfDay(state.started_at);
  const finished = document.getElementById("finished-at");
  if (finished && "finished_at" in state) finished.textContent = timeOfDay(state.finished_at);
  if (state.started_at) root.dataset.startedAt = state.started_at;
  if (state.started_at && view.startedMs === null) view.startedMs = Date.parse(state.started_at);
  const why = document.getElementById("status-reason");
  const box = document.getElementById("status-reason-box");
  if (why && state.reason) { why.textContent = state.reason; if (box) box.hidden = false; }
  if (status !== "queued") {
    // "Run queued." (the launch's notice) and "waiting for a worker" are over.
    for (const m of document.querySelectorAll(".messages")) m.remove();
    const waiting = document.getElementById("queued-note");
    if (waiting) waiting.hidden = true;
  }
  document.body.dataset.status = status;
}

function appendLog(lines) {
  const pre = document.getElementById("log");
  if (!pre || !lines.length) return;
  const empty = document.getElementById("log-empty");
  if (empty) empty.hidden = true;
  pre.hidden = false;
  const stick = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
  for (const l of lines) pre.append(`${timeOfDay(l.at)} ${l.level} ${l.message}\n`);
  while (pre.childNodes.length > 400) pre.removeChild(pre.firstChild);
  if (stick) pre.scrollTop = pre.scrollHeight;
}

function ended() {
  const note = document.getElementById("ended-note");
  if (note) note.hidden = false;
  if (probe.socket) probe.socket.close();
  // Give the last frame a moment, then the report from the database.
  setTimeout(() => window.location.reload(), 1200);
}

// Cancel without leaving the page: a POST by fetch (the form's own CSRF token), the badge says
// "cancelling…" at once and "cancelled" when the worker has stopped (a status message). With
// no JavaScript the form posts as before.
const cancelForm = document.getElementById("cancel-form");
if (cancelForm) {
  cancelForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const button = document.getElementById("cancel");
    if (button) button.disabled = true;
    setStatus({ status: document.body.dataset.status || page.status, cancel_requested: true });
    fetch(cancelForm.action, {
      method: "POST", credentials: "same-origin", body: new FormData(cancelForm),
      headers: { Accept: "application/json", "X-Requested-With": "fetch" }, redirect: "manual",
    }).then((r) => {
      if (r.type !== "opaqueredirect" && !r.ok) throw new Error(`HTTP ${r.status}`);
    }).catch(() => { cancelForm.submit(); });
  });
}

if (!FINAL.has(page.status)) {
  const stateEl = document.getElementById("live-state");
  let seenLog = page.last_log_id || 0;
  const log = (lines) => {
    appendLog((lines || []).filter((l) => l.id > seenLog));
    if (lines && lines.length) seenLog = Math.max(seenLog, lines[lines.length - 1].id);
  };
  probe.socket = connectRun(page.run_id, {
    getAfter: () => view.lastSeq,
    onState: (s) => showState(stateEl, s),
    onMessage: (m) => {
      probe.messages += 1;
      if (m.type === "history") {
        const t0 = performance.now();
        view.loadHistory(m);
        probe.ingestMs.push(performance.now() - t0);
        if (m.status) setStatus(m);
        log(m.log);
        if (FINAL.has(m.status)) ended();  // it ended between the page and the socket
      } else if (m.type === "snapshot") {
        const t0 = performance.now();
        view.push(m);
        probe.ingestMs.push(performance.now() - t0);
      } else if (m.type === "log") {
        log(m.lines);
      } else if (m.type === "status") {
        setStatus(m);
        if (FINAL.has(m.status)) ended();
      }
    },
  });
}

// The agent-tree view (report): fetched after the page so a big run's page opens at once.
const treesBox = document.getElementById("trees");
if (treesBox && page.trees_url) {
  let trees = null;
  let mode = "client";
  const ids = page.inference_worker_ids || {};
  const timelines = document.getElementById("timelines");
  const redraw = () => {
    drawTrees(treesBox, trees, mode, ids);
    treeLegend(document.getElementById("trees-legend"), trees, mode, ids);
    drawTimelines(timelines, trees, mode, ids);
    if (timelines) timelines.dataset.ready = "1";
  };
  fetch(page.trees_url, { credentials: "same-origin" })
    .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`HTTP ${r.status}`))))
    .then((data) => {
      trees = data;
      const note = document.getElementById("trees-note");
      if (note) {
        note.textContent = data.complete ? `${data.trees.length} trees with the most sessions.`
          : `${data.trees.length} trees with the most sessions among the first ${data.scanned_records.toLocaleString("en-US")} requests.`;
      }
      redraw();
      treesBox.dataset.ready = "1";
    })
    .catch((e) => {
      treesBox.textContent = `The tree view could not be loaded (${e.message}).`;
      if (timelines) timelines.textContent = "";
    });
  for (const b of document.querySelectorAll("[data-tree-mode]")) {
    b.addEventListener("click", () => {
      mode = b.dataset.treeMode;
      for (const o of document.querySelectorAll("[data-tree-mode]")) o.classList.toggle("on", o === b);
      const help = document.getElementById("trees-help");
      if (help) help.innerHTML = help.dataset[mode];
      if (trees) redraw();
    });
  }
}
