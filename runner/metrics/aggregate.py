"""Run-level aggregation of request records: counters, histograms, splits.

Owns what a run's metrics are made of (overall, by tree depth, by branch mode, per client and
inference worker), goodput against SLOs, and the exact merge of metrics from several
processes (their wire form is `encoding.py`'s). It must not read a clock or do I/O: callers
pass records and elapsed time, and publish what `summary()` returns.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final, TypedDict

from runner.errors import SpecError
from runner.metrics.gaps import decode_gaps
from runner.metrics.histogram import LatencyHistogram, PercentileSummary
from runner.metrics.records import BRANCH_MODE_NAMES, CUT_BY_STOP, RequestRecord

__all__ = [
    "DEPTH_LABELS",
    "SLO_METRICS",
    "ClientWorkersDict",
    "GroupSummary",
    "InferenceWorkersDict",
    "InferenceWorkersSummary",
    "RequestStats",
    "RunMetrics",
    "RunSummary",
    "Throughput",
]

# Depths 3 and deeper share a group: trees deeper than that are rare and a chart with one line
# per depth stops being readable.
DEPTH_LABELS: Final = ("0", "1", "2", "3+")
SLO_METRICS: Final = ("ttft_ms", "itl_ms", "latency_ms")


class Throughput(TypedDict):
    """Rates over a caller-supplied elapsed time; None until any time has elapsed."""

    elapsed_s: float
    requests_per_s: float | None  # completed (successful) requests
    input_tokens_per_s: float | None
    output_tokens_per_s: float | None
    goodput_per_s: float | None  # completed requests that met every SLO


class GroupSummary(TypedDict):
    requests: int  # every counted (non-warmup) request: completed + errors + cut_by_stop
    completed: int  # requests that succeeded; latency, tokens and cache come from these only
    errors: int
    errors_by_category: dict[str, int]  # non-zero categories only
    # In flight when the run stopped (its duration, a count, a cancel) and cut off by it: the
    # stop's doing, not the endpoint's, so neither an error nor held against goodput.
    cut_by_stop: int
    error_rate: float | None  # errors over the requests that ran their course
    good_requests: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    prefix_cache_hit_ratio: float | None
    ttft_ms: PercentileSummary
    itl_ms: PercentileSummary
    latency_ms: PercentileSummary
    span_s: float | None  # first counted start to last end: an elapsed time for offline reports
    throughput: Throughput | None


class ClientWorkersDict(TypedDict):
    """Per client worker, indexed by worker number."""

    completed: list[int]
    errors: list[int]


class InferenceWorkersDict(TypedDict):
    """Per inference worker as parallel arrays, ordered by the id the server reported."""

    ids: list[int]
    requests: list[int]
    errors: list[int]
    prompt_tokens: list[int]
    cached_tokens: list[int]
    cache_reported_prompt_tokens: list[int]


class InferenceWorkersSummary(InferenceWorkersDict):
    prefix_cache_hit_ratio: list[float | None]


class RunSummary(GroupSummary):
    warmup_requests: int
    slo_ms: dict[str, float]
    by_depth: dict[str, GroupSummary]
    by_branch_mode: dict[str, GroupSummary]
    client_workers: ClientWorkersDict
    inference_workers: InferenceWorkersSummary
    inter_chunk_ms: PercentileSummary  # every inter-chunk gap (itl_ms: each request's mean)
    inter_chunk_samples: int


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


class RequestStats:
    """Counters and latency histograms of one slice of a run's requests.

    Every counted request adds to `requests`; one cut by the stop (category `cancelled`)
    adds only to `cut_by_stop`; a failed one adds only to its error category (its partial
    timings would drag percentiles towards the timeout), a successful one to `completed`,
    tokens, prefix-cache counts and the histograms.
    """

    __slots__ = (
        "cache_reported_prompt_tokens",
        "cached_tokens",
        "completed",
        "cut_by_stop",
        "errors_by_category",
        "first_start_s",
        "good",
        "itl_ms",
        "last_end_s",
        "latency_ms",
        "output_tokens",
        "prompt_tokens",
        "requests",
        "ttft_ms",
    )

    def __init__(self) -> None:
        self.requests = 0
        self.completed = 0
        self.good = 0
        self.cut_by_stop = 0
        self.errors_by_category: dict[str, int] = {}
        self.prompt_tokens = 0
        self.output_tokens = 0
        self.cached_tokens = 0
        # Prompt tokens of the requests whose server reported cached tokens: the denominator of
        # the hit ratio, so servers that report nothing do not dilute it.
        self.cache_reported_prompt_tokens = 0
        self.first_start_s = math.inf
        self.last_end_s = -math.inf
        self.ttft_ms = LatencyHistogram()
        self.itl_ms = LatencyHistogram()
        self.latency_ms = LatencyHistogram()

    def add(
        self, record: RequestRecord, *, ttft_ms: float | None, latency_ms: float, good: bool
    ) -> None:
        """Count one record; the caller derives ttft/latency once for all slices it feeds."""
        self.requests += 1
        if record.start_s < self.first_start_s:
            self.first_start_s = record.start_s
        if record.end_s > self.last_end_s:
            self.last_end_s = record.end_s
        error = record.error
        if error is not None:
            if error == CUT_BY_STOP:
                self.cut_by_stop += 1
                return
            self.errors_by_category[error] = self.errors_by_category.get(error, 0) + 1
            return
        self.completed += 1
        if good:
            self.good += 1
        self.prompt_tokens += record.prompt_tokens
        self.output_tokens += record.output_tokens
        if record.cached_tokens is not None:
            self.cached_tokens += record.cached_tokens
            self.cache_reported_prompt_tokens += record.prompt_tokens
        if ttft_ms is not None:
            self.ttft_ms.record(ttft_ms)
        if record.itl_ms is not None:
            self.itl_ms.record(record.itl_ms)
        self.latency_ms.record(latency_ms)

    @property
    def errors(self) -> int:
        return sum(self.errors_by_category.values())

    @property
    def finished(self) -> int:
        """Requests that ran their course (completed or failed): the base of error and good
        ratios, which the stop's cuts must not dilute."""
        return self.requests - self.cut_by_stop

    @property
    def prefix_cache_hit_ratio(self) -> float | None:
        """Σ cached / Σ prompt tokens over successful requests whose server reported cache."""
        return _ratio(self.cached_tokens, self.cache_reported_prompt_tokens)

    @property
    def span_s(self) -> float | None:
        """From the first counted request's start to the last one's end."""
        if not self.requests:
            return None
        return self.last_end_s - self.first_start_s

    def merge(self, other: RequestStats) -> None:
        self.requests += other.requests
        self.completed += other.completed
        self.good += other.good
        self.cut_by_stop += other.cut_by_stop
        for category, n in other.errors_by_category.items():
            self.errors_by_category[category] = self.errors_by_category.get(category, 0) + n
        self.prompt_tokens += other.prompt_tokens
        self.output_tokens += other.output_tokens
        self.cached_tokens += other.cached_tokens
        self.cache_reported_prompt_tokens += other.cache_reported_prompt_tokens
        self.first_start_s = min(self.first_start_s, other.first_start_s)
        self.last_end_s = max(self.last_end_s, other.last_end_s)
        self.ttft_ms.merge(other.ttft_ms)
        self.itl_ms.merge(other.itl_ms)
        self.latency_ms.merge(other.latency_ms)

    def throughput(self, elapsed_s: float) -> Throughput:
        if elapsed_s <= 0.0:
            return {
                "elapsed_s": elapsed_s,
                "requests_per_s": None,
                "input_tokens_per_s": None,
                "output_tokens_per_s": None,
                "goodput_per_s": None,
            }
        return {
            "elapsed_s": elapsed_s,
            "requests_per_s": self.completed / elapsed_s,
            "input_tokens_per_s": self.prompt_tokens / elapsed_s,
            "output_tokens_per_s": self.output_tokens / elapsed_s,
            "goodput_per_s": self.good / elapsed_s,
        }

    def summary(self, *, elapsed_s: float | None = None) -> GroupSummary:
        errors = self.errors
        return {
            "requests": self.requests,
            "completed": self.completed,
            "errors": errors,
            "errors_by_category": {k: n for k, n in sorted(self.errors_by_category.items()) if n},
            "cut_by_stop": self.cut_by_stop,
            "error_rate": _ratio(errors, self.finished),
            "good_requests": self.good,
            "input_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
            "prefix_cache_hit_ratio": self.prefix_cache_hit_ratio,
            "ttft_ms": self.ttft_ms.summary(),
            "itl_ms": self.itl_ms.summary(),
            "latency_ms": self.latency_ms.summary(),
            "span_s": self.span_s,
            "throughput": None if elapsed_s is None else self.throughput(elapsed_s),
        }


class _InferenceWorkerTally:
    __slots__ = (
        "cache_reported_prompt_tokens",
        "cached_tokens",
        "errors",
        "prompt_tokens",
        "requests",
    )

    def __init__(self) -> None:
        self.requests = 0
        self.errors = 0
        self.prompt_tokens = 0
        self.cached_tokens = 0
        self.cache_reported_prompt_tokens = 0


def _parse_slo_ms(slo_ms: Mapping[str, float] | None) -> dict[str, float]:
    parsed: dict[str, float] = {}
    for metric, limit in (slo_ms or {}).items():
        if metric not in SLO_METRICS:
            raise SpecError(f"unknown SLO metric {metric!r}; use one of {', '.join(SLO_METRICS)}")
        if isinstance(limit, bool) or not (isinstance(limit, int | float) and 0 < limit < math.inf):
            raise SpecError(f"SLO {metric} must be a positive number of ms, got {limit!r}")
        parsed[metric] = float(limit)
    return parsed


def _depth_index(depth: int) -> int:
    if depth < 0:
        raise ValueError(f"request depth must be >= 0, got {depth}")
    return depth if depth < 3 else 3


class RunMetrics:
    """Everything a run measures from its request records, mergeable across processes.

    Warmup records are counted in `warmup_requests` and nowhere else. A request is *good*
    when it succeeded and every SLO it can be judged on holds (a request without a first
    token or without an ITL is not judged on that metric).
    """

    def __init__(self, *, slo_ms: Mapping[str, float] | None = None) -> None:
        self._slo_ms = _parse_slo_ms(slo_ms)
        # Missing SLOs become +inf so the hot path compares without looking anything up.
        self._ttft_limit_ms = self._slo_ms.get("ttft_ms", math.inf)
        self._itl_limit_ms = self._slo_ms.get("itl_ms", math.inf)
        self._latency_limit_ms = self._slo_ms.get("latency_ms", math.inf)
        self.warmup_requests = 0
        self._overall = RequestStats()
        self._overall_stale = False
        self._by_depth = [RequestStats() for _ in DEPTH_LABELS]
        self._by_mode: dict[str, RequestStats] = {
            mode: RequestStats() for mode in BRANCH_MODE_NAMES
        }
        self._client_completed: list[int] = []
        self._client_errors: list[int] = []
        self._inference: dict[int, _InferenceWorkerTally] = {}
        # A child session's first request: where lineage affinity shows (does it find the
        # prefix its tree already computed, or land elsewhere and prefill it again?).
        self.child_first_prompt_tokens = 0
        self.child_first_cached_tokens = 0
        # Send time minus scheduled time over every counted request: the client's own lag.
        self.schedule_lag_ms = LatencyHistogram()
        # Every gap between consecutive chunks of the counted successful requests (itl_ms is
        # their mean per request): the samples a record's `chunk_gaps` keeps.
        self.inter_chunk_ms = LatencyHistogram()

    # -- feeding ---------------------------------------------------------------------------

    def record(self, record: RequestRecord) -> None:
        if record.warmup:
            self.warmup_requests += 1
            return
        ttft_ms = record.ttft_ms
        latency_ms = record.latency_ms
        itl_ms = record.itl_ms
        ok = record.error is None
        cut = record.error == CUT_BY_STOP
        good = (
            ok
            and latency_ms <= self._latency_limit_ms
            and (ttft_ms is None or ttft_ms <= self._ttft_limit_ms)
            and (itl_ms is None or itl_ms <= self._itl_limit_ms)
        )
        if record.due_s is not None:
            self.schedule_lag_ms.record(max(0.0, (record.start_s - record.due_s) * 1000.0))
        if ok and record.chunk_gaps:
            self.inter_chunk_ms.record_many([us / 1000.0 for us in decode_gaps(record.chunk_gaps)])
        depth_stats = self._by_depth[_depth_index(record.depth)]
        mode_stats = self._by_mode[record.branch_mode]
        # The overall group is the merge of the depth groups, built when read: feeding it
        # here too would cost a third of this method on the simulator's hot path.
        self._overall_stale = True
        depth_stats.add(record, ttft_ms=ttft_ms, latency_ms=latency_ms, good=good)
        mode_stats.add(record, ttft_ms=ttft_ms, latency_ms=latency_ms, good=good)

        worker = record.client_worker
        if worker < 0:
            raise ValueError(f"client worker must be >= 0, got {worker}")
        if worker >= len(self._client_completed):
            grow = worker + 1 - len(self._client_completed)
            self._client_completed.extend([0] * grow)
            self._client_errors.extend([0] * grow)
        if ok:
            self._client_completed[worker] += 1
        elif not cut:
            self._client_errors[worker] += 1

        if ok and record.turn_index == 0 and record.depth > 0 and record.cached_tokens is not None:
            self.child_first_prompt_tokens += record.prompt_tokens
            self.child_first_cached_tokens += record.cached_tokens

        if record.inference_worker is not None:
            tally = self._inference.get(record.inference_worker)
            if tally is None:
                tally = self._inference[record.inference_worker] = _InferenceWorkerTally()
            tally.requests += 1
            if not ok:
                tally.errors += 0 if cut else 1
            else:
                tally.prompt_tokens += record.prompt_tokens
                if record.cached_tokens is not None:
                    tally.cached_tokens += record.cached_tokens
                    tally.cache_reported_prompt_tokens += record.prompt_tokens

    def merge(self, other: RunMetrics) -> None:
        """Add another process's metrics to these; equal to having recorded both streams."""
        if other._slo_ms != self._slo_ms:
            raise ValueError(f"cannot merge metrics with SLOs {other._slo_ms} into {self._slo_ms}")
        self.warmup_requests += other.warmup_requests
        self._overall_stale = True
        self.child_first_prompt_tokens += other.child_first_prompt_tokens
        self.child_first_cached_tokens += other.child_first_cached_tokens
        self.schedule_lag_ms.merge(other.schedule_lag_ms)
        self.inter_chunk_ms.merge(other.inter_chunk_ms)
        for mine, theirs in zip(self._by_depth, other._by_depth, strict=True):
            mine.merge(theirs)
        for mode, stats in self._by_mode.items():
            stats.merge(other._by_mode[mode])
        grow = len(other._client_completed) - len(self._client_completed)
        if grow > 0:
            self._client_completed.extend([0] * grow)
            self._client_errors.extend([0] * grow)
        for worker, n in enumerate(other._client_completed):
            self._client_completed[worker] += n
        for worker, n in enumerate(other._client_errors):
            self._client_errors[worker] += n
        for worker_id, their_tally in other._inference.items():
            tally = self._inference.get(worker_id)
            if tally is None:
                tally = self._inference[worker_id] = _InferenceWorkerTally()
            tally.requests += their_tally.requests
            tally.errors += their_tally.errors
            tally.prompt_tokens += their_tally.prompt_tokens
            tally.cached_tokens += their_tally.cached_tokens
            tally.cache_reported_prompt_tokens += their_tally.cache_reported_prompt_tokens

    # -- reading ---------------------------------------------------------------------------

    @property
    def slo_ms(self) -> dict[str, float]:
        return dict(self._slo_ms)

    @property
    def overall(self) -> RequestStats:
        if self._overall_stale:
            overall = RequestStats()
            for stats in self._by_depth:
                overall.merge(stats)
            self._overall = overall
            self._overall_stale = False
        return self._overall

    @property
    def by_depth(self) -> dict[str, RequestStats]:
        return dict(zip(DEPTH_LABELS, self._by_depth, strict=True))

    @property
    def by_branch_mode(self) -> dict[str, RequestStats]:
        return dict(self._by_mode)

    @property
    def prefix_cache_hit_ratio(self) -> float | None:
        return self.overall.prefix_cache_hit_ratio

    @property
    def child_first_turn_hit_ratio(self) -> float | None:
        """Σ cached / Σ prompt tokens over the first requests of FORK and SPAWN children."""
        return _ratio(self.child_first_cached_tokens, self.child_first_prompt_tokens)

    def throughput(self, elapsed_s: float) -> Throughput:
        return self.overall.throughput(elapsed_s)

    def summary_percentiles(self) -> dict[str, PercentileSummary]:
        return {
            "ttft_ms": self.overall.ttft_ms.summary(),
            "itl_ms": self.overall.itl_ms.summary(),
            "latency_ms": self.overall.latency_ms.summary(),
        }

    def client_workers(self) -> ClientWorkersDict:
        return {"completed": list(self._client_completed), "errors": list(self._client_errors)}

    def inference_workers(self) -> InferenceWorkersDict:
        ids = sorted(self._inference)
        tallies = [self._inference[worker_id] for worker_id in ids]
        return {
            "ids": ids,
            "requests": [t.requests for t in tallies],
            "errors": [t.errors for t in tallies],
            "prompt_tokens": [t.prompt_tokens for t in tallies],
            "cached_tokens": [t.cached_tokens for t in tallies],
            "cache_reported_prompt_tokens": [t.cache_reported_prompt_tokens for t in tallies],
        }

    def summary(self, *, elapsed_s: float | None = None) -> RunSummary:
        """Everything, ready for JSON: overall figures at top level plus the splits."""
        workers = self.inference_workers()
        return {
            **self.overall.summary(elapsed_s=elapsed_s),
            "warmup_requests": self.warmup_requests,
            "slo_ms": self.slo_ms,
            "inter_chunk_ms": self.inter_chunk_ms.summary(),
            "inter_chunk_samples": self.inter_chunk_ms.count,
            "by_depth": {
                label: stats.summary(elapsed_s=elapsed_s)
                for label, stats in zip(DEPTH_LABELS, self._by_depth, strict=True)
            },
            "by_branch_mode": {
                mode: stats.summary(elapsed_s=elapsed_s) for mode, stats in self._by_mode.items()
            },
            "client_workers": self.client_workers(),
            "inference_workers": {
                **workers,
                "prefix_cache_hit_ratio": [
                    _ratio(cached, reported)
                    for cached, reported in zip(
                        workers["cached_tokens"],
                        workers["cache_reported_prompt_tokens"],
                        strict=True,
                    )
                ],
            },
        }

    # -- restoring (encoding.py reads a wire form back through this) --------------------

    def restore(
        self,
        *,
        warmup_requests: int,
        by_depth: Mapping[str, RequestStats],
        by_branch_mode: Mapping[str, RequestStats],
        client_workers: ClientWorkersDict,
        inference_workers: InferenceWorkersDict,
        child_first_tokens: tuple[int, int],
        schedule_lag_ms: LatencyHistogram,
        inter_chunk_ms: LatencyHistogram | None = None,
    ) -> None:
        """Replace this object's state with already validated parts."""
        self.warmup_requests = warmup_requests
        self.child_first_prompt_tokens, self.child_first_cached_tokens = child_first_tokens
        self.schedule_lag_ms = schedule_lag_ms
        self.inter_chunk_ms = inter_chunk_ms or LatencyHistogram()
        for index, label in enumerate(DEPTH_LABELS):
            self._by_depth[index] = by_depth.get(label) or RequestStats()
        self._overall_stale = True
        for mode in BRANCH_MODE_NAMES:
            self._by_mode[mode] = by_branch_mode.get(mode) or RequestStats()
        self._client_completed = list(client_workers["completed"])
        self._client_errors = list(client_workers["errors"])
        self._inference = {}
        for position, worker_id in enumerate(inference_workers["ids"]):
            tally = self._inference[worker_id] = _InferenceWorkerTally()
            tally.requests = inference_workers["requests"][position]
            tally.errors = inference_workers["errors"][position]
            tally.prompt_tokens = inference_workers["prompt_tokens"][position]
            tally.cached_tokens = inference_workers["cached_tokens"][position]
            tally.cache_reported_prompt_tokens = inference_workers["cache_reported_prompt_tokens"][
                position
            ]
