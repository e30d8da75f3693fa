"""A replay whose live sessions could pass MAX_SESSIONS_AT_ONCE is refused before it starts
(issue 13 item 5: a 20,000-subagent tree on 16 lanes took 27 s and 470 MB to simulate, a
4.8 MB fan-out stalled for over a minute): the message names the tree, the numbers and the
environment variable that raises the limit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.errors import SpecError
from runner.replay import scheduler as scheduler_module
from runner.replay.scheduler import ReplayConfig, ReplayScheduler
from runner.trace.model import Branch, BranchMode, Session, Tree
from tests.fixtures import CLAUDE_CODE_SUBAGENTS
from tests.runner.factories import tree, turns, with_branches

ROOT = Path(__file__).resolve().parents[3]


def fan_out(children: int) -> Tree:
    """A root whose first turn spawns `children` one-turn sessions at once."""
    ids = tuple(f"c{i}" for i in range(children))
    first, second = turns(2)
    root = Session("root", (with_branches(first, Branch(BranchMode.SPAWN, ids)), second))
    return tree(root, *(Session(c, tuple(turns(1, start_s=2.0))) for c in ids), tree_id="fan")


@pytest.fixture(autouse=True)
def small_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scheduler_module, "MAX_SESSIONS_AT_ONCE", 100)


def test_lanes_times_the_largest_tree_over_the_limit_is_refused_with_the_numbers() -> None:
    with pytest.raises(SpecError) as info:
        ReplayScheduler([tree(Session("small", tuple(turns(1)))), fan_out(20)], ReplayConfig())
    assert str(info.value) == (
        "tree 'fan' has 21 sessions: on 16 lanes that is 336 at once, over the limit of 100 "
        "live sessions (use at most 4 lanes, or split the tree, or raise "
        "AIPERF_MAX_SESSIONS_AT_ONCE)"
    )


def test_closed_timing_counts_its_lanes_too() -> None:
    with pytest.raises(SpecError, match="on 8 lanes that is 168 at once"):
        ReplayScheduler([fan_out(20)], ReplayConfig(timing="closed", concurrency=8))


def test_a_workload_at_the_limit_starts() -> None:
    ReplayScheduler([fan_out(24)], ReplayConfig(concurrency=4))  # 25 x 4 = 100


@pytest.mark.parametrize("timing", ["rate", "schedule"])
def test_arriving_trees_are_judged_one_tree_at_a_time(timing: str) -> None:
    config = ReplayConfig(timing=timing, rate_per_s=1.0 if timing == "rate" else None)  # type: ignore[arg-type]
    ReplayScheduler([fan_out(99)], config)  # the cap on active trees (10,000) is not lanes
    with pytest.raises(SpecError, match="tree 'fan' has 101 sessions, over the limit of 100"):
        ReplayScheduler([fan_out(100)], config)


def test_simulate_refuses_through_the_environment_variable_with_exit_2() -> None:
    """The limit is read from AIPERF_MAX_SESSIONS_AT_ONCE when the engine is imported."""
    env = {**os.environ, "AIPERF_MAX_SESSIONS_AT_ONCE": "10"}
    command = [sys.executable, "-m", "runner", "simulate", "--trace", str(CLAUDE_CODE_SUBAGENTS)]
    done = subprocess.run(
        [*command, "--concurrency", "4", "--duration", "5", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1
    assert "on 4 lanes that is 16 at once, over the limit of 10 live sessions" in done.stderr


def test_a_tree_over_the_limit_on_its_own_is_not_offered_fewer_lanes() -> None:
    with pytest.raises(SpecError, match=r"on 2 lanes that is 202 at once, .*\(the tree alone"):
        ReplayScheduler([fan_out(100)], ReplayConfig(concurrency=2))


def test_one_lane_that_fits_is_named_in_the_singular() -> None:
    with pytest.raises(SpecError, match=r"\(use at most 1 lane, or split the tree"):
        ReplayScheduler([fan_out(60)], ReplayConfig(concurrency=2))
