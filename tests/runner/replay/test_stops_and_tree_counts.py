"""Stops end a run on time, and every started tree ends as completed or cut
(docs/product.md §4.2)."""

from __future__ import annotations

from runner.replay.scheduler import ReplayConfig, ReplayScheduler
from runner.trace.model import Branch, BranchMode, Session, Tree
from tests.runner.factories import tree, turns, with_branches
from tests.runner.replay.driver import Recorder, run


def far_second_turn() -> Tree:
    """Turn 1 comes 1000 s after turn 0 returns: a long idle gap, as Claude Code traces have."""
    return tree(Session("root", tuple(turns(2, delay_s=1000.0))))


def spawning_root() -> Tree:
    """A single-turn root whose only turn declares two SPAWN children."""
    root_turns = turns(1)
    root_turns[0] = with_branches(root_turns[0], Branch(BranchMode.SPAWN, ("c0", "c1")))
    children = [
        Session(name, tuple(turns(2, start_s=1.0)), parent_id="root", mode=BranchMode.SPAWN)
        for name in ("c0", "c1")
    ]
    return tree(Session("root", tuple(root_turns)), *children)


def test_next_due_is_never_past_the_duration_while_the_run_goes_on():
    scheduler = ReplayScheduler([far_second_turn()], ReplayConfig(concurrency=1, duration_s=10.0))
    scheduler.start(0.0, Recorder())
    (first,) = scheduler.pop_due(0.0)
    scheduler.on_return(first, 1.0)
    assert scheduler.next_due() == 10.0  # not 1001 s: the driver must wake to stop


def test_at_the_duration_the_scheduler_stops_and_cuts_what_remains():
    scheduler = ReplayScheduler([far_second_turn()], ReplayConfig(concurrency=1, duration_s=10.0))
    scheduler.start(0.0, Recorder())
    (first,) = scheduler.pop_due(0.0)
    scheduler.on_return(first, 1.0)
    assert scheduler.pop_due(10.0) == []
    assert scheduler.stopped and scheduler.finished and scheduler.next_due() is None
    assert (scheduler.trees_completed, scheduler.trees_cut) == (0, 1)


def test_a_run_with_requests_in_flight_at_the_duration_finishes_when_they_return():
    scheduler = ReplayScheduler([far_second_turn()], ReplayConfig(concurrency=1, duration_s=10.0))
    scheduler.start(0.0, Recorder())
    (first,) = scheduler.pop_due(0.0)
    assert scheduler.pop_due(10.0) == [] and scheduler.stopped
    assert not scheduler.finished  # turn 0 is still in flight
    scheduler.on_return(first, 12.0)
    assert scheduler.finished and scheduler.next_due() is None
    assert scheduler.trees_cut == 1


def test_a_return_after_the_duration_spawns_nothing_and_cuts_the_tree():
    credits, scheduler, recorder = run(
        [spawning_root()], ReplayConfig(concurrency=1, duration_s=0.5)
    )
    assert [c.template_id for c in credits] == ["root"]
    assert recorder.ended == [("t1:root", True)]  # the children were never spawned
    assert (scheduler.trees_completed, scheduler.trees_cut) == (0, 1)


def test_a_tree_whose_children_a_stop_kept_from_running_is_cut_not_completed():
    # Two lanes send their roots; the request cap stops the run before either returns, so the
    # children those roots declare never run.
    credits, scheduler, _ = run([spawning_root()], ReplayConfig(concurrency=2, max_requests=2))
    assert len(credits) == 2
    assert scheduler.trees_started == 2
    assert (scheduler.trees_completed, scheduler.trees_cut) == (0, 2)


def test_a_tree_with_nothing_left_after_t_star_is_skipped_and_the_lane_replays_the_next():
    solo = tree(Session("root", tuple(turns(3))))
    # t* at the very end of the tree's span: nothing of it is left to replay.
    credits, scheduler, _ = run(
        [solo], ReplayConfig(concurrency=1, max_trees=1, start_window=(1.0, 1.0))
    )
    assert [c.turn_index for c in credits] == [0, 1, 2]  # the next tree, from its beginning
    assert scheduler.trees_skipped == 1
    assert (scheduler.trees_started, scheduler.trees_completed, scheduler.trees_cut) == (1, 1, 0)


def test_started_trees_end_completed_or_cut_once_the_run_is_over():
    trees = [far_second_turn(), spawning_root(), tree(Session("root", tuple(turns(4))))]
    for config in (
        ReplayConfig(concurrency=3, duration_s=30.0),
        ReplayConfig(concurrency=3, max_requests=9),
        ReplayConfig(concurrency=3, duration_s=30.0, start_window=(0.0, 1.0), seed=4),
    ):
        _, scheduler, _ = run(trees, config)
        assert scheduler.finished
        assert scheduler.trees_started == scheduler.trees_completed + scheduler.trees_cut
