// Numbers, bytes, durations and colours as every chart and table of a run shows them.

const PALETTE = [
  "#2458d6", "#e8710a", "#1e8e3e", "#d93025", "#9334e6", "#12b5cb", "#c5221f", "#f9ab00",
  "#5f6368", "#185abc", "#b06000", "#137333", "#a50e0e", "#681da8", "#007b83", "#795548",
];

export function workerColor(i) {
  if (i < PALETTE.length) return PALETTE[i];
  return `hsl(${(i * 137.508) % 360}, 62%, ${i % 2 ? 42 : 55}%)`;
}

// Server worker ids can be long (Dynamo's are 20-digit numbers): their tail names them.
export function shortId(id) {
  const s = String(id);
  return s.length > 8 ? `…${s.slice(-6)}` : s;
}

// An inference worker as the server names it: records use small indices, and a server with
// long instance ids has them in the summary's inference_worker_ids ({"0": "1767…"}).
export function inferenceName(index, ids) {
  const id = ids && ids[String(index)];
  return id === undefined ? { short: `w${index}`, full: `worker ${index}` } : { short: shortId(id), full: `worker ${id}` };
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

// A wall-clock instant (ms since the epoch) as a UTC time of day, as the server renders the
// run's times (settings.TIME_ZONE).
export function fmtClock(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return "";
  return new Date(ms).toISOString().slice(11, 19);
}
