// Sweeps compared (and a scenario's sweep history): the server's plotly figures
// (aiperf_web/sweeps/charts.py sweep_compare_figures), drawn as they come.
import { plotConfig } from "./charts/plot.js";

function start() {
  const data = JSON.parse(document.getElementById("sweep-data").textContent);
  const config = plotConfig();
  for (const chart of data.charts) {
    const el = document.getElementById(chart.id);
    if (el) window.Plotly.newPlot(el, chart.figure.data, chart.figure.layout, config);
  }
  document.body.dataset.drawn = "1";
}

if (window.Plotly) start();
else window.addEventListener("load", start);
