"""The AgentX preset (runner/presets.py) and what it sets: lanes from 25-75 % of their trees,
warmup per lane, the idle-gap cap, the failed-request share that stops a run, and the
validity every summary carries (runner/validity.py, shared with sweeps)."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.cli.options import add_endpoint_options, add_workload_options, build_spec
from runner.cluster import ClusterConfig
from runner.ending import EndedBy
from runner.errors import SpecError
from runner.mockserver import FaultConfig, MockServerConfig, start_mock_server
from runner.replay.scheduler import ReplayConfig
from runner.sim.simulator import SimConfig, simulate
from runner.spec import SimulatedTarget
from runner.trace import load_trace
from runner.validity import Validity, judge
from runner.wallclock import LiveConfig, replay_live


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_endpoint_options(parser)
    add_workload_options(parser)
    if "--endpoint" not in argv:
        argv = (*argv, "--endpoint", "http://127.0.0.1:1", "--model", "m")
    return parser.parse_args(list(argv))


def test_the_preset_sets_agentx_knobs_and_explicit_flags_win(claude_code_trace: Path):
    base = ("--trace", str(claude_code_trace), "--preset", "agentx")
    spec = build_spec(_args(*base), target=SimulatedTarget())
    assert spec.start_window == (0.25, 0.75)
    assert spec.warmup_per_lane == 10 and spec.max_idle_s == 300.0
    assert spec.duration_s == 3600.0 and spec.seed == 42
    mine = build_spec(
        _args(*base, "--start-window", "0:1", "--warmup-per-lane", "2", "--duration", "60"),
        target=SimulatedTarget(),
    )
    assert mine.start_window == (0.0, 1.0) and mine.warmup_per_lane == 2
    assert mine.duration_s == 60.0 and mine.max_idle_s == 300.0


def test_the_preset_stops_a_live_run_above_a_tenth_failed(claude_code_trace: Path):
    from runner.cli.options import endpoint_target_from_args

    args = _args(
        "--trace",
        str(claude_code_trace),
        "--preset",
        "agentx",
        "--endpoint",
        "http://127.0.0.1:1",
        "--model",
        "m",
    )
    spec = build_spec(args, target=endpoint_target_from_args(args))
    assert spec.target.stop_error_share == 0.10  # type: ignore[union-attr]


def test_the_preset_refuses_a_run_without_traces():
    with pytest.raises(SpecError, match="Claude Code traces"):
        build_spec(_args("--synthetic", "--preset", "agentx"), target=SimulatedTarget())


def test_warmup_per_lane_leaves_each_lanes_first_requests_unmeasured(claude_code_trace: Path):
    trace = load_trace(claude_code_trace)
    replay = ReplayConfig(
        concurrency=6, max_requests=600, warmup_per_lane=4, start_window=(0.25, 0.75)
    )
    summary = simulate(trace.trees, SimConfig(replay=replay)).summary
    assert summary["warmup_requests"] == 24
    assert summary["requests"] == 600 - 24


def test_the_idle_gap_cap_shortens_a_replay_of_long_pauses(claude_code_trace: Path):
    trace = load_trace(claude_code_trace)
    gaps = [t.delay_s for s in trace.trees[0].sessions.values() for t in s.turns]
    assert max(gaps) > 30.0  # the fixture pauses longer than the cap below
    spans = {}
    for cap in (None, 5.0):
        replay = ReplayConfig(concurrency=1, max_trees=1, max_idle_s=cap)
        spans[cap] = simulate(trace.trees, SimConfig(replay=replay)).summary["elapsed_s"]
    assert spans[5.0] < spans[None] - (max(gaps) - 5.0) * 0.9


def test_validity_is_the_sweeps_rules():
    from runner.sweep.spec import Validity as SweepValidity

    assert SweepValidity is Validity
    ok = judge(requests=1000, errors=50, cut=0, completed=950, ttft_measured=950)
    assert ok["valid"] and ok["reason"] is None and ok["error_share"] == 0.05
    bad = judge(requests=1000, errors=150, cut=0, completed=850, ttft_measured=800)
    assert not bad["valid"]
    assert "errors 15 % > 10 %" in bad["reason"] and "TTFT measured on 94.1 %" in bad["reason"]


@pytest.fixture
def failing_mock() -> Iterator[str]:
    config = MockServerConfig(
        cluster=ClusterConfig(workers=4, time_scale=0.0),
        faults=FaultConfig(error_rate=0.3, seed=3),
    )
    with start_mock_server(config, process=True) as server:
        yield server.url


def test_a_run_stops_above_its_error_share_and_its_summary_says_invalid(
    failing_mock: str, claude_code_trace: Path
):
    # replay_live, not run(): the preflight's one test request may draw an injected fault.
    trace = load_trace(claude_code_trace)
    config = LiveConfig(
        endpoint=failing_mock,
        model="mock-model",
        replay=ReplayConfig(
            concurrency=8, speedup=1000.0, start_window=(0.25, 0.75), max_requests=2000
        ),
        failure_threshold=0,
        stop_error_share=0.10,
    )
    result = asyncio.run(replay_live([trace], config))
    summary = result.summary
    assert result.ended_by.by == EndedBy.ERROR_SHARE
    assert "requests failed" in result.ended_by.detail
    assert summary["requests"] < 2000
    validity = summary["validity"]  # type: ignore[typeddict-item]
    assert validity["valid"] is False and validity["error_share"] > 0.10
    assert validity["reason"].startswith("errors ")
