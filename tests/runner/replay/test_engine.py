"""The composed engine: router, caches and scheduler together, including the nasty cases."""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable

from runner.replay.engine import Dispatch, Engine, EngineConfig
from runner.replay.scheduler import ReplayConfig
from runner.routing.router import Policy
from runner.trace.model import Branch, BranchMode, Session
from tests.runner.factories import tree, turns, with_branches


def drive(
    engine: Engine,
    *,
    latency_s: float = 1.0,
    jitter_s: float = 0.0,
    after: Callable[[Engine, Dispatch], None] | None = None,
) -> list[tuple[Dispatch, str | None]]:
    """Run to the end; latency is `latency_s` plus a seeded uniform jitter; `after` is called
    on every completion."""
    rng = random.Random(1)
    engine.start(0.0)
    done: list[tuple[float, int, Dispatch]] = []
    out: list[tuple[Dispatch, str | None]] = []
    while True:
        due = engine.next_due()
        end = done[0][0] if done else None
        if due is None and end is None:
            return out
        if end is None or (due is not None and due < end):
            for d in engine.dispatch_due(due):
                latency = 0.0 if d.error else latency_s + rng.uniform(0.0, jitter_s)
                heapq.heappush(done, (due + latency, d.credit.id, d))
        else:
            now, _, d = heapq.heappop(done)
            engine.complete(d, now, error=d.error)
            out.append((d, d.error))
            if after is not None:
                after(engine, d)


def solo(n: int = 6):
    return tree(Session("root", tuple(turns(n))))


def test_a_lost_client_worker_migrates_its_sessions_and_the_switch_is_counted():
    engine = Engine(
        [solo()], ReplayConfig(concurrency=1, max_trees=1), EngineConfig(client_workers=3)
    )
    lost = []

    def lose_after_second_turn(e: Engine, d: Dispatch) -> None:
        if d.credit.turn_index == 1 and not lost:
            lost.append(d.worker)
            e.lose_worker(d.worker)

    results = drive(engine, after=lose_after_second_turn)
    workers = [d.worker for d, _ in results]
    assert all(error is None for _, error in results)
    assert len(set(workers[:2])) == 1 and len(set(workers[2:])) == 1 and workers[2] != lost[0]
    assert engine.caches.worker_switches == 1
    assert engine.scheduler.trees_completed == 1


def test_with_on_worker_loss_fail_the_lost_workers_sessions_end_with_worker_lost():
    engine = Engine(
        [solo()],
        ReplayConfig(concurrency=1, max_trees=1),
        EngineConfig(client_workers=3, on_worker_loss="fail"),
    )

    def lose(e: Engine, d: Dispatch) -> None:
        if d.credit.turn_index == 1:
            e.lose_worker(d.worker)

    results = drive(engine, after=lose)
    assert [error for _, error in results] == [None, None, "worker_lost"]
    # The tree drains (the session ended) but is cut, not completed: its last turn never ran.
    assert engine.scheduler.trees_completed == 0 and engine.scheduler.trees_cut == 1


def test_fork_grandchildren_share_their_ancestors_worker_and_history():
    root_turns = turns(2)
    root_turns[0] = with_branches(root_turns[0], Branch(BranchMode.FORK, ("f1",)))
    f1_turns = turns(2)
    f1_turns[0] = with_branches(f1_turns[0], Branch(BranchMode.FORK, ("f2",)))
    agent = tree(
        Session("root", tuple(root_turns)),
        Session("f1", tuple(f1_turns), parent_id="root", mode=BranchMode.FORK, depth=1),
        Session("f2", tuple(turns(3)), parent_id="f1", mode=BranchMode.FORK, depth=2),
    )
    engine = Engine(
        [agent], ReplayConfig(concurrency=1, max_trees=1), EngineConfig(client_workers=4)
    )
    results = drive(engine)
    assert len({d.worker for d, _ in results}) == 1
    assert engine.caches.context_rebuilds == 0
    assert engine.router.key_count == 0 and engine.caches.copies == 0  # all released


def rootless_tree():
    # Root turns at 0-1 s and 2-3 s; the subagent starts after turn 0 and runs 8 turns.
    root_turns = turns(2)
    root_turns[0] = with_branches(root_turns[0], Branch(BranchMode.SPAWN, ("sub",)))
    return tree(
        Session("root", tuple(root_turns)),
        Session(
            "sub", tuple(turns(8, start_s=1.5)), parent_id="root", mode=BranchMode.SPAWN, depth=1
        ),
    )


def busy_engine(policy: Policy) -> Engine:
    # Lanes replay from t* where the root is over: every lane is rootless.
    return Engine(
        [rootless_tree()],
        ReplayConfig(concurrency=8, max_trees=8, start_window=(0.3, 0.45)),
        EngineConfig(policy=policy, client_workers=4),
    )


def test_a_subagent_in_a_rootless_lane_keeps_one_worker_under_spawn_pin():
    engine = busy_engine(Policy.SPAWN_PIN)
    results = drive(engine, jitter_s=3.0)
    assert all(d.credit.parent_id is not None for d, _ in results)  # the roots never send
    assert engine.caches.worker_switches == 0 and engine.caches.orphans == 0


def test_a_subagent_in_a_rootless_lane_bounces_under_legacy():
    engine = busy_engine(Policy.LEGACY)
    drive(engine, jitter_s=3.0)
    assert engine.caches.worker_switches > 0 and engine.caches.orphans > 0


def test_a_run_cut_mid_tree_sends_no_close_and_leaves_the_key_to_the_ttl():
    from runner.affinity.emitters import AffinityConfig, AffinityKind

    engine = Engine(
        [rootless_tree()],
        ReplayConfig(concurrency=1, duration_s=5.0),
        EngineConfig(affinity=AffinityConfig(kind=AffinityKind.DYNAMO_NVEXT, scope="lineage")),
    )
    results = drive(engine)
    assert engine.scheduler.trees_completed == 0
    assert not any(d.credit.is_tree_final for d, _ in results)
    assert engine.ledger.closes == 0 and engine.ledger.keys_bound == 1


def test_priming_lets_a_fork_child_live_at_t_star_inherit_its_parents_history():
    # Root turns at 0, 11 and 22 s; its FORK child runs from 1.5 s. t* = 1.15 s: the child's
    # first turn comes long before the root's next one, so only a primed root has sent its
    # history by then.
    root_turns = turns(3, delay_s=10.0)
    root_turns[0] = with_branches(root_turns[0], Branch(BranchMode.FORK, ("f",)))
    agent = tree(
        Session("root", tuple(root_turns)),
        Session("f", tuple(turns(4, start_s=1.5)), parent_id="root", mode=BranchMode.FORK, depth=1),
    )

    def replay(prime: bool) -> Engine:
        engine = Engine(
            [agent],
            ReplayConfig(concurrency=1, max_trees=1, start_window=(0.05, 0.05), prime=prime),
            EngineConfig(client_workers=4),
        )
        drive(engine)
        return engine

    assert replay(prime=False).caches.context_rebuilds == 1
    primed = replay(prime=True)
    assert primed.caches.context_rebuilds == 0 and primed.caches.worker_switches == 0
