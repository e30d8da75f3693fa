"""The planner: interleaved order, auto's points, slo's search, all from results alone."""

from __future__ import annotations

from typing import Any

import pytest

from runner.sweep import Planner, Point, SweepSpec, parse_sweep
from tests.runner.sweep.model import drive, result

BASE = {"duration_s": 60, "target": {"kind": "simulated"}}
TWO_ARMS = [
    {"name": "A", "overrides": {"policy": "legacy"}},
    {"name": "B", "overrides": {"policy": "spawn-pin"}},
]


def make(**fields: Any) -> SweepSpec:
    return parse_sweep({"base": BASE, **fields})


def order(planner: Planner) -> list[tuple[str, float, int]]:
    return [(r.point.arm, r.point.load, r.point.repeat) for r in planner.results]


def test_arms_and_repeats_interleave_load_by_load():
    sweep = make(concurrency=[1, 2], arms=TWO_ARMS, repeats=2)
    planner = drive(sweep, lambda point: {})
    assert order(planner) == [
        ("A", 1, 0), ("B", 1, 0), ("A", 1, 1), ("B", 1, 1),
        ("A", 2, 0), ("B", 2, 0), ("A", 2, 1), ("B", 2, 1),
    ]  # fmt: skip
    assert planner.done and planner.pending() == []


def test_the_planner_takes_only_due_points_and_rebuilds_from_stored_results():
    sweep = make(concurrency=[1, 2], arms=TWO_ARMS)
    planner = Planner(sweep)
    with pytest.raises(ValueError, match="not a pending point"):
        planner.record(result(sweep, Point(arm="A", load=3)))
    first = planner.pending()[0]
    planner.record(result(sweep, first))
    with pytest.raises(ValueError, match="not a pending point"):
        planner.record(result(sweep, first))  # once only
    again = Planner(sweep, planner.results)
    assert (
        again.pending()
        == planner.pending()
        == [
            Point(arm="B", load=1),
            Point(arm="A", load=2),
            Point(arm="B", load=2),
        ]
    )


def throughput_saturating_at(knee: float) -> Any:
    """req/s: one per lane up to `knee` lanes, flat after; tree rates alike."""

    def model(point: Point) -> dict[str, Any]:
        rate = min(point.load, knee)
        return {"requests_per_s": rate, "tree_rate": rate}

    return model


def test_auto_runs_synchronous_and_saturation_first_then_points_below_the_knee():
    sweep = make(concurrency=[64], mode="auto", auto_points=3, arms=TWO_ARMS)
    planner = Planner(sweep)
    assert [(p.arm, p.load, p.phase) for p in planner.pending()] == [
        ("A", 1, "synchronous"),
        ("B", 1, "synchronous"),
        ("A", 64, "saturation"),
        ("B", 64, "saturation"),
    ]
    planner = drive(sweep, throughput_saturating_at(8))
    between = sorted({r.point.load for r in planner.results if r.point.phase == "between"})
    # Throughputs 1 and 8 measured: 2.75, 4.5 and 6.25 req/s between, at one req/s per lane.
    assert between == [3, 4, 6]
    assert len(planner.results) == 2 * (2 + 3)


def test_auto_on_a_rate_axis_places_rates_between_the_measured_tree_rates():
    sweep = parse_sweep(
        {
            "base": {**BASE, "timing": "rate", "rate_per_s": 1},
            "rate_per_s": [10],
            "mode": "auto",
            "auto_points": 3,
        }
    )
    planner = drive(
        sweep,
        lambda p: {"tree_rate": 1.0 if p.phase == "synchronous" else 5.0},
    )
    between = sorted(r.point.load for r in planner.results if r.point.phase == "between")
    assert between == [2, 3, 4]
    synchronous = next(r.point for r in planner.results if r.point.phase == "synchronous")
    assert sweep.spec_for(synchronous).concurrency == 1


def capacity(limits: dict[str, float]) -> Any:
    """Good share falls with load past each arm's capacity: 99 % up to it, 80 % beyond."""

    def model(point: Point) -> dict[str, Any]:
        return {"good_share": 0.99 if point.load <= limits[point.arm] else 0.80}

    return model


def highest(planner: Planner, arm: str) -> float | None:
    """The highest load meeting the SLOs over everything the planner ran."""
    from runner.sweep import aggregate

    rows = aggregate(planner.sweep, planner.results)
    meeting = [r.load for r in rows if r.arm == arm and r.verdict and r.verdict.meets]
    return max(meeting, default=None)


@pytest.mark.parametrize("repeats", [1, 3])
def test_slo_finds_the_exhaustive_sweeps_highest_load_with_fewer_runs(repeats):
    loads = list(range(1, 33))
    limits = {"A": 13, "B": 24}
    common = {
        "concurrency": loads,
        "arms": TWO_ARMS,
        "repeats": repeats,
        "slo": {"ttft_ms": 500, "goodput_fraction": 0.95},
    }
    exhaustive = drive(make(**common), capacity(limits))
    search = drive(make(**common, mode="slo"), capacity(limits))
    searches = search.searches()
    for arm, limit in limits.items():
        found = searches[arm]
        assert found.done
        assert highest(exhaustive, arm) == limit
        index = loads.index(limit)
        assert found.highest_meeting is not None
        assert abs(loads.index(found.highest_meeting) - index) <= 1
        assert found.lowest_missing == loads[index + 1]
        assert found.runs < found.exhaustive_runs == len(loads) * repeats
        assert f"in {found.runs} runs, where every load of the axis would take" in found.statement
    # The arms' probes interleave: every batch holds both arms while both search.
    first = [(r.point.arm, r.point.load) for r in search.results[: 2 * repeats]]
    assert {arm for arm, _ in first} == {"A", "B"} and {load for _, load in first} == {1}


def test_slo_states_the_wilson_interval_of_the_answer_and_of_the_first_load_missing():
    sweep = make(
        concurrency=[1, 2, 4, 8],
        mode="slo",
        repeats=2,
        slo={"ttft_ms": 500, "goodput_fraction": 0.95},
    )
    planner = drive(sweep, lambda p: {"good_share": 0.99 if p.load <= 2 else 0.8})
    statement = planner.searches()["base"].statement
    assert statement.startswith("base: the highest load meeting the SLOs is c=2: c=2 meets:")
    assert "99.0 % of 2,000 requests good over 2 repeats (95 % Wilson interval 98.5 %–99.4 %)" in (
        statement
    )
    assert "c=4 misses: 80.0 % of 2,000 requests good" in statement
    assert "(target 95.0 %)" in statement


def test_slo_says_when_no_load_meets_and_when_every_load_does():
    slo = {"ttft_ms": 500, "goodput_fraction": 0.95}
    none = drive(make(concurrency=[1, 2, 4], mode="slo", slo=slo), lambda p: {"good_share": 0.5})
    found = none.searches()["base"]
    assert found.highest_meeting is None and found.runs == 1
    assert "no load meets the SLOs" in found.statement
    every = drive(make(concurrency=[1, 2, 4], mode="slo", slo=slo), lambda p: {})
    found = every.searches()["base"]
    assert found.highest_meeting == 4 and found.lowest_missing is None
    assert "raise the axis to find the limit" in found.statement


def test_a_load_whose_repeats_are_all_invalid_counts_as_missing_and_says_why():
    sweep = make(concurrency=[1, 2, 4, 8], mode="slo", slo={"ttft_ms": 500})
    planner = drive(sweep, lambda p: {"errors": 500} if p.load >= 4 else {})
    found = planner.searches()["base"]
    assert found.highest_meeting == 2 and found.lowest_missing == 4
    assert "c=4 counts as missing: no valid repeat (errors 50 % > 10 %)" in found.statement


def test_an_unsettled_interval_is_called_out():
    sweep = make(concurrency=[1, 2], mode="slo", slo={"ttft_ms": 500, "goodput_fraction": 0.95})
    planner = drive(sweep, lambda p: {"requests": 40, "good_share": 0.975 if p.load == 1 else 0.5})
    assert "The interval at c=1 straddles the target" in planner.searches()["base"].statement
