// The scenario history: one small chart per key figure across the scenario's runs, with the
// baseline's value as a dashed line.
const data = JSON.parse(document.getElementById("history-data").textContent);
const box = document.getElementById("trend");
const base = data.points.find((p) => p.id === data.baseline);
for (const m of data.metrics) {
  const el = document.createElement("div");
  el.className = "chart";
  box.appendChild(el);
  const x = data.points.map((p) => p.created_at);
  const y = data.points.map((p) => p.values[m.key]);
  const traces = [{
    x, y, mode: "lines+markers", name: m.label, line: { color: "#2458d6" },
    text: data.points.map((p) => p.label), hovertemplate: `%{text}<br>%{y}<extra>${m.label}</extra>`,
    marker: { size: data.points.map((p) => (p.baseline ? 11 : 7)), color: data.points.map((p) => (p.baseline ? "#1e8e3e" : "#2458d6")) },
  }];
  if (base && base.values[m.key] !== null) {
    traces.push({ x: [x[0], x[x.length - 1]], y: [base.values[m.key], base.values[m.key]], mode: "lines",
      name: "baseline", line: { color: "#1e8e3e", dash: "dash" }, hoverinfo: "skip" });
  }
  window.Plotly.newPlot(el, traces, {
    title: { text: `${m.label}${m.unit ? ` (${m.unit})` : ""} — ${m.better} is better`, font: { size: 13 }, x: 0 },
    height: 240, margin: { l: 52, r: 10, t: 34, b: 40 }, showlegend: false,
    yaxis: { rangemode: "tozero" }, paper_bgcolor: "rgba(0,0,0,0)",
  }, { displaylogo: false, responsive: true });
}
