"""LatencyHistogram: bounded-error percentiles, exact moments, exact merges and snapshots."""

from __future__ import annotations

import json
import math
import random
import statistics
from collections.abc import Callable

import pytest

from runner.metrics import HISTOGRAM_SCHEME, LatencyHistogram
from runner.metrics.histogram import ZERO_FLOOR_MS

# The documented bound: (γ - 1)/(γ + 1) with γ = 2^(1/64) is 0.5415 %; allow float fuzz.
BUCKET_ERROR_BOUND = 0.00542
QS = (0.0, 0.1, 1.0, 5.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.9, 100.0)


def exact_percentile(ordered: list[float], q: float) -> float:
    """numpy's default ("linear") percentile of a sorted list."""
    h = (len(ordered) - 1) * q / 100.0
    below = math.floor(h)
    above = math.ceil(h)
    return ordered[below] + (h - below) * (ordered[above] - ordered[below])


def log_uniform_ms(rng: random.Random, n: int) -> list[float]:
    """Values spread evenly in log space from 1 µs to 1 hour."""
    return [math.exp(rng.uniform(math.log(1e-3), math.log(3.6e6))) for _ in range(n)]


def histogram_of(values_ms: list[float]) -> LatencyHistogram:
    hist = LatencyHistogram()
    hist.record_many(values_ms)
    return hist


@pytest.mark.parametrize(
    "draw",
    [
        lambda rng: rng.lognormvariate(3.0, 1.5),  # latency-like, long tail
        lambda rng: rng.uniform(5.0, 6.0),  # narrow: many values per bucket
        lambda rng: rng.expovariate(1 / 40.0) + 0.01,
    ],
    ids=["lognormal", "narrow", "exponential"],
)
def test_percentiles_are_within_one_percent_of_exact(
    draw: Callable[[random.Random], float],
) -> None:
    rng = random.Random(20240501)
    values_ms = [draw(rng) for _ in range(20_000)]
    hist = histogram_of(values_ms)
    ordered = sorted(values_ms)
    for q, estimate in zip(QS, hist.percentiles(QS), strict=True):
        exact = exact_percentile(ordered, q)
        assert estimate is not None
        assert abs(estimate - exact) / exact <= BUCKET_ERROR_BOUND, (q, estimate, exact)
        assert abs(estimate - exact) / exact <= 0.01


def test_percentiles_hold_the_bound_from_a_microsecond_to_an_hour() -> None:
    rng = random.Random(7)
    values_ms = log_uniform_ms(rng, 50_000)
    hist = histogram_of(values_ms)
    ordered = sorted(values_ms)
    fine_qs = [q / 10.0 for q in range(1001)]
    for q, estimate in zip(fine_qs, hist.percentiles(fine_qs), strict=True):
        exact = exact_percentile(ordered, q)
        assert estimate is not None
        assert abs(estimate - exact) / exact <= BUCKET_ERROR_BOUND, (q, estimate, exact)


def test_every_single_value_in_range_is_estimated_within_the_bound() -> None:
    # Between an exact minimum and maximum, the median of three is the bucket's estimate alone.
    rng = random.Random(11)
    for value_ms in [*log_uniform_ms(rng, 2_000), 1e-3, 3.6e6, 1.0, 2.0, 1024.0]:
        hist = histogram_of([0.0, value_ms, 1e12])
        estimate = hist.percentile(50.0)
        assert estimate is not None
        assert abs(estimate - value_ms) / value_ms <= BUCKET_ERROR_BOUND, value_ms


def test_p0_and_p100_are_the_exact_min_and_max() -> None:
    rng = random.Random(3)
    values_ms = [rng.lognormvariate(2.0, 1.0) for _ in range(1_000)]
    hist = histogram_of(values_ms)
    assert hist.percentile(0.0) == min(values_ms) == hist.min_ms
    assert hist.percentile(100.0) == max(values_ms) == hist.max_ms


def test_percentiles_of_a_constant_stream_are_exact() -> None:
    hist = histogram_of([12.345] * 100)
    assert hist.percentiles([1.0, 50.0, 99.0]) == [12.345, 12.345, 12.345]
    assert hist.mean_ms == 12.345
    assert hist.std_ms == 0.0


def test_count_sum_mean_and_std_are_exact() -> None:
    rng = random.Random(5)
    values_ms = [round(rng.lognormvariate(3.0, 1.0), 6) for _ in range(10_000)]  # whole ns
    hist = histogram_of(values_ms)
    assert hist.count == len(values_ms)
    assert hist.sum_ms == pytest.approx(math.fsum(values_ms), rel=1e-15)
    assert hist.mean_ms == pytest.approx(statistics.fmean(values_ms), rel=1e-15)
    assert hist.std_ms == pytest.approx(statistics.pstdev(values_ms), rel=1e-12)


def test_std_keeps_its_precision_when_the_spread_is_tiny_next_to_the_mean() -> None:
    # Float sums of squares lose every digit here; the integer-nanosecond moments do not.
    values_ms = [1e6 + 0.001 * (i % 2) for i in range(100_000)]
    hist = histogram_of(values_ms)
    assert hist.std_ms == pytest.approx(0.0005, rel=1e-6)


def test_merged_histograms_equal_a_single_histogram_of_both_streams() -> None:
    rng = random.Random(42)
    first = log_uniform_ms(rng, 5_000)
    second = [rng.lognormvariate(3.0, 1.5) for _ in range(7_000)] + [0.0, 1e-4]
    merged = histogram_of(first)
    merged.merge(histogram_of(second))
    single = histogram_of(first + second)
    assert merged.to_dict() == single.to_dict()
    assert merged.percentiles(QS) == single.percentiles(QS)
    assert merged.mean_ms == single.mean_ms
    assert merged.std_ms == single.std_ms


def test_merging_many_parts_in_any_order_gives_the_same_histogram() -> None:
    rng = random.Random(9)
    values_ms = log_uniform_ms(rng, 7_000)
    parts = [histogram_of(values_ms[i::7]) for i in range(7)]
    forward = LatencyHistogram()
    for part in parts:
        forward.merge(part)
    backward = LatencyHistogram()
    for part in reversed(parts):
        backward.merge(part)
    assert forward.to_dict() == backward.to_dict() == histogram_of(values_ms).to_dict()


def test_merging_an_empty_histogram_changes_nothing() -> None:
    hist = histogram_of([1.0, 2.0, 3.0])
    before = hist.to_dict()
    hist.merge(LatencyHistogram())
    assert hist.to_dict() == before
    empty = LatencyHistogram()
    empty.merge(hist)
    assert empty.to_dict() == before


def test_snapshot_round_trips_exactly() -> None:
    rng = random.Random(1)
    values_ms = [*log_uniform_ms(rng, 3_000), 0.0, 0.0005, 5e8]
    hist = histogram_of(values_ms)
    wire = json.dumps(hist.to_dict())
    restored = LatencyHistogram.from_dict(json.loads(wire))
    assert restored.to_dict() == hist.to_dict()
    assert restored.percentiles(QS) == hist.percentiles(QS)
    assert (restored.mean_ms, restored.std_ms) == (hist.mean_ms, hist.std_ms)
    restored.record(7.0)  # a restored histogram keeps working
    hist.record(7.0)
    assert restored.to_dict() == hist.to_dict()


def test_snapshot_lists_only_non_empty_buckets() -> None:
    hist = histogram_of([1.0, 1.0, 1000.0])
    data = hist.to_dict()
    assert data["scheme"] == HISTOGRAM_SCHEME
    assert len(data["buckets"]) == 4  # two buckets: [key, count, gap, count]
    assert data["buckets"][1] == 2 and data["buckets"][3] == 1
    assert data["count"] == 3


def test_values_at_or_below_the_floor_go_to_the_zero_bucket() -> None:
    hist = histogram_of([0.0, ZERO_FLOOR_MS, ZERO_FLOOR_MS / 3, 10.0])
    data = hist.to_dict()
    assert data["zero_count"] == 3
    assert data["buckets"][1::2] == [1]
    assert hist.percentile(0.0) == 0.0
    assert hist.percentile(50.0) == 0.0  # the zero bucket answers with its exact minimum


def test_values_longer_than_an_hour_are_kept_with_the_same_bound() -> None:
    day_ms = 86_400_000.0
    hist = histogram_of([1.0, day_ms, 1e15])
    estimate = hist.percentile(50.0)
    assert estimate is not None
    assert abs(estimate - day_ms) / day_ms <= BUCKET_ERROR_BOUND
    assert LatencyHistogram.from_dict(hist.to_dict()).to_dict() == hist.to_dict()


@pytest.mark.parametrize("bad", [-1.0, -1e-9, math.nan, math.inf, -math.inf])
def test_negative_nan_and_infinite_values_are_rejected(bad: float) -> None:
    hist = LatencyHistogram()
    with pytest.raises(ValueError):
        hist.record(bad)
    assert hist.count == 0
    assert hist.to_dict() == LatencyHistogram().to_dict()


def test_an_empty_histogram_answers_none() -> None:
    hist = LatencyHistogram()
    assert hist.percentile(50.0) is None
    assert hist.summary() == dict.fromkeys(
        ("p50", "p90", "p95", "p99", "min", "max", "mean", "std")
    )
    assert LatencyHistogram.from_dict(hist.to_dict()).to_dict() == hist.to_dict()


@pytest.mark.parametrize("q", [-0.1, 100.1, math.nan])
def test_percentile_rejects_q_outside_0_to_100(q: float) -> None:
    with pytest.raises(ValueError):
        histogram_of([1.0]).percentile(q)


def test_from_dict_rejects_another_scheme_or_an_inconsistent_count() -> None:
    data = histogram_of([1.0, 2.0]).to_dict()
    with pytest.raises(ValueError, match="scheme"):
        LatencyHistogram.from_dict({**data, "scheme": "hdr"})
    with pytest.raises(ValueError, match="count"):
        LatencyHistogram.from_dict({**data, "count": 3})
    with pytest.raises(ValueError):
        LatencyHistogram.from_dict({**data, "buckets": data["buckets"][:-1]})


def test_summary_has_the_documented_keys() -> None:
    summary = histogram_of([1.0, 2.0, 3.0, 4.0]).summary()
    assert list(summary) == ["p50", "p90", "p95", "p99", "min", "max", "mean", "std"]
    assert summary["min"] == 1.0 and summary["max"] == 4.0 and summary["mean"] == 2.5
    assert all(isinstance(value, float) for value in summary.values())
