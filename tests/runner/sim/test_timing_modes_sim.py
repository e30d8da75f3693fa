"""Timing modes and stops in simulation: the scheduler's rules hold on the virtual clock."""

from __future__ import annotations

import pytest

from runner.cluster import ClusterConfig
from runner.replay.scheduler import ReplayConfig
from runner.sim.simulator import SimConfig, simulate
from runner.trace import SyntheticConfig, generate_synthetic, load_trace
from runner.trace.model import Session
from tests.fixtures import FIXTURES, shared_sample
from tests.runner.factories import tree, turns

INSTANT = ClusterConfig(workers=4, time_scale=0.0)  # every request answers at once

# Small agentic trees (a short main chain, an occasional subagent) so that 3,000 of them
# simulate in about a second; the arrival process does not care how big a tree is.
SMALL_TREES = SyntheticConfig(
    trees=16, main_turns=(2, 4), subagent_turns=(1, 2), fork_turns=(1, 1), spawn_probability=0.2
)


def test_rate_mode_starts_the_rate_times_the_duration_in_trees():
    trees = generate_synthetic(SMALL_TREES).trees
    result = simulate(
        trees,
        SimConfig(
            replay=ReplayConfig(
                timing="rate", rate_per_s=5.0, concurrency=100_000, duration_s=600.0
            )
        ),
    )
    summary = result.summary
    assert 2700 <= summary["trees_started"] <= 3300
    assert summary["achieved_tree_rate_per_s"] == pytest.approx(5.0, rel=0.1)
    assert summary["arrival_wait_ms"]["waited"] == 0


def test_rate_mode_reports_how_long_arrivals_waited_for_a_slot():
    trees = generate_synthetic(SMALL_TREES).trees
    summary = simulate(
        trees,
        SimConfig(
            replay=ReplayConfig(timing="rate", rate_per_s=5.0, concurrency=2, duration_s=120.0)
        ),
    ).summary
    waits = summary["arrival_wait_ms"]
    assert waits["waited"] > 0 and waits["p99"] >= waits["p50"] > 0
    assert summary["achieved_tree_rate_per_s"] < 5.0  # two slots cannot keep up


def test_arrival_waits_are_null_outside_rate_mode():
    trees = generate_synthetic(SMALL_TREES).trees
    summary = simulate(trees, SimConfig(replay=ReplayConfig(max_trees=4))).summary
    assert summary["arrival_wait_ms"] is None


@pytest.mark.parametrize(
    ("trace", "speedup"),
    [
        ("fixture:mooncake_arrivals.jsonl", 10.0),
        ("fixture:azure_arrivals.csv", 10.0),
        ("sample:mooncake/conversation_trace.head2000.jsonl", 10.0),
        ("sample:azure/AzureLLMInferenceTrace_conv.csv", 10.0),
    ],
)
def test_schedule_mode_sends_each_request_at_its_scaled_timestamp(trace: str, speedup: float):
    where, name = trace.split(":", 1)
    path = FIXTURES / name if where == "fixture" else shared_sample(name)
    trees = load_trace(path).trees
    stamps = {
        (session.id, turn.index): turn.t_s
        for t in trees
        for session in t.sessions.values()
        for turn in session.turns
    }
    first_s = min(stamps.values())
    result = simulate(
        trees,
        SimConfig(replay=ReplayConfig(timing="schedule", speedup=speedup), cluster=INSTANT),
        keep_records=True,
    )
    records = result.records
    assert records is not None and len(records) == len(stamps)
    for record in records:
        template = record.session_id.split(":", 1)[1]  # instance ids are t<k>:<trace id>
        expected = (stamps[(template, record.turn_index)] - first_s) / speedup
        assert record.due_s == pytest.approx(expected, abs=1e-9)
        assert record.start_s == record.due_s  # the virtual clock sends on time


def test_a_simulated_run_ends_at_its_duration_however_far_the_next_request_is():
    # Turn 1 comes 1000 s after turn 0: the run must not jump there to notice its end.
    far = tree(Session("root", tuple(turns(2, delay_s=1000.0))))
    summary = simulate(
        [far], SimConfig(replay=ReplayConfig(concurrency=2, duration_s=10.0), cluster=INSTANT)
    ).summary
    assert summary["elapsed_s"] == 10.0
    assert summary["requests"] == 2
    assert (summary["trees_completed"], summary["trees_cut"]) == (0, 2)
