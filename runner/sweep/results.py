"""What one sweep point measured: its figures, read from a finished run's summary, and whether
it counts.

`point_result` turns a run's summary (runner.run's RunResult) plus the point's `PointTally` (a
sink that counts what the summary does not: completed requests with a measured TTFT, the peak
of session-copy memory) into a `PointResult`, flat figures that aggregate, chart and export
alike. It must not run anything or read a clock: the caller passes the wall time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal, cast

from pydantic import BaseModel, ConfigDict

from runner.ending import RunStatus
from runner.output import RecordDict, Sink, Snapshot
from runner.sweep.spec import PERCENTILES, Point, SweepSpec, Validity
from runner.sweep.stats import wilson_interval
from runner.validity import problems

__all__ = [
    "FIGURES",
    "PointResult",
    "PointTally",
    "Verdict",
    "point_result",
    "pooled_verdict",
]

# Every figure a point reports, in the order tables and CSV columns show them. Latencies come
# at each summary percentile; the sweep's `percentile` picks the one a table shows.
FIGURES: Final[tuple[str, ...]] = (
    "requests_per_s",
    "output_tokens_per_s",
    "output_tokens_per_s_per_gpu",
    # Interactivity: 1000 / ITL at the sweep's percentile, the decode rate that share of
    # requests reached or beat (InferenceX's tok/s per user; runner.metrics.records names
    # 1000/itl_ms the decode rate).
    "tokens_per_s_per_user",
    *(f"{name}_{p}_ms" for name in ("ttft", "itl", "latency") for p in PERCENTILES),
    "goodput_per_s",
    "good_ratio",
    "prefix_cache_hit_ratio",
    "child_first_turn_hit_ratio",
    "worker_switches",
    "orphaned_session_copies",
    "session_copy_bytes",
    "peak_session_copy_bytes",
    "trees_split",
    "child_requests_on_root_worker_ratio",
    "achieved_tree_rate_per_s",
    "error_share",
    "cut_share",
    "coverage",
)


class PointResult(BaseModel):
    """One finished run of a sweep. `finished` = requests that ran their course (not cut by
    the stop): the base of the error share and of the good share."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    point: Point
    status: RunStatus
    stopped_reason: str | None
    requests: int
    finished: int
    completed: int
    good_requests: int
    figures: dict[str, float | None]
    valid: bool
    invalid_reason: str | None
    wall_s: float


class PointTally:
    """A sink that counts, for one point, what the summary leaves out, and passes everything
    on to `inner` (the run's own sink, when the caller has one)."""

    def __init__(self, inner: Sink | None = None) -> None:
        self.inner = inner
        self.completed = 0
        self.ttft_measured = 0
        self.peak_copy_bytes: int | None = None

    def records(self, batch: list[RecordDict]) -> None:
        for record in batch:
            if record["warmup"] or record["error"] is not None:
                continue
            self.completed += 1
            if record["ttft_ms"] is not None:
                self.ttft_measured += 1
        if self.inner is not None:
            self.inner.records(batch)

    def snapshot(self, snapshot: Snapshot) -> None:
        held = sum(snapshot["client_workers"]["cached_bytes"])
        if self.peak_copy_bytes is None or held > self.peak_copy_bytes:
            self.peak_copy_bytes = held
        if self.inner is not None:
            self.inner.snapshot(snapshot)

    def log(self, level: Literal["info", "warning", "error"], message: str) -> None:
        if self.inner is not None:
            self.inner.log(level, message)

    @property
    def coverage(self) -> float | None:
        return self.ttft_measured / self.completed if self.completed else None


def point_result(
    sweep: SweepSpec,
    point: Point,
    summary: Mapping[str, Any],
    tally: PointTally,
    *,
    wall_s: float,
) -> PointResult:
    """The figures and validity of `point` from its run's summary and tally."""
    requests = int(summary["requests"])
    cut = int(summary.get("cut_by_stop") or 0)
    errors = int(summary["errors"])
    finished = requests - cut
    completed = finished - errors
    goodput = summary.get("goodput") or {}
    good = int(goodput.get("good_requests") or 0)
    placement = summary.get("placement")
    drain = summary.get("drain") or {}
    output_per_s = _number(summary.get("output_tokens_per_s"))
    itl = _number((summary.get("itl_ms") or {}).get(sweep.percentile))
    figures: dict[str, float | None] = {
        "requests_per_s": _number(summary.get("requests_per_s")),
        "output_tokens_per_s": output_per_s,
        "output_tokens_per_s_per_gpu": (
            output_per_s / sweep.gpus if output_per_s is not None and sweep.gpus else None
        ),
        "tokens_per_s_per_user": 1000.0 / itl if itl else None,
        "goodput_per_s": _number(goodput.get("goodput_per_s")),
        "good_ratio": _ratio(good, finished),
        "prefix_cache_hit_ratio": _number(summary.get("prefix_cache_hit_ratio")),
        "child_first_turn_hit_ratio": _number(summary.get("child_first_turn_hit_ratio")),
        "worker_switches": _number(summary.get("worker_switches")),
        "orphaned_session_copies": _number(summary.get("orphaned_session_copies")),
        "session_copy_bytes": _number(sum(drain.get("cached_bytes_by_worker") or [])),
        "peak_session_copy_bytes": _number(tally.peak_copy_bytes),
        "trees_split": _number(placement["trees_split"]) if placement else None,
        "child_requests_on_root_worker_ratio": (
            _ratio(placement["child_requests_on_root_worker"], placement["child_requests"])
            if placement
            else None
        ),
        "achieved_tree_rate_per_s": _number(summary.get("achieved_tree_rate_per_s")),
        "error_share": _ratio(errors, finished),
        "cut_share": _ratio(cut, requests),
        "coverage": tally.coverage,
    }
    for name in ("ttft", "itl", "latency"):
        percentiles = summary.get(f"{name}_ms") or {}
        for p in PERCENTILES:
            figures[f"{name}_{p}_ms"] = _number(percentiles.get(p))
    status = cast(RunStatus, summary["status"])
    reason = _invalid_reason(
        sweep.validity,
        status=status,
        stopped_reason=summary.get("stopped_reason"),
        finished=finished,
        figures=figures,
    )
    return PointResult(
        point=point,
        status=status,
        stopped_reason=summary.get("stopped_reason"),
        requests=requests,
        finished=finished,
        completed=completed,
        good_requests=good,
        figures={name: figures.get(name) for name in FIGURES},
        valid=reason is None,
        invalid_reason=reason,
        wall_s=round(wall_s, 3),
    )


def _invalid_reason(
    validity: Validity,
    *,
    status: str,
    stopped_reason: str | None,
    finished: int,
    figures: Mapping[str, float | None],
) -> str | None:
    """Why a point does not count, or None when it does."""
    if status == "cancelled":
        return "cancelled before its end"
    if status == "failed":
        return f"the run stopped early: {stopped_reason}"
    if finished == 0:
        return "no request ran its course"
    found = problems(
        validity,
        error_share=figures["error_share"],
        cut_share=figures["cut_share"],
        coverage=figures["coverage"],
    )
    return "; ".join(found) or None


class Verdict(BaseModel):
    """Whether a point's valid repeats, pooled, meet the SLOs: good requests over the requests
    that ran their course, with the Wilson interval of that share."""

    model_config = ConfigDict(frozen=True)

    meets: bool
    good: int
    finished: int
    share: float | None
    low: float
    high: float
    resolved: bool  # the interval lies wholly on one side of the target
    valid_repeats: int
    repeats: int
    reason: str | None  # why no repeat counted


def pooled_verdict(results: list[PointResult], *, target: float, confidence: float) -> Verdict:
    """The SLO verdict of one arm at one load over its repeats. A load none of whose repeats
    is valid does not meet the SLOs (a search cannot stand on it), and says why."""
    valid = [r for r in results if r.valid]
    good = sum(r.good_requests for r in valid)
    finished = sum(r.finished for r in valid)
    low, high = wilson_interval(good, finished, confidence=confidence)
    share = good / finished if finished else None
    meets = share is not None and share >= target
    return Verdict(
        meets=meets,
        good=good,
        finished=finished,
        share=share,
        low=low,
        high=high,
        resolved=low >= target or high < target,
        valid_repeats=len(valid),
        repeats=len(results),
        reason=None if valid else "; ".join(sorted({str(r.invalid_reason) for r in results})),
    )


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def _number(value: Any) -> float | None:
    return None if value is None else float(value)
