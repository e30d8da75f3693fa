"""Branches that start with their declaring turn (aiperf's pre_session_spawns)."""

from __future__ import annotations

import dataclasses

from runner.replay.scheduler import ReplayConfig
from runner.trace.model import Branch, BranchMode, Session, Tree
from tests.runner.factories import tree, turns, with_branches
from tests.runner.replay.driver import run


def _parent_with_helper(*, on_issue: bool, helper_delay_s: float = 0.0) -> Tree:
    parent_turns = turns(2)
    branch = Branch(BranchMode.SPAWN, ("helper",), on_issue=on_issue)
    parent_turns[0] = with_branches(parent_turns[0], branch)
    helper_turns = turns(1)
    helper_turns[0] = dataclasses.replace(helper_turns[0], delay_s=helper_delay_s)
    return tree(
        Session("parent", tuple(parent_turns)),
        Session("helper", tuple(helper_turns), parent_id="parent", mode=BranchMode.SPAWN, depth=1),
    )


def test_a_pre_session_spawn_is_sent_with_its_parents_first_turn():
    credits, _, _ = run(
        [_parent_with_helper(on_issue=True)], ReplayConfig(concurrency=1, max_trees=1)
    )
    first_two = {(c.template_id, c.turn_index): c.issued_at_s for c in credits[:2]}
    assert first_two == {("parent", 0): 0.0, ("helper", 0): 0.0}


def test_its_delay_runs_from_the_issue_not_the_return():
    credits, _, _ = run(
        [_parent_with_helper(on_issue=True, helper_delay_s=0.25)],
        ReplayConfig(concurrency=1, max_trees=1),
        latency_s=1.0,
    )
    helper = next(c for c in credits if c.template_id == "helper")
    assert helper.issued_at_s == 0.25  # the parent's turn 0 returns at 1.0


def test_an_ordinary_branch_still_waits_for_the_return():
    credits, _, _ = run(
        [_parent_with_helper(on_issue=False)], ReplayConfig(concurrency=1, max_trees=1)
    )
    helper = next(c for c in credits if c.template_id == "helper")
    assert helper.issued_at_s == 1.0


def test_the_declaring_turn_is_never_tree_final_and_the_tree_drains_once():
    credits, scheduler, recorder = run(
        [_parent_with_helper(on_issue=True)], ReplayConfig(concurrency=1, max_trees=1)
    )
    finals = [c for c in credits if c.is_tree_final]
    assert len(finals) == 1 and finals[0] is credits[-1]
    assert scheduler.trees_completed == 1 and recorder.ended[-1][1] is True
