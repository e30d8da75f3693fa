"""Metrics on the wire: RunMetrics and RequestStats as JSON-able dicts and back, exactly.

Owns the versioned shape another process (a remote client worker, a stored run) sends or
keeps, and its validation on the way back in: a snapshot is outside input. The overall group
is not stored: it is the exact merge of the depth groups.
"""

from __future__ import annotations

import math
from typing import Final, NotRequired, TypedDict

from runner.metrics.aggregate import (
    DEPTH_LABELS,
    ClientWorkersDict,
    InferenceWorkersDict,
    RequestStats,
    RunMetrics,
)
from runner.metrics.histogram import HistogramDict, LatencyHistogram
from runner.metrics.records import BRANCH_MODE_NAMES

__all__ = [
    "RequestStatsDict",
    "RunSnapshot",
    "metrics_from_dict",
    "metrics_to_dict",
    "stats_from_dict",
    "stats_to_dict",
]

_VERSION: Final = 2


class RequestStatsDict(TypedDict):
    requests: int
    completed: int
    good: int
    errors: dict[str, int]
    # Absent in snapshots written before it was counted apart (they held it as an error).
    cut_by_stop: NotRequired[int]
    prompt_tokens: int
    output_tokens: int
    cached_tokens: int
    cache_reported_prompt_tokens: int
    first_start_s: float | None
    last_end_s: float | None
    ttft_ms: HistogramDict
    itl_ms: HistogramDict
    latency_ms: HistogramDict


class RunSnapshot(TypedDict):
    """Cumulative, JSON-able state of a RunMetrics; groups without requests are left out."""

    version: int
    slo_ms: dict[str, float]
    warmup_requests: int
    by_depth: dict[str, RequestStatsDict]
    by_branch_mode: dict[str, RequestStatsDict]
    client_workers: ClientWorkersDict
    inference_workers: InferenceWorkersDict
    child_first_turn_tokens: list[int]  # [prompt tokens, cached tokens]
    schedule_lag_ms: HistogramDict
    # Absent in snapshots written before inter-chunk gaps were kept.
    inter_chunk_ms: NotRequired[HistogramDict]


def stats_to_dict(stats: RequestStats) -> RequestStatsDict:
    return {
        "requests": stats.requests,
        "completed": stats.completed,
        "good": stats.good,
        "errors": dict(sorted(stats.errors_by_category.items())),
        "cut_by_stop": stats.cut_by_stop,
        "prompt_tokens": stats.prompt_tokens,
        "output_tokens": stats.output_tokens,
        "cached_tokens": stats.cached_tokens,
        "cache_reported_prompt_tokens": stats.cache_reported_prompt_tokens,
        "first_start_s": stats.first_start_s if stats.requests else None,
        "last_end_s": stats.last_end_s if stats.requests else None,
        "ttft_ms": stats.ttft_ms.to_dict(),
        "itl_ms": stats.itl_ms.to_dict(),
        "latency_ms": stats.latency_ms.to_dict(),
    }


def stats_from_dict(data: RequestStatsDict) -> RequestStats:
    stats = RequestStats()
    stats.requests = data["requests"]
    stats.completed = data["completed"]
    stats.good = data["good"]
    stats.errors_by_category = dict(data["errors"])
    stats.cut_by_stop = int(data.get("cut_by_stop", 0))
    stats.prompt_tokens = data["prompt_tokens"]
    stats.output_tokens = data["output_tokens"]
    stats.cached_tokens = data["cached_tokens"]
    stats.cache_reported_prompt_tokens = data["cache_reported_prompt_tokens"]
    first_start_s, last_end_s = data["first_start_s"], data["last_end_s"]
    if stats.requests:
        if first_start_s is None or last_end_s is None:
            raise ValueError("a group with requests needs first_start_s and last_end_s")
        stats.first_start_s = float(first_start_s)
        stats.last_end_s = float(last_end_s)
    else:
        stats.first_start_s, stats.last_end_s = math.inf, -math.inf
    stats.ttft_ms = LatencyHistogram.from_dict(data["ttft_ms"])
    stats.itl_ms = LatencyHistogram.from_dict(data["itl_ms"])
    stats.latency_ms = LatencyHistogram.from_dict(data["latency_ms"])
    if stats.completed + stats.errors + stats.cut_by_stop != stats.requests:
        raise ValueError("group requests must equal completed plus errors plus cut_by_stop")
    return stats


def metrics_to_dict(metrics: RunMetrics) -> RunSnapshot:
    return {
        "version": _VERSION,
        "slo_ms": metrics.slo_ms,
        "warmup_requests": metrics.warmup_requests,
        "by_depth": {
            label: stats_to_dict(stats)
            for label, stats in metrics.by_depth.items()
            if stats.requests
        },
        "by_branch_mode": {
            mode: stats_to_dict(stats)
            for mode, stats in metrics.by_branch_mode.items()
            if stats.requests
        },
        "client_workers": metrics.client_workers(),
        "inference_workers": metrics.inference_workers(),
        "child_first_turn_tokens": [
            metrics.child_first_prompt_tokens,
            metrics.child_first_cached_tokens,
        ],
        "schedule_lag_ms": metrics.schedule_lag_ms.to_dict(),
        "inter_chunk_ms": metrics.inter_chunk_ms.to_dict(),
    }


def metrics_from_dict(data: RunSnapshot) -> RunMetrics:
    """Read a snapshot back; ValueError naming what is inconsistent."""
    if data.get("version") != _VERSION:
        raise ValueError(f"metrics snapshot version {data.get('version')!r} is not {_VERSION}")
    unknown = (set(data["by_depth"]) - set(DEPTH_LABELS)) | (
        set(data["by_branch_mode"]) - set(BRANCH_MODE_NAMES)
    )
    if unknown:
        raise ValueError(f"unknown metrics groups {sorted(unknown)}")
    by_depth = {label: stats_from_dict(group) for label, group in data["by_depth"].items()}
    by_mode = {mode: stats_from_dict(group) for mode, group in data["by_branch_mode"].items()}
    if sum(s.requests for s in by_mode.values()) != sum(s.requests for s in by_depth.values()):
        raise ValueError("metrics snapshot depth and branch-mode groups disagree")
    clients: ClientWorkersDict = data["client_workers"]
    if len(clients["completed"]) != len(clients["errors"]):
        raise ValueError("client_workers arrays must have equal lengths")
    workers: InferenceWorkersDict = data["inference_workers"]
    columns = (
        workers["requests"],
        workers["errors"],
        workers["prompt_tokens"],
        workers["cached_tokens"],
        workers["cache_reported_prompt_tokens"],
    )
    if any(len(column) != len(workers["ids"]) for column in columns):
        raise ValueError("inference_workers arrays must have equal lengths")
    prompt, cached = data["child_first_turn_tokens"]
    metrics = RunMetrics(slo_ms=data["slo_ms"])
    metrics.restore(
        warmup_requests=data["warmup_requests"],
        by_depth=by_depth,
        by_branch_mode=by_mode,
        client_workers=clients,
        inference_workers=workers,
        child_first_tokens=(prompt, cached),
        schedule_lag_ms=LatencyHistogram.from_dict(data["schedule_lag_ms"]),
        inter_chunk_ms=(
            LatencyHistogram.from_dict(data["inter_chunk_ms"]) if "inter_chunk_ms" in data else None
        ),
    )
    return metrics
