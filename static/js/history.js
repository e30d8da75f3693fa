// The scenario history: one small chart per key figure across the scenario's runs (in launch
// order, oldest left), with the baseline's value as a dashed line and its run marked green.
const data = JSON.parse(document.getElementById("history-data").textContent);
const box = document.getElementById("trend");
const base = data.points.find((p) => p.id === data.baseline);
const x = data.points.map((_, i) => i + 1);
const labels = data.points.map((p) => p.label);
const plots = [];
for (const m of data.metrics) {
  const el = document.createElement("div");
  el.className = "chart";
  box.appendChild(el);
  const y = data.points.map((p) => p.values[m.key]);
  const traces = [{
    x, y, mode: "lines+markers", name: m.label, line: { color: "#2458d6" }, customdata: labels,
    hovertemplate: `run %{x}: %{customdata}<br>%{y}<extra>${m.label}</extra>`,
    marker: { size: data.points.map((p) => (p.baseline ? 11 : 7)), color: data.points.map((p) => (p.baseline ? "#1e8e3e" : "#2458d6")) },
  }];
  if (base && base.values[m.key] !== null) {
    traces.push({ x: [1, x.length], y: [base.values[m.key], base.values[m.key]], mode: "lines",
      name: "baseline", line: { color: "#1e8e3e", dash: "dash" }, hoverinfo: "skip" });
  }
  plots.push([el, traces, {
    title: { text: `${m.label}${m.unit ? ` (${m.unit})` : ""} — ${m.better} is better`, font: { size: 13 }, x: 0 },
    height: 240, margin: { l: 52, r: 10, t: 34, b: 36 }, showlegend: false, autosize: true,
    xaxis: { title: { text: "run (oldest first)" }, dtick: Math.max(1, Math.ceil(x.length / 10)), zeroline: false },
    yaxis: { rangemode: "tozero" }, paper_bgcolor: "rgba(0,0,0,0)",
  }]);
}
// Plot once the grid has laid the boxes out, so each chart takes its column's width.
requestAnimationFrame(() => {
  for (const [el, traces, layout] of plots) window.Plotly.newPlot(el, traces, layout, { displaylogo: false, responsive: true });
});
