// The run page: draws what the server rendered (history from the database), then, while the
// run is queued or running, extends it with the live feed. When the run ends the page reloads
// into the report (the final report always comes from the database).
import { RunView, drawSlices, drawTrees } from "./charts.js";
import { connectRun, showState } from "./live.js";

const FINAL = new Set(["succeeded", "failed", "cancelled"]);
const page = JSON.parse(document.getElementById("run-data").textContent);
const root = document.getElementById("run");
const view = new RunView(root, { intervalS: page.interval_s, workerIds: page.inference_worker_ids });

// Instrumentation read by the browser tests and the live benchmark: when each seq was drawn
// (wall clock, ms) and the main-thread time each draw took.
const probe = { view, drawnAt: {}, drawMs: [], frameMs: [], ingestMs: [], costs: [], messages: 0, socket: null };
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
    for (const s of seqs) probe.drawnAt[s] = now;
    probe.drawMs.push(since);
    probe.costs.push(costs);
    since = 0;
    costs = {};
  }
};

view.loadHistory(page.history);
view.draw(true);
drawSlices(document.getElementById("chart-depth"), page.by_depth || {}, "Latency by tree depth", ["0", "1", "2", "3+"]);
drawSlices(document.getElementById("chart-branch"), page.by_branch_mode || {}, "Latency by branch mode", ["root", "fork", "spawn"]);

function setStatus(status, reason) {
  const badge = document.getElementById("status-badge");
  if (badge) { badge.textContent = status; badge.className = `status s-${status}`; }
  const why = document.getElementById("status-reason");
  const box = document.getElementById("status-reason-box");
  if (why && reason) { why.textContent = reason; if (box) box.hidden = false; }
  document.body.dataset.status = status;
}

function appendLog(lines) {
  const pre = document.getElementById("log");
  if (!pre || !lines.length) return;
  const empty = document.getElementById("log-empty");
  if (empty) empty.hidden = true;
  pre.hidden = false;
  const stick = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
  for (const l of lines) {
    const at = new Date(l.at).toISOString().slice(11, 19);
    pre.append(`${at} ${l.level} ${l.message}\n`);
  }
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

if (!FINAL.has(page.status)) {
  const stateEl = document.getElementById("live-state");
  let seenLog = page.last_log_id || 0;
  probe.socket = connectRun(page.run_id, {
    getAfter: () => view.lastSeq,
    onState: (s) => showState(stateEl, s),
    onMessage: (m) => {
      probe.messages += 1;
      if (m.type === "history") {
        const t0 = performance.now();
        view.loadHistory(m);
        probe.ingestMs.push(performance.now() - t0);
        if (m.status) setStatus(m.status, m.reason);
        if (FINAL.has(m.status)) ended();  // it ended between the page and the socket
        appendLog((m.log || []).filter((l) => l.id > seenLog));
        if (m.log && m.log.length) seenLog = Math.max(seenLog, m.log[m.log.length - 1].id);
      } else if (m.type === "snapshot") {
        const t0 = performance.now();
        view.push(m);
        probe.ingestMs.push(performance.now() - t0);
        if (document.body.dataset.status === "queued") setStatus("running", "");
      } else if (m.type === "log") {
        appendLog(m.lines.filter((l) => l.id > seenLog));
        if (m.lines.length) seenLog = Math.max(seenLog, m.lines[m.lines.length - 1].id);
      } else if (m.type === "status") {
        setStatus(m.status, m.reason);
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
  const redraw = () => drawTrees(treesBox, trees, mode, page.inference_worker_ids || {});
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
    .catch((e) => { treesBox.textContent = `The tree view could not be loaded (${e.message}).`; });
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
