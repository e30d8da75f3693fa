// The scenario history: one small chart per key figure across the scenario's runs, dates on
// the x axis, one line per configuration, named by the fields that differ between the runs
// (policy, scope, concurrency, endpoint, ...: legacy and spawn-pin runs, or c=8 and c=64, are
// different experiments, not a trend), the baseline's value as a dashed line and its run
// ringed green.
const data = JSON.parse(document.getElementById("history-data").textContent);
const box = document.getElementById("trend");
const base = data.points.find((p) => p.id === data.baseline);
const COLOURS = ["#2458d6", "#e8710a", "#7b3fc4", "#0f9d8a", "#c5221f", "#8a6d00", "#d01884", "#5f6368"];
const groups = [...new Set(data.points.map((p) => p.group))];
const colour = (g) => COLOURS[groups.indexOf(g) % COLOURS.length];
const dates = data.points.map((p) => p.created_at);
const plots = [];
for (const [i, m] of data.metrics.entries()) {
  const el = document.createElement("div");
  el.className = "chart";
  box.appendChild(el);
  // A ratio reads as a percentage, as on the run page.
  const ratio = m.key.endsWith("_ratio");
  const val = (v) => (ratio && v !== null && v !== undefined ? 100 * v : v);
  const traces = groups.map((g) => {
    const pts = data.points.filter((p) => p.group === g);
    return {
      x: pts.map((p) => p.created_at), y: pts.map((p) => val(p.values[m.key])), name: g,
      legendgroup: g, showlegend: i === 0, mode: "lines+markers", customdata: pts.map((p) => p.label),
      line: { color: colour(g) }, hovertemplate: `%{customdata}<br>%{y}<extra>${m.label}</extra>`,
      marker: {
        color: colour(g), size: pts.map((p) => (p.baseline ? 12 : 7)),
        line: { color: "#1e8e3e", width: pts.map((p) => (p.baseline ? 3 : 0)) },
      },
    };
  });
  if (base && base.values[m.key] !== null) {
    traces.push({ x: [dates[0], dates[dates.length - 1]], y: [val(base.values[m.key]), val(base.values[m.key])],
      mode: "lines", name: "baseline", legendgroup: "baseline", showlegend: i === 0,
      line: { color: "#1e8e3e", dash: "dash" }, hoverinfo: "skip" });
  }
  plots.push([el, traces, {
    title: { text: `${m.label}${ratio ? " (%)" : m.unit ? ` (${m.unit})` : ""} — ${m.better} is better`, font: { size: 13 }, x: 0 },
    height: 240, margin: { l: 52, r: 10, t: 34, b: 40 }, showlegend: false, autosize: true,
    xaxis: { type: "date", tickformat: "%b %d\n%H:%M", nticks: 6, zeroline: false },
    yaxis: { rangemode: "tozero", ticksuffix: ratio ? " %" : "" }, paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)",
  }]);
}
// One legend for every chart, above them: the groups and the baseline.
const legend = document.getElementById("trend-legend");
if (legend) {
  for (const g of groups) {
    const item = document.createElement("span");
    item.innerHTML = `<i class="swatch"></i>`;
    item.firstChild.style.background = colour(g);
    item.append(`${g} (${data.points.filter((p) => p.group === g).length})`);
    legend.appendChild(item);
  }
  if (base) {
    const item = document.createElement("span");
    item.innerHTML = '<i class="swatch dashed"></i>baseline';
    legend.appendChild(item);
  }
}
// Plot once the grid has laid the boxes out, so each chart takes its column's width.
requestAnimationFrame(() => {
  for (const [el, traces, layout] of plots) window.Plotly.newPlot(el, traces, layout, { displaylogo: false, responsive: true });
});
