// The one live client every page shares: a WebSocket to /ws/runs/{id}/ (or /ws/runs/) that
// reconnects with backoff and resumes by seq: it asks for `?after=<the last seq the page
// holds>`, so the server sends exactly the samples the page misses, then the live feed.
// The close codes after which it stops (not logged in, no such run for this viewer, access
// revoked) are the server's, declared in aiperf_web/runs/messages.py.
import { FINAL_CLOSE_CODES } from "./vocabulary.js";

function wsUrl(path) {
  const scheme = window.location.protocol === "https:" ? "wss" : "ws";
  return `${scheme}://${window.location.host}${path}`;
}

// handlers: onMessage(msg), onState("connecting"|"live"|"reconnecting"|"refused"|"closed"),
// getAfter() -> the last seq held (for the resume).
export function connect(path, handlers) {
  let socket = null;
  let attempt = 0;
  let stopped = false;
  let timer = null;
  const state = (s) => handlers.onState && handlers.onState(s);

  function open() {
    if (stopped) return;
    const after = handlers.getAfter ? handlers.getAfter() : null;
    const url = wsUrl(after === null || after === undefined ? path : `${path}?after=${after}`);
    state(attempt ? "reconnecting" : "connecting");
    socket = new WebSocket(url);
    socket.onopen = () => { attempt = 0; state("live"); };
    socket.onmessage = (event) => {
      let msg;
      try { msg = JSON.parse(event.data); } catch { return; }
      // A message the socket could not take (every socket may send one): noted, not shown.
      if (msg.type === "error") { console.warn("live socket:", msg.message); return; }
      handlers.onMessage(msg);
    };
    socket.onclose = (event) => {
      socket = null;
      if (stopped) return;
      if (FINAL_CLOSE_CODES.has(event.code)) { state("refused"); return; }
      attempt += 1;
      state("reconnecting");
      const delay = Math.min(10000, 500 * 2 ** Math.min(attempt, 5)) * (0.75 + Math.random() / 2);
      timer = setTimeout(open, delay);
    };
  }
  open();
  return {
    close() { stopped = true; clearTimeout(timer); if (socket) socket.close(); state("closed"); },
    // Tests and benchmarks: drop the socket as a network blip would.
    drop() { if (socket) socket.close(); },
  };
}

export function connectRun(runId, handlers) {
  return connect(`/ws/runs/${runId}/`, handlers);
}

export function connectRunsList(handlers) {
  return connect("/ws/runs/", handlers);
}

export function showState(el, s) {
  if (!el) return;
  const text = { connecting: "connecting…", live: "live", reconnecting: "reconnecting…",
    refused: "live updates refused", closed: "" }[s] ?? s;
  el.textContent = text;
  el.className = `live-state live-${s}`;
}
