"""A simulated run always ends (issue 13 item 4: a zero-latency cluster under a workload that
never waits issued requests without the virtual clock moving, so its duration never came)."""

from __future__ import annotations

import time

from runner import parse_spec, run
from runner.cluster import ClusterConfig
from runner.ending import EndedBy
from runner.replay.scheduler import ReplayConfig
from runner.sim.simulator import SimConfig, simulate
from runner.trace.model import Session
from tests.runner.factories import tree, turns


def test_an_instant_cluster_with_no_waits_ends_with_a_reason_instead_of_running_for_ever() -> None:
    trees = [tree(Session("root", tuple(turns(4, delay_s=0.0))))]
    config = SimConfig(
        replay=ReplayConfig(timing="lanes", concurrency=4, duration_s=60.0),
        cluster=ClusterConfig(workers=2, time_scale=0.0),
    )
    started = time.monotonic()
    result = simulate(trees, config)
    assert time.monotonic() - started < 30
    assert result.ended_by.by == EndedBy.CLOCK_STALLED and "stood still" in result.ended_by.detail
    assert result.summary["requests"] > 0


def test_a_stalled_simulation_is_a_failed_run_that_says_why() -> None:
    spec = parse_spec(
        {"timing": "closed", "max_trees": 10**8, "target": {"kind": "simulated", "time_scale": 0}}
    )
    # With a count to stop it the clock may stand still: the run goes on to its count.
    assert spec.max_trees == 10**8
    instant = parse_spec(
        {
            "duration_s": 60,
            "speedup": 1e6,
            "target": {"kind": "simulated", "time_scale": 0},
            "workload": {
                "synthetic": {
                    "trees": 2,
                    "think_time_median_s": 0,
                    "max_think_time_s": 0,
                    "subagent_think_time_median_s": 0,
                }
            },
        }
    )
    result = run(instant)
    assert result.status == "failed"
    assert result.ended_by.by == EndedBy.CLOCK_STALLED
    assert "time_scale" in result.ended_by.detail
    assert result.summary["stopped_reason"] == result.ended_by.detail
