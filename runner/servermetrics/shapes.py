"""The JSON shapes server metrics take where they leave the engine: the compact view each
live snapshot carries and the `server_metrics` object of the summary. Shapes only."""

from __future__ import annotations

from typing import Protocol, TypedDict

__all__ = [
    "FigureStats",
    "ServerMetricsSummary",
    "ServerMetricsView",
    "ViewProvider",
    "WorkerArrays",
]


class WorkerArrays(TypedDict):
    """Per worker, parallel to `ids` (the label values that name each worker). A figure the
    server does not report per worker is absent; a worker missing from a figure is None."""

    ids: list[str]
    kv_usage: list[float | None]
    queue_depth: list[float | None]
    running: list[float | None]


class ServerMetricsView(TypedDict, total=False):
    """The latest scrape, compact (a snapshot carries it; the live page charts its history).

    Unavailable: `{"available": false, "reason": ...}`. Available before the first scrape:
    `t_s` None and no figures."""

    available: bool
    reason: str
    kind: str | None  # mock, vllm, sglang, dynamo, unknown (simulated: the simulated cluster)
    t_s: float | None  # run time of the scrape shown: charts take one point per new t_s
    figures: dict[str, float | None]  # kv_usage, queue_depth, running, prefix_hit_ratio, ...
    workers: WorkerArrays | None  # None when no series names a worker
    workers_total: int  # workers seen; `workers` shows the first 64


class FigureStats(TypedDict):
    """Over every scrape of the run: gauges as sampled, counter figures as run-so-far values."""

    min: float | None
    mean: float | None
    max: float | None
    last: float | None


class ServerMetricsSummary(TypedDict, total=False):
    available: bool
    reason: str  # why not, when unavailable
    kind: str | None
    url: str | None
    interval_s: float
    scrapes: int
    failures: int
    figures: dict[str, FigureStats]
    sources: dict[str, str]  # figure -> the series it was read from
    workers: dict[str, list[str] | list[float | None]]  # "ids" and per figure its last values
    series: dict[str, list[float | None]]  # "t_s" and the gauge figures, at most 600 points
    extras: dict[str, float]  # a few more series per server, summed, last scrape
    other_families: int  # families on the page neither read nor kept


class ViewProvider(Protocol):
    """What a live run asks at each snapshot (the scraper is one)."""

    def latest(self) -> ServerMetricsView: ...
