"""Session histories held as shared pieces (runner/workers/history.py): what a copy really
costs, the copies as text beside them, and the leak legacy routing causes measured both ways."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest

from runner.cluster import ClusterConfig
from runner.mockserver import MockServerConfig, start_mock_server
from runner.replay.engine import EngineConfig
from runner.replay.scheduler import ReplayConfig
from runner.routing.router import Policy
from runner.trace import load_trace
from runner.wallclock import LiveConfig, replay_live
from runner.workers.history import HistoryStore, SessionHistories

PREFIX = os.urandom(64 * 1024)  # a tree's common prefix: 16 pieces


def body(tail: bytes) -> bytes:
    return PREFIX + tail


def test_copies_share_their_common_prefix_and_give_back_their_text():
    held = SessionHistories()
    bodies = {f"s{i}": body(os.urandom(3000) * (i + 1)) for i in range(8)}
    for i, (sid, text) in enumerate(bodies.items()):
        held.sent(i % 4, sid, text)
    for i, (sid, text) in enumerate(bodies.items()):
        assert held.held(i % 4, sid) == text  # whole and exact
    totals = held.totals()
    assert totals["copies"] == 8
    assert totals["logical_bytes"] == sum(map(len, bodies.values()))
    # The prefix once, not eight times: under a third of the text held as text.
    assert totals["actual_bytes"] < totals["logical_bytes"] / 3
    # Each copy's own bytes leave out the shared prefix.
    per = held.figures(4)
    for f in per:
        assert f.own_bytes < f.logical_bytes - (len(PREFIX) - 4096) * f.copies
    assert sum(f.actual_bytes for f in per) == pytest.approx(totals["actual_bytes"], abs=8)


def test_a_hinted_hold_is_the_same_history_as_a_plain_one():
    store = HistoryStore()
    first = store.hold(body(b"x" * 5000))
    second = store.hold(body(b"y" * 5000), like=first)
    plain = store.hold(body(b"y" * 5000))
    assert second == plain and all(a is b for a, b in zip(second, plain, strict=True))
    # A hint that does not match anywhere is harmless.
    other = store.hold(os.urandom(9000), like=first)
    assert HistoryStore.text(other) != HistoryStore.text(first)
    for history in (first, second, plain, other):
        store.release(history)
    assert store.pieces == 0 and store.held_bytes == 0


def test_an_ended_session_frees_its_copy_and_a_left_copy_is_an_orphan_measured_both_ways():
    held = SessionHistories()
    one, two, three = os.urandom(9000), os.urandom(9000), os.urandom(9000)
    held.sent(0, "a", body(one), family="t")
    held.sent(1, "a", body(one + two), family="t")  # moved: worker 0's copy stays
    held.sent(1, "b", body(three), family="t")
    held.ended(1, "a")
    held.ended(1, "b")
    totals = held.totals()
    assert totals["copies"] == 1 and totals["orphans"] == 1
    assert totals["orphan_logical_bytes"] == len(PREFIX) + 9000
    # Nothing else holds its pieces any more: all of it is its own.
    assert totals["orphan_own_bytes"] >= len(PREFIX) + 9000
    held.ended(0, "a")  # what a capacity eviction or a worker's loss would do
    assert held.totals()["copies"] == 0 and held.store.pieces == 0


@pytest.fixture
def mock() -> Iterator[str]:
    config = MockServerConfig(cluster=ClusterConfig(workers=8, time_scale=0.0))
    with start_mock_server(config, process=True) as server:
        yield server.url


@pytest.mark.parametrize("policy", [Policy.SPAWN_PIN, Policy.LEGACY])
def test_a_live_run_reports_its_copies_as_text_and_as_pieces(mock, claude_code_trace, policy):
    trace = load_trace(claude_code_trace)
    span_s = trace.trees[0].span_s
    config = LiveConfig(
        endpoint=mock,
        model="mock-model",
        # As tests/runner/wallclock's legacy test: each lane replays its tree from 100-300 s,
        # around the subagents' run, to its end (legacy bounces them, spawn-pin does not).
        replay=ReplayConfig(
            concurrency=8,
            max_trees=8,
            start_window=(100.0 / span_s, 300.0 / span_s),
            speedup=5000.0,
            seed=2,
        ),
        engine=EngineConfig(policy=policy),
    )
    summary = asyncio.run(replay_live([trace], config)).summary
    held = summary["session_histories"]
    assert summary["errors"] == 0
    assert held["peak_actual_bytes"] * 2 < held["peak_logical_bytes"]
    # The store's orphans are the books' (docs/product.md §4.3), whatever the policy.
    assert held["orphans"] == summary["orphaned_session_copies"]
    if policy is Policy.SPAWN_PIN:
        assert held["orphans"] == 0 and held["orphan_own_bytes"] == 0
    else:
        assert held["orphans"] > 0
        assert 0 < held["orphan_own_bytes"] <= held["orphan_logical_bytes"] + 4096 * held["orphans"]
