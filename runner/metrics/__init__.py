"""Metrics: per-request records, mergeable latency histograms, run aggregates, live series.

Pure state fed with records and elapsed times; no clock, no I/O. Snapshots from several
processes merge exactly (`RunMetrics.merge`, `RunMetrics.from_snapshot`).
"""

from runner.metrics.aggregate import (
    DEPTH_LABELS,
    SLO_METRICS,
    ClientWorkersDict,
    GroupSummary,
    InferenceWorkersDict,
    InferenceWorkersSummary,
    RequestStats,
    RequestStatsDict,
    RunMetrics,
    RunSnapshot,
    RunSummary,
    Throughput,
)
from runner.metrics.histogram import (
    HISTOGRAM_SCHEME,
    HistogramDict,
    LatencyHistogram,
    PercentileSummary,
)
from runner.metrics.records import (
    BRANCH_MODE_NAMES,
    ERROR_CATEGORIES,
    BranchModeName,
    ErrorCategory,
    RequestRecord,
    RequestRecordJson,
    branch_mode_name,
)
from runner.metrics.timeseries import IntervalPercentiles, LatencyTimeSeries, SeriesPoint

__all__ = [
    "BRANCH_MODE_NAMES",
    "DEPTH_LABELS",
    "ERROR_CATEGORIES",
    "HISTOGRAM_SCHEME",
    "SLO_METRICS",
    "BranchModeName",
    "ClientWorkersDict",
    "ErrorCategory",
    "GroupSummary",
    "HistogramDict",
    "InferenceWorkersDict",
    "InferenceWorkersSummary",
    "IntervalPercentiles",
    "LatencyHistogram",
    "LatencyTimeSeries",
    "PercentileSummary",
    "RequestRecord",
    "RequestRecordJson",
    "RequestStats",
    "RequestStatsDict",
    "RunMetrics",
    "RunSnapshot",
    "RunSummary",
    "SeriesPoint",
    "Throughput",
    "branch_mode_name",
]
