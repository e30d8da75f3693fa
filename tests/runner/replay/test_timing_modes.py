"""Timing modes of the replay scheduler (docs/product.md §4.2): lanes, rate, schedule, closed."""

from __future__ import annotations

import dataclasses
import itertools
import statistics

import pytest

from runner.errors import SpecError
from runner.replay.scheduler import TIMINGS, ReplayConfig, ReplayScheduler
from runner.trace.model import Branch, BranchMode, Session, Tree, Turn
from tests.runner.factories import tree, turns, with_branches
from tests.runner.replay.driver import Recorder, run


def arrival(name: str, t_s: float, *, more: tuple[float, ...] = ()) -> Tree:
    """A tree of one session whose requests started at `t_s` and then `more` (trace clock),
    as arrival traces record them: turn 0's delay is its offset in the whole trace."""
    stamps = (t_s, *more)
    session_turns = tuple(
        Turn(
            index=i,
            input_tokens=100,
            output_tokens=10,
            delay_s=t if i == 0 else max(0.0, t - stamps[i - 1] - 1.0),
            t_s=t,
            duration_s=1.0,
        )
        for i, t in enumerate(stamps)
    )
    return tree(Session(name, session_turns), tree_id=name)


def one_turn() -> Tree:
    return tree(Session("root", tuple(turns(1))))


def with_child(*, child_delay_s: float) -> Tree:
    root_turns = turns(2, delay_s=5.0)
    root_turns[0] = with_branches(root_turns[0], Branch(BranchMode.SPAWN, ("c",)))
    child_turns = turns(2, delay_s=5.0, start_s=1.0 + child_delay_s)
    child_turns[0] = Turn(
        index=0, input_tokens=100, output_tokens=10, delay_s=child_delay_s, t_s=1.0 + child_delay_s
    )
    child = Session("c", tuple(child_turns), parent_id="root", mode=BranchMode.SPAWN, depth=1)
    return tree(Session("root", tuple(root_turns)), child)


def roots(credits):
    return [c for c in credits if c.parent_id is None and c.turn_index == 0]


# ------------------------------------------------------------------------------------- rate


def test_rate_mode_starts_a_tree_at_every_arrival_of_a_constant_process():
    credits, scheduler, _ = run(
        [one_turn()],
        ReplayConfig(timing="rate", rate_per_s=2.0, arrival="constant", duration_s=5.0),
    )
    assert [c.due_s for c in roots(credits)] == [0.5 * k for k in range(10)]
    assert scheduler.trees_started == scheduler.trees_completed == 10


def test_rate_mode_caps_active_trees_and_late_arrivals_wait_in_order():
    # Arrivals every 0.5 s, each tree takes 1 s, one slot: arrival k starts at k seconds.
    credits, scheduler, _ = run(
        [one_turn()],
        ReplayConfig(timing="rate", rate_per_s=2.0, arrival="constant", concurrency=1, max_trees=4),
    )
    assert [c.due_s for c in roots(credits)] == [0.0, 1.0, 2.0, 3.0]
    assert {c.lane for c in credits} == {0}
    assert scheduler.arrivals_waited == 3
    waits = scheduler.arrival_waits
    assert waits.count == 4
    assert waits.percentile(50.0) == pytest.approx(750.0, rel=0.01)  # waits 0, .5, 1, 1.5 s
    assert waits.percentile(99.0) == pytest.approx(1485.0, rel=0.01)


def test_arrivals_still_waiting_when_the_run_stops_are_counted_as_never_started():
    _, scheduler, _ = run(
        [tree(Session("root", tuple(turns(1))))],
        ReplayConfig(
            timing="rate", rate_per_s=4.0, arrival="constant", concurrency=1, duration_s=1.0
        ),
        latency_s=2.0,
    )
    assert scheduler.trees_started == 1
    assert scheduler.arrivals_unstarted == 3  # arrivals at 0.25, 0.5, 0.75 s found no slot


def test_each_arriving_tree_replays_with_its_own_recorded_inner_timing():
    # Turn 1 goes 5 s after turn 0 returns (1 s latency), divided by the speedup.
    credits, _, _ = run(
        [with_child(child_delay_s=3.0)],
        ReplayConfig(timing="rate", rate_per_s=0.1, arrival="constant", max_trees=1, speedup=2),
    )
    due = {(c.template_id, c.turn_index): c.due_s for c in credits}
    assert due == {("root", 0): 0.0, ("root", 1): 3.5, ("c", 0): 2.5, ("c", 1): 6.0}


def test_a_single_request_trace_replays_as_one_request_trees_in_rate_mode():
    # Arrival traces record turn 0 at its offset in the whole trace; a rate replay ignores it.
    trace = [arrival("a", 100.0), arrival("b", 250.0)]
    credits, scheduler, _ = run(
        trace, ReplayConfig(timing="rate", rate_per_s=1.0, arrival="constant", max_trees=4)
    )
    assert [(c.template_id, c.due_s) for c in credits] == [
        ("a", 0.0),
        ("b", 1.0),
        ("a", 2.0),
        ("b", 3.0),
    ]
    assert scheduler.trees_completed == 4


def arrival_times(config: ReplayConfig) -> list[float]:
    credits, _, _ = run([one_turn()], config, latency_s=0.001)
    return [c.due_s for c in roots(credits)]


def test_poisson_arrivals_are_seeded_and_average_the_rate():
    config = ReplayConfig(timing="rate", rate_per_s=5.0, concurrency=1000, duration_s=600.0)
    times = arrival_times(config)
    assert times == arrival_times(config)
    assert times != arrival_times(dataclasses.replace(config, seed=1))
    assert 2700 <= len(times) <= 3300


def test_gamma_arrivals_keep_the_mean_and_burstiness_sets_their_spread():
    def gaps(burstiness: float) -> list[float]:
        times = arrival_times(
            ReplayConfig(
                timing="rate",
                rate_per_s=10.0,
                arrival="gamma",
                burstiness=burstiness,
                concurrency=10_000,
                max_trees=4000,
            )
        )
        return [b - a for a, b in itertools.pairwise(times)]

    for burstiness in (0.25, 1.0, 4.0):
        sample = gaps(burstiness)
        cv = statistics.pstdev(sample) / statistics.fmean(sample)
        assert statistics.fmean(sample) == pytest.approx(0.1, rel=0.1)
        # Gamma with shape k has a coefficient of variation of 1 / sqrt(k).
        assert cv == pytest.approx(burstiness**-0.5, rel=0.15)


# --------------------------------------------------------------------------------- schedule


def test_schedule_mode_starts_every_tree_at_its_scaled_recorded_start_uncapped():
    trace = [arrival("late", 110.0), arrival("first", 100.0), arrival("next", 103.0)]
    credits, scheduler, _ = run(
        trace, ReplayConfig(timing="schedule", speedup=2.0, concurrency=1), latency_s=10.0
    )
    # Relative to the earliest tree, divided by the speedup; all three run at once.
    assert [(c.template_id, c.due_s) for c in credits] == [
        ("first", 0.0),
        ("next", 1.5),
        ("late", 5.0),
    ]
    assert scheduler.trees_completed == 3


def test_schedule_mode_sends_each_turn_at_its_recorded_offset_once_the_previous_returned():
    trace = [arrival("s", 50.0, more=(54.0, 56.0))]
    credits, _, _ = run(trace, ReplayConfig(timing="schedule"), latency_s=3.0)
    # Turn 1 at 4 s as recorded; turn 2 was due at 6 s but turn 1 returned only at 7 s.
    assert [c.due_s for c in credits] == [0.0, 4.0, 7.0]


def test_schedule_mode_replays_the_workload_once():
    trace = [arrival("a", 0.0), arrival("b", 1.0)]
    credits, scheduler, _ = run(trace, ReplayConfig(timing="schedule"))
    assert len(credits) == 2 and scheduler.trees_started == 2 and scheduler.finished


# ----------------------------------------------------------------------------------- closed


def test_closed_mode_sends_each_turn_the_moment_the_previous_returns():
    credits, _, _ = run(
        [with_child(child_delay_s=30.0)], ReplayConfig(timing="closed", concurrency=1, max_trees=1)
    )
    due = {(c.template_id, c.turn_index): c.due_s for c in credits}
    # Recorded delays (5 s between turns, 30 s before the child) are ignored.
    assert due == {("root", 0): 0.0, ("root", 1): 1.0, ("c", 0): 1.0, ("c", 1): 2.0}


def test_closed_mode_lanes_recycle_like_agentic_lanes():
    credits, scheduler, _ = run(
        [tree(Session("root", tuple(turns(3, delay_s=9.0))))],
        ReplayConfig(timing="closed", concurrency=2, max_trees=4),
    )
    assert scheduler.trees_started == scheduler.trees_completed == 4
    assert max(c.due_s for c in credits) == 5.0  # two trees per lane, 3 turns of 1 s each


# --------------------------------------------------------------------- every mode, together


def mode_config(timing: str, **kw: object) -> ReplayConfig:
    extra: dict[str, object] = {"rate_per_s": 4.0} if timing == "rate" else {}
    return ReplayConfig(timing=timing, concurrency=4, **extra, **kw)  # type: ignore[arg-type]


def many_trees() -> list[Tree]:
    return [
        tree(Session(f"r{i}", tuple(turns(3, start_s=2.0 * i))), tree_id=f"T{i}") for i in range(12)
    ]


@pytest.mark.parametrize("timing", TIMINGS)
def test_no_credit_is_due_at_or_after_the_duration_in_any_mode(timing):
    credits, scheduler, _ = run(many_trees(), mode_config(timing, duration_s=6.0))
    assert credits and max(c.due_s for c in credits) < 6.0
    assert scheduler.stopped_at_s == 6.0


@pytest.mark.parametrize("timing", TIMINGS)
def test_a_request_cap_stops_issuing_in_any_mode(timing):
    credits, _, _ = run(many_trees(), mode_config(timing, max_requests=7))
    assert len(credits) == 7


@pytest.mark.parametrize("timing", TIMINGS)
def test_a_tree_cap_stops_starting_trees_in_any_mode(timing):
    credits, scheduler, _ = run(many_trees(), mode_config(timing, max_trees=3))
    assert scheduler.trees_started == scheduler.trees_completed == 3
    assert len({c.root_id for c in credits}) == 3


@pytest.mark.parametrize("timing", TIMINGS)
def test_credits_due_during_warmup_are_marked_in_any_mode(timing):
    credits, _, _ = run(many_trees(), mode_config(timing, max_trees=6, warmup_s=2.0))
    assert credits
    assert all(c.warmup == (c.due_s < 2.0) for c in credits)


def test_a_credit_carries_the_instant_it_was_due_and_the_instant_it_was_issued():
    solo = tree(Session("root", tuple(turns(2, delay_s=2.0))))
    scheduler = ReplayScheduler([solo], ReplayConfig(concurrency=1, max_trees=1))
    scheduler.start(0.0, Recorder())
    (first,) = scheduler.pop_due(0.25)  # a driver that woke late
    scheduler.on_return(first, 1.0)
    (second,) = scheduler.pop_due(3.5)
    assert (first.due_s, first.issued_at_s) == (0.0, 0.25)
    assert (second.due_s, second.issued_at_s) == (3.0, 3.5)


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"timing": "rate"}, "needs a rate"),
        ({"timing": "rate", "rate_per_s": 0.0}, "rate must be > 0"),
        ({"timing": "rate", "rate_per_s": 1.0, "burstiness": 0.0}, "burstiness"),
        ({"timing": "rate", "rate_per_s": 1.0, "start_window": (0.0, 0.5)}, "start window"),
        ({"timing": "schedule", "start_window": (0.2, 0.5)}, "start window"),
        ({"timing": "open"}, "timing must be one of"),
        ({"arrival": "uniform"}, "arrival must be one of"),
        ({"max_trees": 0}, "tree count"),
    ],
)
def test_a_bad_timing_setting_is_rejected_with_a_clear_message(kw, message):
    with pytest.raises(SpecError, match=message):
        ReplayConfig(**kw)
