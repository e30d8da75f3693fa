"""The Wilson interval against published values, and spreads over repeats."""

from __future__ import annotations

import pytest

from runner.sweep import overlap, spread_of, wilson_interval


@pytest.mark.parametrize(
    ("successes", "trials", "low", "high"),
    [
        # Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table I,
        # method 3 (Wilson score, no continuity correction), 95 %.
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_the_wilson_interval_matches_newcombes_published_values(successes, trials, low, high):
    got_low, got_high = wilson_interval(successes, trials)
    assert round(got_low, 4) == low and round(got_high, 4) == high


def test_the_wilson_interval_stays_inside_0_1_and_narrows_with_more_requests():
    assert wilson_interval(10, 10)[1] == 1.0 and wilson_interval(0, 10)[0] == 0.0
    narrow = wilson_interval(950, 1000)
    wide = wilson_interval(95, 100)
    assert narrow[1] - narrow[0] < wide[1] - wide[0]
    assert wilson_interval(95, 100, confidence=0.99)[0] < wide[0]


def test_no_trials_leave_the_whole_range():
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_a_spread_is_the_mean_range_and_sample_deviation_of_the_values_present():
    spread = spread_of([1.0, None, 3.0])
    assert spread is not None
    assert (spread.mean, spread.min, spread.max, spread.n) == (2.0, 1.0, 3.0, 2)
    assert spread.std == pytest.approx(1.4142, abs=1e-4)
    single = spread_of([5.0])
    assert single is not None and single.std == 0.0
    assert spread_of([None]) is None


def test_ranges_that_touch_overlap_and_apart_ones_do_not():
    a, b, c = spread_of([1.0, 2.0]), spread_of([2.0, 3.0]), spread_of([2.5, 4.0])
    assert a and b and c
    assert overlap(a, b) and overlap(b, c) and not overlap(a, c)
