// The runs list, live: running and queued runs update in place (status, progress, requests,
// errors, leak flag, and the verdict once they end) from /ws/runs/; a run that appears is added
// to the top table, a run that ends is shown as ended. The page works without it (server-rendered).
import { connectRunsList, showState } from "./live.js";
import { FINAL_STATUSES as FINAL } from "./vocabulary.js";

const body = document.getElementById("active-body");
const section = document.getElementById("active-runs");
const stateEl = document.getElementById("live-state");
if (stateEl) stateEl.hidden = false;

function statusHtml(status) {
  const span = document.createElement("span");
  span.className = `status s-${status}`;
  span.textContent = status;
  return span;
}

function leakHtml(row) {
  if (!row.leak) return null;
  const span = document.createElement("span");
  span.className = "leak-flag";
  span.textContent = FINAL.has(row.status) ? "⚠ leaked" : `⚠ leaking (${row.orphaned} orphaned copies)`;
  span.title = "Orphaned session copies: sessions bounced between client workers";
  return span;
}

// The ended run's verdict (pass / fail, its reasons on hover), as the server renders it.
function verdictHtml(row) {
  if (!row.verdict) return null;
  const span = document.createElement("span");
  span.className = `verdict-pill v-${row.verdict}`;
  span.textContent = row.verdict;
  span.title = row.verdict_message;
  return span;
}

function setCell(tr, col, node) {
  const cell = tr.querySelector(`[data-col="${col}"]`);
  if (!cell) return;
  cell.replaceChildren(...(node ? [typeof node === "string" ? document.createTextNode(node) : node] : []));
}

function progressText(row) {
  if (row.status === "queued") return "waiting for a worker";
  if (FINAL.has(row.status)) return "ended";
  if (row.progress === null || row.progress === undefined) return "starting…";
  const pct = Math.round(100 * row.progress);
  const bar = document.createElement("span");
  bar.innerHTML = `<span class="mini-bar"><span style="width:${pct}%"></span></span>${pct} %` +
    (row.eta_s ? ` · ${Math.round(row.eta_s)} s left` : "");
  return bar;
}

// Requests cut by the run's stop are not errors: shown beside them, labelled plainly.
function errorsText(row) {
  if (row.errors === null || row.errors === undefined) return "—";
  return row.cut_by_stop ? `${row.errors} (+${row.cut_by_stop} cut by the stop)` : String(row.errors);
}

function activeRow(row) {
  let tr = body && body.querySelector(`tr[data-run-id="${row.id}"]`);
  if (!tr && body && !FINAL.has(row.status)) {
    tr = body.insertRow(0);
    tr.dataset.runId = row.id;
    tr.innerHTML = '<td data-col="status"></td><td><a></a></td><td class="opt"></td><td data-col="progress"></td>' +
      '<td class="num" data-col="requests"></td><td class="num" data-col="errors"></td><td data-col="leak"></td>';
    const a = tr.querySelector("a");
    a.href = row.url;
    a.textContent = row.scenario;
    tr.cells[2].textContent = row.target;
    if (section) section.hidden = false;
  }
  return tr;
}

function apply(row) {
  const tr = activeRow(row);
  if (tr) {
    setCell(tr, "status", statusHtml(row.status));
    setCell(tr, "progress", progressText(row));
    setCell(tr, "requests", row.requests === null || row.requests === undefined ? "—" : row.requests.toLocaleString("en-US"));
    setCell(tr, "errors", errorsText(row));
    setCell(tr, "leak", leakHtml(row));
    tr.classList.remove("flash");
    void tr.offsetWidth;  // restart the highlight
    tr.classList.add("flash");
  }
  // The same run in the history table below (status, verdict and leak flag).
  for (const other of document.querySelectorAll(`tr[data-run-id="${row.id}"]`)) {
    if (other === tr) continue;
    setCell(other, "status", statusHtml(row.status));
    setCell(other, "verdict", verdictHtml(row));
    setCell(other, "leak", leakHtml(row));
  }
}

window.aiperfRuns = { rows: {} };
connectRunsList({
  onState: (s) => showState(stateEl, s),
  onMessage: (m) => {
    if (m.type !== "runs") return;
    for (const row of m.rows) {
      window.aiperfRuns.rows[row.id] = row;
      apply(row);
    }
  },
});
