"""A deterministic model of point results: summaries shaped like a run's, read by the real
`point_result`, so planner and report tests need no cluster."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runner.sweep import Planner, Point, PointResult, PointTally, SweepSpec, point_result


def summary(
    *,
    requests: int = 1000,
    good_share: float = 1.0,
    errors: int = 0,
    cut: int = 0,
    status: str = "succeeded",
    stopped_reason: str | None = None,
    requests_per_s: float = 10.0,
    output_tokens_per_s: float = 1000.0,
    itl_ms: float = 20.0,
    goodput_per_s: float | None = None,
    tree_rate: float | None = None,
    placement: dict[str, int] | None = None,
    orphans: int = 0,
) -> dict[str, Any]:
    finished = requests - cut
    good = round(good_share * finished)
    percentiles = {"p50": itl_ms / 2, "p90": itl_ms, "p95": itl_ms * 1.1, "p99": itl_ms * 1.5}
    return {
        "requests": requests,
        "errors": errors,
        "cut_by_stop": cut,
        "status": status,
        "stopped_reason": stopped_reason,
        "requests_per_s": requests_per_s,
        "output_tokens_per_s": output_tokens_per_s,
        "achieved_tree_rate_per_s": tree_rate,
        "prefix_cache_hit_ratio": 0.5,
        "child_first_turn_hit_ratio": 0.25,
        "worker_switches": 0,
        "orphaned_session_copies": orphans,
        "placement": placement,
        "drain": {"cached_bytes_by_worker": [100, 200]},
        "goodput": {
            "good_requests": good,
            "goodput_per_s": good / 100 if goodput_per_s is None else goodput_per_s,
        },
        "ttft_ms": {k: v * 10 for k, v in percentiles.items()},
        "itl_ms": percentiles,
        "latency_ms": {k: v * 100 for k, v in percentiles.items()},
    }


def tally(completed: int = 1000, ttft_measured: int | None = None) -> PointTally:
    counted = PointTally()
    counted.completed = completed
    counted.ttft_measured = completed if ttft_measured is None else ttft_measured
    return counted


def result(sweep: SweepSpec, point: Point, **kwargs: Any) -> PointResult:
    made = summary(**kwargs)
    finished = made["requests"] - made["cut_by_stop"]
    return point_result(sweep, point, made, tally(finished - made["errors"]), wall_s=1.0)


Model = Callable[[Point], dict[str, Any]]


def drive(sweep: SweepSpec, model: Model) -> Planner:
    """Run a sweep on the model, one pending point at a time, as a live sweep would."""
    planner = Planner(sweep)
    while pending := planner.pending():
        point = pending[0]
        planner.record(result(sweep, point, **model(point)))
    return planner
