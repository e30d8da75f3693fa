"""Metrics: per-request records, mergeable latency histograms, run aggregates, live series.

Pure state fed with records and elapsed times; no clock, no I/O. Snapshots from several
processes merge exactly (`RunMetrics.merge`; wire form: `metrics_to_dict`, `metrics_from_dict`).
"""

from runner.metrics.aggregate import (
    DEPTH_LABELS,
    SLO_METRICS,
    ClientWorkersDict,
    GroupSummary,
    InferenceWorkersDict,
    InferenceWorkersSummary,
    RequestStats,
    RunMetrics,
    RunSummary,
    Throughput,
)
from runner.metrics.encoding import (
    RequestStatsDict,
    RunSnapshot,
    metrics_from_dict,
    metrics_to_dict,
    stats_from_dict,
    stats_to_dict,
)
from runner.metrics.histogram import (
    HISTOGRAM_SCHEME,
    HistogramDict,
    LatencyHistogram,
    PercentileSummary,
)
from runner.metrics.records import (
    BRANCH_MODE_NAMES,
    CUT_BY_STOP,
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
    "CUT_BY_STOP",
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
    "metrics_from_dict",
    "metrics_to_dict",
    "stats_from_dict",
    "stats_to_dict",
]
