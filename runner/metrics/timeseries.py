"""Per-interval latency percentiles for live charts, bounded in memory.

Owns binning request records by the interval they completed in and turning each closed
interval into one chart point. It must not read a clock (the caller passes `now_s`, so wall
and virtual time behave alike) and keeps only the open intervals' histograms plus the last
`max_points` points. It lives where all records arrive; points are not mergeable across
processes (merge RunMetrics snapshots for that).
"""

from __future__ import annotations

import math
from collections import deque
from typing import TypedDict

from runner.metrics.histogram import LatencyHistogram
from runner.metrics.records import CUT_BY_STOP, RequestRecord

__all__ = ["IntervalPercentiles", "LatencyTimeSeries", "SeriesPoint"]

_POINT_PERCENTILES = (50.0, 90.0, 99.0)


class IntervalPercentiles(TypedDict):
    p50: float | None
    p90: float | None
    p99: float | None


class SeriesPoint(TypedDict):
    """One interval: requests that *ended* in [t_s, t_s + interval_s)."""

    t_s: float
    requests: int  # successful requests; failures count in `errors` only, like RunMetrics
    errors: int  # not those cut by the stop
    output_tokens: int
    ttft_ms: IntervalPercentiles
    itl_ms: IntervalPercentiles
    latency_ms: IntervalPercentiles


class _Interval:
    __slots__ = ("errors", "itl_ms", "latency_ms", "output_tokens", "requests", "ttft_ms")

    def __init__(self) -> None:
        self.requests = 0
        self.errors = 0
        self.output_tokens = 0
        self.ttft_ms = LatencyHistogram()
        self.itl_ms = LatencyHistogram()
        self.latency_ms = LatencyHistogram()


def _interval_percentiles(hist: LatencyHistogram | None) -> IntervalPercentiles:
    if hist is None:
        return {"p50": None, "p90": None, "p99": None}
    p50, p90, p99 = hist.percentiles(_POINT_PERCENTILES)
    return {"p50": p50, "p90": p90, "p99": p99}


class LatencyTimeSeries:
    """One point per `interval_s` of run time, closed `lateness_s` after the interval ends.

    The grace period lets records that complete just before a tick, but reach us just after
    it, still land in their interval; anything later than that is counted in `late_records`
    and left out of the series (it is still in RunMetrics). Intervals without requests yield
    empty points so charts show the gap instead of joining across it.
    """

    def __init__(
        self, *, interval_s: float = 1.0, max_points: int = 3600, lateness_s: float | None = None
    ) -> None:
        if not 0.0 < interval_s < math.inf:
            raise ValueError(f"interval_s must be a positive number, got {interval_s!r}")
        if max_points < 1:
            raise ValueError(f"max_points must be >= 1, got {max_points!r}")
        self.interval_s = interval_s
        self.max_points = max_points
        self.lateness_s = interval_s if lateness_s is None else lateness_s
        if not 0.0 <= self.lateness_s < math.inf:
            raise ValueError(f"lateness_s must be >= 0, got {lateness_s!r}")
        self.late_records = 0
        self._open: dict[int, _Interval] = {}
        self._next_index = 0  # the first interval not yet closed; run start is t_s = 0
        self._points: deque[SeriesPoint] = deque(maxlen=max_points)

    def record(self, record: RequestRecord) -> None:
        if record.warmup:
            return
        index = math.floor(record.end_s / self.interval_s)
        if index < self._next_index:
            self.late_records += 1
            return
        interval = self._open.get(index)
        if interval is None:
            interval = self._open[index] = _Interval()
        if record.error is not None:
            # A request cut by the run's stop is no error (RunMetrics counts it apart).
            if record.error != CUT_BY_STOP:
                interval.errors += 1
            return
        interval.requests += 1
        interval.output_tokens += record.output_tokens
        ttft_ms = record.ttft_ms
        if ttft_ms is not None:
            interval.ttft_ms.record(ttft_ms)
        if record.itl_ms is not None:
            interval.itl_ms.record(record.itl_ms)
        interval.latency_ms.record(record.latency_ms)

    def advance(self, now_s: float) -> list[SeriesPoint]:
        """Close every interval that ended at least `lateness_s` before now_s; the new points."""
        return self._close_before(math.floor((now_s - self.lateness_s) / self.interval_s))

    def flush(self) -> list[SeriesPoint]:
        """Close every interval that has records (at run end, when no more can arrive)."""
        if not self._open:
            return []
        return self._close_before(max(self._open) + 1)

    @property
    def points(self) -> list[SeriesPoint]:
        """The last `max_points` closed points, oldest first."""
        return list(self._points)

    def _close_before(self, stop_index: int) -> list[SeriesPoint]:
        # A jump longer than we keep (a stalled caller, a virtual clock leaping ahead) would
        # only produce points the deque drops at once: skip them and their records.
        first_kept = stop_index - self.max_points
        if self._next_index < first_kept:
            for index in [i for i in self._open if i < first_kept]:
                del self._open[index]
            self._next_index = first_kept
        closed: list[SeriesPoint] = []
        while self._next_index < stop_index:
            index = self._next_index
            interval = self._open.pop(index, None)
            point: SeriesPoint = {
                "t_s": index * self.interval_s,
                "requests": interval.requests if interval else 0,
                "errors": interval.errors if interval else 0,
                "output_tokens": interval.output_tokens if interval else 0,
                "ttft_ms": _interval_percentiles(interval.ttft_ms if interval else None),
                "itl_ms": _interval_percentiles(interval.itl_ms if interval else None),
                "latency_ms": _interval_percentiles(interval.latency_ms if interval else None),
            }
            closed.append(point)
            self._points.append(point)
            self._next_index += 1
        return closed
