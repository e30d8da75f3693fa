"""Aggregates, Pareto frontiers, headlines per arm pair (noise and no repeats), CSV rows."""

from __future__ import annotations

from typing import Any

from runner.sweep import build_report, csv_rows, parse_sweep
from runner.sweep.spec import Point, SweepSpec
from tests.runner.sweep.model import drive

BASE = {"duration_s": 60, "target": {"kind": "simulated"}}
ARMS = [
    {"name": "lineage", "overrides": {"scope": "lineage"}},
    {"name": "conversation", "overrides": {"scope": "conversation"}},
]


def make(**fields: Any) -> SweepSpec:
    return parse_sweep({"base": BASE, "arms": ARMS, **fields})


def test_the_frontier_keeps_the_points_no_other_beats_on_both_axes():
    # (tok/s per user, output tok/s) per load; c=8 is beaten by c=2 on both, c=16 is invalid.
    shape = {1: (100, 100), 2: (90, 180), 4: (95, 150), 8: (80, 170), 16: (200, 900)}

    def model(point: Point) -> dict[str, Any]:
        per_user, throughput = shape[round(point.load)]
        return {
            "itl_ms": 1000 / per_user,
            "output_tokens_per_s": throughput,
            "errors": 500 if point.load == 16 else 0,
        }

    sweep = make(concurrency=list(shape), arms=ARMS[:1])
    report = build_report(drive(sweep, model), status="completed", wall_s=1.0)
    frontier = report.frontiers["lineage"]
    assert [(p.label, round(p.tokens_per_s_per_user), p.throughput) for p in frontier] == [
        ("c=2", 90, 180),
        ("c=4", 95, 150),
        ("c=1", 100, 100),
    ]


def capacities(lineage: float, conversation: float, share: Any = None) -> Any:
    limits = {"lineage": lineage, "conversation": conversation}

    def model(point: Point) -> dict[str, Any]:
        meets = point.load <= limits[point.arm]
        good = 0.99 if meets else 0.80
        if share is not None:
            good = share(point) or good
        return {"good_share": good, "goodput_per_s": point.load if meets else point.load / 2}

    return model


SLO = {"ttft_ms": 500, "goodput_fraction": 0.95}


def headline_of(sweep: SweepSpec, model: Any) -> Any:
    report = build_report(drive(sweep, model), status="completed", wall_s=1.0)
    assert len(report.headlines) == 1 and report.headlines[0].arms == ("lineage", "conversation")
    return report.headlines[0]


def test_the_headline_names_where_each_arm_stops_and_the_goodput_gained():
    sweep = make(concurrency=[8, 16, 24, 32], slo=SLO)
    headline = headline_of(sweep, capacities(24, 16))
    assert headline.text == (
        "lineage holds the TTFT SLO up to c=24 where conversation stops at c=16 (+50 % goodput)"
        " (single runs: no repeats to judge noise by)"
    )
    assert headline.within_noise is None


def test_a_difference_beyond_the_repeats_spread_is_stated_plainly():
    sweep = make(concurrency=[8, 16, 24, 32], slo=SLO, repeats=2)
    headline = headline_of(sweep, capacities(24, 16))
    assert headline.text == (
        "lineage holds the TTFT SLO up to c=24 where conversation stops at c=16 (+50 % goodput)"
    )
    assert headline.within_noise is False


def test_a_difference_inside_the_repeats_spread_is_no_difference_beyond_noise():
    # At c=24 lineage's repeats (95.5 %, 97 %) meet pooled and conversation's (94 %, 95.8 %)
    # miss, but the two ranges overlap.
    shares = {("lineage", 0): 0.955, ("lineage", 1): 0.97, ("conversation", 0): 0.94}
    shares[("conversation", 1)] = 0.958

    def share(point: Point) -> float | None:
        return shares.get((point.arm, point.repeat)) if point.load == 24 else None

    sweep = make(concurrency=[8, 16, 24, 32], slo=SLO, repeats=2)
    headline = headline_of(sweep, capacities(24, 24, share))
    assert headline.text.startswith(
        "no difference beyond noise: lineage holds the TTFT SLO up to c=24 where conversation "
        "stops at c=16"
    )
    assert "at c=24 their good shares overlap across repeats (lineage 95.5–97.0 %, " in (
        headline.text
    )
    assert headline.within_noise is True


def test_arms_holding_the_slo_equally_far_compare_their_goodput_there():
    sweep = make(concurrency=[8, 16], slo=SLO, repeats=2)
    headline = headline_of(sweep, capacities(16, 16))
    assert headline.text == (
        "no difference beyond noise: lineage and conversation both hold the TTFT SLO up to "
        "c=16 (goodput ranges overlap)"
    )


def test_an_arm_meeting_nowhere_and_no_arm_meeting_are_said_so():
    sweep = make(concurrency=[8, 16], slo={**SLO, "itl_ms": 30})
    assert headline_of(sweep, capacities(16, 0)).text == (
        "lineage holds the TTFT and ITL SLOs up to c=16 where conversation misses it at every "
        "load (single runs: no repeats to judge noise by)"
    )
    assert headline_of(sweep, capacities(0, 0)).text == (
        "neither lineage nor conversation holds the TTFT and ITL SLOs at any load"
    )


def test_without_slos_the_headline_compares_peak_throughput():
    def model(point: Point) -> dict[str, Any]:
        scale = 2.0 if point.arm == "lineage" else 1.0
        return {"output_tokens_per_s": 1000 * scale * min(point.load, 16) / 16}

    sweep = make(concurrency=[8, 16])
    assert headline_of(sweep, model).text == (
        "lineage peaks at 2,000 output tok/s (c=16) against conversation's 1,000 (c=16): "
        "+100 % (single runs: no repeats to judge noise by)"
    )
    noisy = make(concurrency=[8, 16], repeats=2)
    same = headline_of(noisy, lambda p: {"output_tokens_per_s": 1000.0 + p.repeat * 50})
    assert same.text.startswith("no difference beyond noise: lineage peaks at 1,025 output")
    assert same.within_noise is True


def test_the_csv_has_a_row_per_arm_and_load_with_each_figures_mean_and_range():
    sweep = make(concurrency=[8, 16], slo=SLO, repeats=2)
    report = build_report(drive(sweep, capacities(8, 16)), status="completed", wall_s=1.0)
    rows = csv_rows(report)
    assert [(r["arm"], r["label"]) for r in rows] == [
        ("lineage", "c=8"),
        ("lineage", "c=16"),
        ("conversation", "c=8"),
        ("conversation", "c=16"),
    ]
    row = rows[1]
    assert row["repeats"] == 2 and row["valid"] is True and row["meets_slo"] is False
    assert row["good_share"] == 0.8
    assert {"ttft_p90_ms", "ttft_p90_ms_min", "ttft_p90_ms_max", "orphaned_session_copies"} <= (
        set(row)
    )
