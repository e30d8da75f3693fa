"""Server metrics: the endpoint's own Prometheus `/metrics`, scraped beside a live run.

    parse_exposition(text) -> Exposition        the tolerant 0.0.4 text parser
    read_exposition(exposition) -> Reading      the catalogue: canonical figures per worker
    ServerMetricsBooks                          readings -> live view, summary (pure)
    ServerMetricsScraper(url, interval_s=, headers=, log=)    the async shell: start / stop
    metrics_url_for(endpoint_url, setting)      which URL (None when "off")

Figures: `kv_usage` (0–1), `queue_depth` and `running` (requests), `prefix_hit_ratio`,
`requests_total` (over the run). It never touches the run's connection pool or fails a run.
"""

from runner.servermetrics.books import MAX_POINTS, VIEW_WORKERS, ServerMetricsBooks
from runner.servermetrics.catalogue import FIGURES, KINDS, Figure, Reading, read_exposition
from runner.servermetrics.exposition import Exposition, Family, Sample, parse_exposition
from runner.servermetrics.scraper import (
    METRICS_OFF,
    ServerMetricsScraper,
    metrics_url_for,
    same_origin,
    scrape_headers,
)
from runner.servermetrics.shapes import (
    FigureStats,
    ServerMetricsSummary,
    ServerMetricsView,
    ViewProvider,
    WorkerArrays,
)

__all__ = [
    "FIGURES",
    "KINDS",
    "MAX_POINTS",
    "METRICS_OFF",
    "VIEW_WORKERS",
    "Exposition",
    "Family",
    "Figure",
    "FigureStats",
    "Reading",
    "Sample",
    "ServerMetricsBooks",
    "ServerMetricsScraper",
    "ServerMetricsSummary",
    "ServerMetricsView",
    "ViewProvider",
    "WorkerArrays",
    "metrics_url_for",
    "parse_exposition",
    "read_exposition",
    "same_origin",
    "scrape_headers",
]
