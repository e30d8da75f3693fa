"""A point's figures from its run's summary, and the validity rules with their reasons."""

from __future__ import annotations

import pytest

from runner.sweep import PointTally, parse_sweep, point_result
from runner.sweep.spec import Point
from tests.runner.sweep.model import result, summary, tally

SWEEP = parse_sweep(
    {
        "base": {"duration_s": 60, "target": {"kind": "simulated"}},
        "concurrency": [1, 8],
        "gpus": 4,
        "percentile": "p90",
    }
)
POINT = Point(arm="base", load=8)


def test_figures_come_from_the_summary_and_interactivity_is_1000_over_the_itl_percentile():
    got = result(
        SWEEP,
        POINT,
        itl_ms=25.0,
        output_tokens_per_s=2000.0,
        placement={
            "trees": 10,
            "trees_split": 3,
            "child_requests": 40,
            "child_requests_on_root_worker": 30,
            "keyed_requests": 0,
            "key_misses": 0,
        },
    )
    figures = got.figures
    assert figures["tokens_per_s_per_user"] == pytest.approx(40.0)  # 1000 / 25 ms
    assert figures["output_tokens_per_s_per_gpu"] == pytest.approx(500.0)
    assert figures["trees_split"] == 3
    assert figures["child_requests_on_root_worker_ratio"] == pytest.approx(0.75)
    assert figures["session_copy_bytes"] == 300
    assert figures["itl_p99_ms"] == pytest.approx(37.5)
    assert got.valid and got.invalid_reason is None


def test_a_server_that_names_no_worker_leaves_the_placement_figures_empty():
    figures = result(SWEEP, POINT, placement=None).figures
    assert figures["trees_split"] is None
    assert figures["child_requests_on_root_worker_ratio"] is None


def test_the_good_share_is_over_the_requests_that_ran_their_course():
    got = result(SWEEP, POINT, requests=1000, cut=100, good_share=0.9)
    assert got.finished == 900 and got.good_requests == 810
    assert got.figures["good_ratio"] == pytest.approx(0.9)


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"errors": 101}, "errors 10.1 % > 10 %"),
        ({"cut": 210}, "cut by the stop 21 % > 20 %"),
        ({"status": "failed", "stopped_reason": "50 consecutive failures"}, "stopped early: 50"),
        ({"status": "cancelled", "stopped_reason": "cancelled"}, "cancelled before its end"),
        ({"requests": 0}, "no request ran its course"),
    ],
)
def test_a_point_beyond_a_threshold_is_invalid_with_its_reason(kwargs, reason):
    got = result(SWEEP, POINT, **kwargs)
    assert not got.valid
    assert got.invalid_reason is not None and reason in got.invalid_reason


def test_a_point_at_the_thresholds_still_counts():
    assert result(SWEEP, POINT, requests=1000, errors=100).valid  # 10 % of 1000 exactly
    assert result(SWEEP, POINT, requests=1000, cut=200).valid


def test_coverage_below_98_percent_makes_a_point_invalid():
    made = summary()
    low = point_result(SWEEP, POINT, made, tally(1000, ttft_measured=970), wall_s=1.0)
    assert not low.valid
    assert low.invalid_reason == "TTFT measured on 97 % of completed requests < 98 %"
    enough = point_result(SWEEP, POINT, made, tally(1000, ttft_measured=980), wall_s=1.0)
    assert enough.valid and enough.figures["coverage"] == pytest.approx(0.98)


def test_thresholds_are_the_sweeps_own():
    strict = parse_sweep(
        {
            "base": {"duration_s": 60, "target": {"kind": "simulated"}},
            "concurrency": [1],
            "validity": {"max_error_share": 0.01},
        }
    )
    got = result(strict, Point(arm="base", load=1), errors=20)
    assert got.invalid_reason == "errors 2 % > 1 %"


def test_the_tally_counts_measured_ttfts_and_the_peak_of_session_copy_memory():
    counted = PointTally()
    record = {"warmup": False, "error": None, "ttft_ms": 12.0}
    counted.records(
        [
            record,
            {**record, "ttft_ms": None},
            {**record, "warmup": True},
            {**record, "error": "http_5xx"},
        ]  # type: ignore[list-item]
    )
    assert (counted.completed, counted.ttft_measured, counted.coverage) == (2, 1, 0.5)
    for held in ([10, 20], [50, 5], [1, 1]):
        counted.snapshot({"client_workers": {"cached_bytes": held}})  # type: ignore[typeddict-item]
    assert counted.peak_copy_bytes == 55
