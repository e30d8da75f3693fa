"""FORK parents' pinned copies are released exactly when their own FORK children settle,
also for trees replayed from t* with or without priming (docs/product.md §4.3)."""

from __future__ import annotations

from runner.replay.engine import Engine, EngineConfig
from runner.replay.scheduler import ReplayConfig
from runner.trace.model import Branch, BranchMode, Session, Tree, Turn
from tests.runner.factories import tree
from tests.runner.replay.test_engine import drive

FORK = BranchMode.FORK


def turn(index: int, t_s: float, *, after_s: float = 0.0, forks: tuple[str, ...] = ()) -> Turn:
    """A 1 s turn starting at `t_s` on the tree's clock, `after_s` after the previous ends."""
    return Turn(
        index=index,
        input_tokens=100,
        output_tokens=10,
        delay_s=after_s,
        t_s=t_s,
        duration_s=1.0,
        branches=(Branch(FORK, forks),) if forks else (),
    )


def child(name: str, *turns_: Turn) -> Session:
    return Session(name, turns_, parent_id="root", mode=FORK, depth=1)


def replay(agent: Tree, *, at: float, prime: bool) -> Engine:
    engine = Engine(
        [agent],
        ReplayConfig(concurrency=1, max_trees=1, start_window=(at, at), prime=prime),
        EngineConfig(client_workers=2),
    )
    drive(engine)
    assert engine.scheduler.trees_completed == 1
    return engine


def test_a_primed_turn_whose_fork_children_finished_before_t_star_pins_nothing():
    # Root turn 1 (2-3 s) declares FORK f, which runs 3-4 s; t* = 6 s primes root turn 1.
    agent = tree(
        Session(
            "root",
            (turn(0, 0.0), turn(1, 2.0, after_s=1.0, forks=("f",)), turn(2, 10.0, after_s=7.0)),
        ),
        child("f", turn(0, 3.0)),
    )
    engine = replay(agent, at=6.0 / 11.0, prime=True)
    assert engine.caches.copies == 0 and engine.caches.tracked_sessions == 0


def test_a_fork_child_resuming_mid_stream_releases_its_primed_parents_copy():
    # f runs 1.5-8.5 s; t* = 4 s: the root primes turn 0 (which declared f) and f resumes
    # at its turn 2 after priming turn 1 — it never sends a turn 0 to take the copy.
    agent = tree(
        Session("root", (turn(0, 0.0, forks=("f",)), turn(1, 11.0, after_s=10.0))),
        child(
            "f",
            turn(0, 1.5, after_s=0.5),
            turn(1, 3.5, after_s=1.0),
            turn(2, 5.5, after_s=1.0),
            turn(3, 7.5, after_s=1.0),
        ),
    )
    engine = replay(agent, at=4.0 / 12.0, prime=True)
    assert engine.caches.copies == 0 and engine.caches.tracked_sessions == 0


def test_a_fork_child_from_before_t_star_does_not_release_a_pin_held_for_a_later_child():
    # Root: turn 0 declares A (before t* = 3 s; A starts at 7 s), its final turn 1 (5 s)
    # declares B, which starts 10 s after it. The root's copy is pinned for B alone: A's
    # first request must not release it.
    agent = tree(
        Session("root", (turn(0, 0.0, forks=("a",)), turn(1, 5.0, after_s=4.0, forks=("b",)))),
        child("a", turn(0, 7.0, after_s=6.0)),
        child("b", turn(0, 16.0, after_s=10.0)),
    )
    engine = replay(agent, at=3.0 / 17.0, prime=False)
    assert engine.caches.context_rebuilds == 0  # B found its parent's history
    assert engine.caches.copies == 0
