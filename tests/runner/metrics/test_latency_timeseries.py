"""LatencyTimeSeries: one bounded chart point per interval, closed after a grace period."""

from __future__ import annotations

from typing import Any

import pytest

from runner.metrics import LatencyTimeSeries, RequestRecord
from tests.runner.metrics.builders import request


def ending_at(end_s: float, latency_ms: float = 100.0, **fields: Any) -> RequestRecord:
    return request(start_s=end_s - latency_ms / 1000.0, latency_ms=latency_ms, **fields)


def test_each_interval_reports_percentiles_of_the_requests_that_ended_in_it() -> None:
    series = LatencyTimeSeries(interval_s=1.0, lateness_s=0.0)
    for latency_ms in (100.0, 200.0, 300.0):
        series.record(request(start_s=0.2, latency_ms=latency_ms, output_tokens=7))
    series.record(request(start_s=1.0, latency_ms=500.0))  # ends in [1, 2)
    first, second = series.advance(now_s=2.0)
    assert first["t_s"] == 0.0
    assert (first["requests"], first["errors"], first["output_tokens"]) == (3, 0, 21)
    assert first["latency_ms"]["p50"] == pytest.approx(200.0, rel=0.006)
    assert first["latency_ms"]["p99"] == pytest.approx(298.0, rel=0.006)
    assert second["t_s"] == 1.0
    assert second["latency_ms"]["p90"] == pytest.approx(500.0)
    assert series.points == [first, second]


def test_an_interval_closes_only_after_the_grace_period() -> None:
    series = LatencyTimeSeries(interval_s=1.0, lateness_s=0.5)
    series.record(ending_at(0.9))
    assert series.advance(now_s=1.4) == []
    series.record(ending_at(0.95))  # reported late, still within the grace period
    (point,) = series.advance(now_s=1.5)
    assert point["requests"] == 2


def test_records_after_their_interval_closed_are_counted_as_late() -> None:
    series = LatencyTimeSeries(interval_s=1.0, lateness_s=0.0)
    series.advance(now_s=3.0)
    series.record(ending_at(2.5))
    assert series.late_records == 1
    series.record(ending_at(3.2))
    (point,) = series.advance(now_s=4.0)
    assert point["requests"] == 1


def test_intervals_without_requests_yield_empty_points() -> None:
    series = LatencyTimeSeries(interval_s=1.0, lateness_s=0.0)
    series.record(ending_at(2.5))
    points = series.advance(now_s=3.0)
    assert [p["t_s"] for p in points] == [0.0, 1.0, 2.0]
    assert points[0]["requests"] == 0
    assert points[0]["ttft_ms"] == {"p50": None, "p90": None, "p99": None}
    assert points[2]["requests"] == 1


def test_failed_and_warmup_requests_stay_out_of_the_percentiles() -> None:
    series = LatencyTimeSeries(interval_s=1.0, lateness_s=0.0)
    series.record(ending_at(0.5, latency_ms=100.0))
    series.record(ending_at(0.5, latency_ms=9_000.0, error="timeout"))
    series.record(ending_at(0.5, latency_ms=8_000.0, warmup=True))
    (point,) = series.advance(now_s=1.0)
    assert (point["requests"], point["errors"]) == (1, 1)
    assert point["latency_ms"]["p99"] == pytest.approx(100.0)


def test_points_are_bounded_by_max_points() -> None:
    series = LatencyTimeSeries(interval_s=0.5, max_points=10, lateness_s=0.0)
    for tick in range(1, 101):
        series.record(ending_at(tick * 0.5 - 0.1))
        series.advance(now_s=tick * 0.5)
    points = series.points
    assert len(points) == 10
    assert [p["t_s"] for p in points] == [45.0 + 0.5 * i for i in range(10)]


def test_a_long_jump_keeps_only_the_points_that_fit() -> None:
    series = LatencyTimeSeries(interval_s=1.0, max_points=5, lateness_s=0.0)
    series.record(ending_at(0.5))  # falls out of the window the jump keeps
    series.record(ending_at(998.5))
    points = series.advance(now_s=1_000.0)
    assert [p["t_s"] for p in points] == [995.0, 996.0, 997.0, 998.0, 999.0]
    assert [p["requests"] for p in points] == [0, 0, 0, 1, 0]


def test_flush_closes_every_interval_that_has_records() -> None:
    series = LatencyTimeSeries(interval_s=1.0)
    series.record(ending_at(0.5))
    series.record(ending_at(2.5))
    points = series.flush()
    assert [p["requests"] for p in points] == [1, 0, 1]
    assert series.flush() == []


@pytest.mark.parametrize("options", [{"interval_s": 0.0}, {"max_points": 0}, {"lateness_s": -1.0}])
def test_bad_options_are_rejected(options: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        LatencyTimeSeries(**options)  # type: ignore[arg-type]
