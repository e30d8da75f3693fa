"""Replay scheduling and issue-time finality (docs/product.md §4.2)."""

from __future__ import annotations

import random

import pytest

from runner.errors import SpecError
from runner.replay.scheduler import ReplayConfig
from runner.trace.model import Branch, BranchMode, Session, Turn
from tests.runner.factories import tree, turns, with_branches
from tests.runner.replay.driver import run

SPAWN = BranchMode.SPAWN
FORK = BranchMode.FORK


def root_with_children(
    root_turns: int = 3,
    *,
    mode: BranchMode = SPAWN,
    children: int = 2,
    child_turns: int = 2,
    declare_on: int = 0,
    join_turn: int | None = None,
    child_delay_s: float = 0.0,
):
    rt = turns(root_turns)
    names = tuple(f"c{i}" for i in range(children))
    rt[declare_on] = with_branches(rt[declare_on], Branch(mode, names, join_turn))
    root = Session("root", tuple(rt))
    kids = []
    for name in names:
        ct = turns(child_turns, start_s=rt[declare_on].t_s + 1.0 + child_delay_s)
        ct[0] = Turn(
            index=0,
            input_tokens=100,
            output_tokens=10,
            delay_s=child_delay_s,
            t_s=ct[0].t_s,
            duration_s=1.0,
        )
        kids.append(Session(name, tuple(ct), parent_id="root", mode=mode, depth=1))
    return tree(root, *kids)


def one_tree(config_kw=None, **tree_kw):
    return run(
        [root_with_children(**tree_kw)],
        ReplayConfig(concurrency=1, max_trees=1, **(config_kw or {})),
    )


# --------------------------------------------------------------------------------- finality


def test_a_root_final_turn_is_tree_final_when_no_descendant_is_outstanding():
    solo = tree(Session("root", tuple(turns(3))))
    credits, _, _ = run([solo], ReplayConfig(concurrency=1, max_trees=1))
    assert [c.is_tree_final for c in credits] == [False, False, True]


def test_a_root_final_turn_is_not_tree_final_while_a_child_still_runs():
    # Children take 10 s per turn; the root finishes long before them.
    credits, _, _ = run(
        [root_with_children()],
        ReplayConfig(concurrency=1, max_trees=1),
        latency_of={"c0": 10.0, "c1": 10.0},
    )
    root_final = [c for c in credits if c.template_id == "root" and c.is_final_turn]
    assert root_final and not root_final[0].is_tree_final


def test_only_the_last_outstanding_descendant_is_tree_final_after_the_root_finished():
    credits, _, _ = run(
        [root_with_children()],
        ReplayConfig(concurrency=1, max_trees=1),
        latency_of={"c0": 10.0, "c1": 20.0},
    )
    finals = [c for c in credits if c.is_tree_final]
    assert [(c.template_id, c.turn_index) for c in finals] == [("c1", 1)]


def test_a_final_turn_that_declares_branches_is_never_tree_final():
    credits, _, _ = one_tree(root_turns=1, declare_on=0, children=1, child_turns=1)
    root_credit = credits[0]
    assert root_credit.is_final_turn and root_credit.has_branches
    assert not root_credit.is_tree_final
    assert sum(c.is_tree_final for c in credits) == 1


def test_a_drained_tree_has_at_most_one_tree_final_request_and_it_is_the_last():
    rng = random.Random(3)
    for trial in range(40):
        t = root_with_children(
            root_turns=rng.randint(1, 4),
            children=rng.randint(1, 3),
            child_turns=rng.randint(1, 3),
            mode=rng.choice([SPAWN, FORK]),
        )
        latency = {f"c{i}": rng.uniform(0.1, 5.0) for i in range(3)}
        latency["root"] = rng.uniform(0.1, 5.0)
        credits, scheduler, _ = run(
            [t], ReplayConfig(concurrency=1, max_trees=1), latency_of=latency
        )
        assert scheduler.trees_completed == 1
        finals = [c for c in credits if c.is_tree_final]
        # Provable finality is conservative: at most one, and never before the tree's end.
        assert len(finals) <= 1, trial
        if finals:
            assert finals[0] is max(credits, key=lambda c: c.issued_at_s)


def test_a_tree_cut_by_the_runs_end_stamps_no_request_tree_final():
    credits, scheduler, _ = run(
        [root_with_children(child_turns=5)],
        ReplayConfig(concurrency=1, duration_s=6.0),
        latency_of={"c0": 3.0, "c1": 3.0},
    )
    assert scheduler.trees_completed == 0
    assert scheduler.trees_cut == 1
    assert not any(c.is_tree_final for c in credits)


def test_is_parent_final_tells_children_whether_the_root_has_finished():
    credits, _, _ = run(
        [root_with_children(root_turns=1, child_turns=3)], ReplayConfig(concurrency=1, max_trees=1)
    )
    child_credits = [c for c in credits if c.parent_id is not None]
    assert child_credits[0].is_parent_final is True  # root's only turn returned before spawn
    assert all(c.is_parent_final is not None for c in child_credits)


# ------------------------------------------------------------------------------------ joins


def test_recorded_joins_let_the_parent_continue_while_children_run():
    credits, _, _ = run(
        [root_with_children(join_turn=1)],
        ReplayConfig(concurrency=1, max_trees=1, joins="recorded"),
        latency_of={"c0": 10.0, "c1": 10.0},
    )
    root_t1 = next(c for c in credits if c.template_id == "root" and c.turn_index == 1)
    child_last = max(c.issued_at_s for c in credits if c.template_id != "root")
    assert root_t1.issued_at_s < child_last


def test_strict_joins_hold_the_joining_turn_until_every_child_finishes():
    credits, _, _ = run(
        [root_with_children(join_turn=1)],
        ReplayConfig(concurrency=1, max_trees=1, joins="strict"),
        latency_of={"c0": 10.0, "c1": 10.0},
    )
    root_t1 = next(c for c in credits if c.template_id == "root" and c.turn_index == 1)
    child_last_end = max(c.issued_at_s for c in credits if c.template_id != "root") + 10.0
    assert root_t1.issued_at_s >= child_last_end


# ------------------------------------------------------------------------ lanes and stops


def test_a_lane_recycles_into_a_new_tree_when_its_tree_drains():
    solo = tree(Session("root", tuple(turns(2))))
    credits, scheduler, recorder = run([solo], ReplayConfig(concurrency=2, max_trees=6))
    assert scheduler.trees_started == 6 and scheduler.trees_completed == 6
    assert len({c.root_id for c in credits}) == 6  # every instance has its own ids
    assert len(recorder.trees) == 6


def test_max_requests_stops_issuing():
    solo = tree(Session("root", tuple(turns(5))))
    credits, _, _ = run([solo], ReplayConfig(concurrency=3, max_requests=7))
    assert len(credits) == 7


def test_speedup_divides_every_recorded_delay():
    solo = tree(Session("root", tuple(turns(3, delay_s=4.0))))
    credits, _, _ = run([solo], ReplayConfig(concurrency=1, max_trees=1, speedup=4.0))
    assert [c.issued_at_s for c in credits] == [0.0, 2.0, 4.0]  # 1 s latency + 4 s / 4


def test_credits_issued_during_warmup_are_marked():
    solo = tree(Session("root", tuple(turns(4))))
    credits, _, _ = run([solo], ReplayConfig(concurrency=1, max_trees=1, warmup_s=3.0))
    assert [c.warmup for c in credits] == [True, True, False, False]


def test_fork_children_are_announced_before_they_start():
    credits, _, recorder = one_tree(mode=FORK)
    first_child = next(c for c in credits if c.parent_id is not None)
    assert (first_child.parent_id, first_child.session_id) in recorder.forks


@pytest.mark.parametrize("window", [(0.5, 0.2), (-0.1, 0.5), (0.0, 1.5)])
def test_a_bad_start_window_is_rejected_with_a_clear_message(window):
    with pytest.raises(SpecError, match="start window"):
        ReplayConfig(start_window=window)


# ------------------------------------------------------------------------ start instant t*


def test_a_lane_whose_root_finished_before_t_star_starts_rootless():
    # Root: turns at 0, 2, 4 (1 s each). Children spawned after turn 0, 10 long turns each.
    t = root_with_children(root_turns=3, child_turns=10)
    credits, scheduler, _ = run(
        [t],
        ReplayConfig(concurrency=1, max_trees=1, start_window=(0.6, 0.6)),
        latency_of={"c0": 1.0, "c1": 2.0},
    )
    assert all(c.template_id != "root" for c in credits)  # the root never sends
    assert {c.parent_id for c in credits} == {"t1:root"}
    assert scheduler.trees_completed == 1
    assert sum(c.is_tree_final for c in credits) == 1  # rootless: root_pending is False


def test_a_root_waiting_on_children_at_t_star_starts_gated_under_strict_joins():
    t = root_with_children(root_turns=3, child_turns=6, join_turn=1)
    credits, _, _ = run(
        [t],
        ReplayConfig(concurrency=1, max_trees=1, joins="strict", start_window=(0.1, 0.1)),
        latency_of={"c0": 2.0, "c1": 2.0},
    )
    root_turns = [c for c in credits if c.template_id == "root"]
    last_child = max(c.issued_at_s for c in credits if c.template_id != "root")
    assert root_turns[0].turn_index == 1
    assert root_turns[0].issued_at_s > last_child  # held until both children finished


def test_streams_resume_at_their_first_turn_after_t_star():
    solo = tree(Session("root", tuple(turns(10))))  # turns start at 0, 2, 4, ... 18 s
    credits, _, _ = run([solo], ReplayConfig(concurrency=1, max_trees=1, start_window=(0.5, 0.5)))
    assert credits[0].turn_index == 5


# ------------------------------------------------------------------------------- priming


def test_priming_sends_each_live_streams_last_turn_before_t_star_unmeasured():
    solo = tree(Session("root", tuple(turns(10))))  # turns start at 0, 2, 4, ... 18 s
    credits, _, _ = run(
        [solo], ReplayConfig(concurrency=1, max_trees=1, start_window=(0.5, 0.5), prime=True)
    )
    primer, first = credits[0], credits[1]
    assert primer.priming and primer.warmup and primer.turn_index == 4
    assert not first.priming and not first.warmup and first.turn_index == 5
    assert not any(c.priming for c in credits[1:])


def test_a_primed_stream_resumes_no_earlier_than_its_recorded_offset():
    solo = tree(Session("root", tuple(turns(10, delay_s=5.0))))  # turns 6 s apart
    t = run(
        [solo],
        ReplayConfig(concurrency=1, max_trees=1, start_window=(0.5, 0.5), prime=True),
        latency_s=0.5,
    )[0]
    unprimed = run(
        [solo], ReplayConfig(concurrency=1, max_trees=1, start_window=(0.5, 0.5)), latency_s=0.5
    )[0]
    assert t[1].issued_at_s == unprimed[0].issued_at_s > 0.5  # offset from t*, primer done by then


def test_a_stream_that_has_not_begun_at_t_star_is_not_primed():
    # Children start at 6 s; t* is about 2.6 s, after the root's second turn began.
    t = root_with_children(root_turns=3, child_turns=10, child_delay_s=5.0)
    credits, _, _ = run(
        [t], ReplayConfig(concurrency=1, max_trees=1, start_window=(0.1, 0.1), prime=True)
    )
    primed = {c.template_id for c in credits if c.priming}
    assert primed == {"root"}  # the children start after t*: nothing to prime
