// The sweep page: its curves are plotly figures the server builds (aiperf_web/sweeps/charts.py);
// this draws them, and while the sweep runs keeps them, the header, the headlines and the point
// table current from the sweep's socket (/ws/sweeps/{id}/), which sends the whole page again
// each time a point is made or ends.
import { plotConfig } from "./charts/plot.js";
import { connect, showState } from "./live.js";

const root = document.getElementById("sweep");
const data = JSON.parse(document.getElementById("sweep-data").textContent);

function draw(charts) {
  const config = plotConfig();
  for (const chart of charts) {
    const el = document.getElementById(chart.id);
    if (!el) continue;
    // uirevision: a zoom or a legend toggle made by the reader survives the live redraws.
    const layout = { ...chart.figure.layout, uirevision: chart.id };
    window.Plotly.react(el, chart.figure.data, layout, config);
  }
}

function scrollHint() {
  const box = document.getElementById("points-scroll");
  const hint = document.getElementById("points-hint");
  if (box && hint) hint.hidden = box.scrollWidth <= box.clientWidth + 1;
}

function apply(msg) {
  if (msg.deleted) {
    root.dataset.active = "";
    return;
  }
  draw(msg.charts);
  for (const [key, html] of Object.entries(msg.html || {})) {
    const el = document.getElementById(`sweep-${key}`);
    if (el) el.innerHTML = html;
  }
  root.dataset.active = msg.active ? "1" : "";
  root.dataset.runsEnded = String(msg.runs_ended);
  const cancel = document.getElementById("cancel-form");
  if (cancel) cancel.hidden = !msg.active;
  const cancelButton = document.getElementById("cancel");
  if (cancelButton) cancelButton.disabled = !!msg.cancel_requested;
  const rerun = document.getElementById("rerun-form");
  if (rerun) rerun.hidden = !!msg.active;
  scrollHint();
}

function start() {
  draw(data.charts);
  root.dataset.runsEnded = String(data.runs_ended);
  scrollHint();
  window.addEventListener("resize", scrollHint);
  document.body.dataset.drawn = "1";
  if (!data.active) return;
  const stateEl = document.getElementById("live-state");
  let socket = null;
  socket = connect(`/ws/sweeps/${data.id}/?p=${encodeURIComponent(data.percentile)}`, {
    onState: (s) => { if (stateEl) { stateEl.hidden = false; showState(stateEl, s); } },
    onMessage: (msg) => {
      if (msg.type !== "sweep") return;
      apply(msg);
      document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
      if (!msg.active && socket) {
        socket.close();
        if (stateEl) stateEl.hidden = true;
      }
    },
  });
}

if (window.Plotly) start();
else window.addEventListener("load", start);
