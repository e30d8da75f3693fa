"""The simulated twin: whole sweeps on the simulated cluster, points in parallel processes."""

from __future__ import annotations

import itertools
from typing import Any

from runner import ListSink
from runner.sweep import Point, parse_sweep, run_point, run_sweep


def test_orphaned_copies_grow_with_load_under_legacy_and_stay_0_under_spawn_pin():
    sweep = parse_sweep(
        {
            "base": {"duration_s": 600, "start_window": [0, 1], "target": {"kind": "simulated"}},
            "concurrency": [1, 2, 4, 8, 16],
            "arms": [
                {"name": "legacy", "overrides": {"policy": "legacy"}},
                {"name": "spawn-pin", "overrides": {"policy": "spawn-pin"}},
            ],
        }
    )
    report = run_sweep(sweep, processes=2)
    assert report.status == "completed" and report.runs == 10
    orphans = {
        arm: [row.mean("orphaned_session_copies") for row in report.aggregates if row.arm == arm]
        for arm in ("legacy", "spawn-pin")
    }
    legacy = orphans["legacy"]
    assert None not in legacy
    assert all(a < b for a, b in itertools.pairwise(legacy))  # type: ignore[operator]
    assert orphans["spawn-pin"] == [0.0] * 5
    assert all(row.valid for row in report.aggregates)


# Two inference workers and eight synthetic trees: TTFT and latency climb with lanes, and the
# share of requests meeting both SLOs falls through one half between 6 and 7 lanes.
_SATURATING = {
    "duration_s": 300,
    "workload": {"synthetic": {"trees": 8}},
    "target": {"kind": "simulated", "workers": 2},
}
_SLO = {"ttft_ms": 2000, "latency_ms": 8000, "goodput_fraction": 0.5}


def _sweep(**fields: Any) -> Any:
    return parse_sweep(
        {"base": _SATURATING, "concurrency": list(range(1, 17)), "slo": _SLO, **fields}
    )


def test_slo_mode_on_the_simulated_cluster_agrees_with_an_exhaustive_sweep_in_fewer_runs():
    exhaustive = run_sweep(_sweep(), processes=2)
    meeting = [
        row.load for row in exhaustive.aggregates if row.verdict is not None and row.verdict.meets
    ]
    search = run_sweep(_sweep(mode="slo"), processes=2).searches["base"]
    assert search.done and search.highest_meeting is not None
    loads = list(range(1, 17))
    assert abs(loads.index(round(search.highest_meeting)) - loads.index(round(max(meeting)))) <= 1
    assert search.runs < exhaustive.runs == 16
    assert f"Found in {search.runs} runs" in search.statement


def test_auto_mode_runs_synchronous_and_saturation_then_points_between():
    report = run_sweep(_sweep(mode="auto", auto_points=3, slo=None), processes=2)
    phases = [(row.phase, row.load) for row in report.aggregates]
    assert phases[0] == ("synchronous", 1) and ("saturation", 16) in phases
    between = [load for phase, load in phases if phase == "between"]
    assert between and all(1 < load < 16 for load in between)
    assert report.runs == 2 + len(between)


def test_a_point_run_alone_feeds_the_callers_sink_too():
    sweep = _sweep()
    sink = ListSink()
    result = run_point(sweep, Point(arm="base", load=4), sink=sink)
    assert result.valid and result.requests == len(sink.record_list) > 0
    assert sink.snapshots and result.figures["peak_session_copy_bytes"] is not None
    assert result.figures["coverage"] == 1.0
