"""Client workers' session caches: copies, orphans, switches, rebuilds (docs/product.md §4.3)."""

from __future__ import annotations

from runner.credit import Credit
from runner.trace.model import Branch, BranchMode, Turn
from runner.workers.cache import BYTES_PER_TOKEN, SessionCaches
from tests.runner.factories import credit, fork, spawn


def with_turn(c: Credit, *, tokens: int = 100, forks: tuple[str, ...] = ()) -> Credit:
    branches = (Branch(BranchMode.FORK, forks),) if forks else ()
    turn = Turn(index=c.turn_index, input_tokens=tokens, output_tokens=10, branches=branches)
    return Credit(
        **{
            **{f: getattr(c, f) for f in c.__dataclass_fields__},
            "turn": turn,
            "has_forks": bool(forks),
            "has_branches": bool(forks),
        }
    )


def test_a_session_served_by_one_worker_keeps_one_copy_and_leaves_none():
    caches = SessionCaches(2)
    assert not caches.serve(with_turn(credit("s", 0, of=3)), 0).hit
    assert caches.serve(with_turn(credit("s", 1, of=3)), 0).hit
    caches.serve(with_turn(credit("s", 2, of=3)), 0)
    assert (caches.copies, caches.orphans, caches.worker_switches) == (0, 0, 0)
    assert caches.tracked_sessions == 0  # nothing kept for an ended session


def test_a_switch_leaves_an_orphaned_copy_on_the_previous_worker():
    caches = SessionCaches(3)
    caches.serve(with_turn(credit("s", 0, of=3)), 0)
    outcome = caches.serve(with_turn(credit("s", 1, of=3)), 1)
    assert outcome.switched and not outcome.hit
    assert caches.worker_switches == 1 and caches.sessions_multi_worker == 1
    assert caches.orphans == 1 and caches.workers[0].orphans == 1
    caches.serve(with_turn(credit("s", 2, of=3)), 1)  # final turn evicts only worker 1's copy
    assert caches.copies == 1 and caches.orphans == 1  # the leak the product measures
    assert caches.holders_of("s") == (0,)


def test_returning_to_a_worker_with_an_old_copy_makes_it_current_again():
    caches = SessionCaches(2)
    caches.serve(with_turn(credit("s", 0, of=4)), 0)
    caches.serve(with_turn(credit("s", 1, of=4)), 1)
    assert caches.serve(with_turn(credit("s", 2, of=4)), 0).hit
    assert caches.orphans == 1 and caches.workers[1].orphans == 1 and caches.workers[0].orphans == 0
    assert caches.sessions_multi_worker == 1 and caches.worker_switches == 2


def test_copies_carry_their_size_in_bytes_and_grow_with_the_history():
    caches = SessionCaches(1)
    caches.serve(with_turn(credit("s", 0, of=3), tokens=100), 0)
    assert caches.workers[0].bytes == 110 * BYTES_PER_TOKEN
    caches.serve(with_turn(credit("s", 1, of=3), tokens=500), 0)
    assert caches.workers[0].bytes == 510 * BYTES_PER_TOKEN and caches.workers[0].copies == 1


def test_a_fork_parents_copy_stays_pinned_until_its_fork_children_take_theirs():
    caches = SessionCaches(2)
    caches.serve(with_turn(credit("p", 0, of=1), forks=("f1", "f2")), 0)
    assert caches.holders_of("p") == (0,) and caches.orphans == 0  # pinned, not orphaned
    assert not caches.serve(with_turn(fork("f1", 0, of=1, parent="p")), 0).rebuilt
    assert caches.holders_of("p") == (0,)
    caches.serve(with_turn(fork("f2", 0, of=1, parent="p")), 0)
    assert caches.holders_of("p") == () and caches.copies == 0


def test_a_fork_child_on_a_worker_without_its_parents_history_counts_a_context_rebuild():
    caches = SessionCaches(2)
    caches.serve(with_turn(credit("p", 0, of=1), forks=("f",)), 0)
    assert caches.serve(with_turn(fork("f", 0, of=2, parent="p")), 1).rebuilt
    assert caches.context_rebuilds == 1


def test_a_spawn_child_never_counts_a_rebuild():
    caches = SessionCaches(2)
    caches.serve(with_turn(credit("p", 0, of=2)), 0)
    assert not caches.serve(with_turn(spawn("c", 0, of=2, parent="p")), 1).rebuilt


def test_a_fork_child_that_never_starts_releases_its_parents_pin():
    caches = SessionCaches(1)
    caches.serve(with_turn(credit("p", 0, of=1), forks=("f",)), 0)
    caches.fork_child_settled("p", "f")
    assert caches.copies == 0


def test_peak_copies_and_peak_orphans_are_kept():
    caches = SessionCaches(2)
    for i in range(3):
        caches.serve(with_turn(credit(f"s{i}", 0, of=2)), 0)
    caches.serve(with_turn(credit("s0", 1, of=2)), 1)
    assert caches.peak_copies == 4 and caches.peak_orphans == 1


def test_a_session_ended_early_drops_its_current_copy():
    caches = SessionCaches(1)
    caches.serve(with_turn(credit("s", 0, of=5)), 0)
    caches.session_ended("s")
    assert caches.copies == 0 and caches.tracked_sessions == 0


def test_a_lost_worker_takes_its_copies_and_the_next_turn_counts_a_switch():
    caches = SessionCaches(2)
    caches.serve(with_turn(credit("s", 0, of=3)), 0)
    caches.drop_worker(0)
    assert caches.copies == 0 and caches.orphans == 0
    assert caches.serve(with_turn(credit("s", 1, of=3)), 1).switched


def test_the_capacity_cap_evicts_orphaned_copies_first():
    caches = SessionCaches(2, max_copies_per_worker=2)
    caches.serve(with_turn(credit("a", 0, of=3)), 0)
    caches.serve(with_turn(credit("a", 1, of=3)), 1)  # a's copy on 0 is now an orphan
    caches.serve(with_turn(credit("b", 0, of=3)), 0)
    caches.serve(with_turn(credit("c", 0, of=3)), 0)  # over the cap: the orphan goes
    assert caches.capacity_evictions == 1
    assert caches.holders_of("a") == (1,) and caches.workers[0].copies == 2
