"""The sticky router's rules (docs/product.md §4.4), one behaviour per test."""

from __future__ import annotations

import random

import pytest

from runner.errors import SpecError
from runner.routing.router import Policy, StickyRouter
from tests.runner.factories import credit, fork, spawn

SPAWN_PIN = Policy.SPAWN_PIN
LEGACY = Policy.LEGACY


def send(router: StickyRouter, c, *, complete: bool = True) -> int:
    worker = router.route(c)
    if complete:
        router.complete(worker)
    return worker


def keep_busy(router: StickyRouter, worker: int, n: int = 1) -> None:
    """Put n more in-flight credits on `worker`, as sends pinned there by other sessions do."""
    for _ in range(n):
        router._count_send(worker)


# ------------------------------------------------------------------ least-loaded selection


def test_least_loaded_picks_the_worker_with_fewest_in_flight_credits():
    router = StickyRouter(3)
    keep_busy(router, 0)
    keep_busy(router, 1)
    assert router.route(credit("x")) == 2


def test_ties_break_on_sticky_sessions_first():
    router = StickyRouter(2)
    w = send(router, credit("a", 0, of=3))  # a's entry is counted against w
    assert router.workers[w].active_sessions == 1
    assert send(router, credit("b")) == 1 - w


def test_ties_then_break_on_fewest_virtual_sends_then_oldest_send():
    router = StickyRouter(3)
    first = [send(router, credit(f"s{i}")) for i in range(3)]
    assert sorted(first) == [0, 1, 2]  # each gets one: virtual sends equal afterwards
    # Equal sessions and sends: the worker whose last send is oldest goes next.
    assert send(router, credit("next")) == first[0]


def test_min_load_lookup_stays_exact_under_random_churn():
    rng = random.Random(7)
    router = StickyRouter(8)
    in_flight: list[int] = []
    for i in range(5000):
        if in_flight and rng.random() < 0.5:
            router.complete(in_flight.pop(rng.randrange(len(in_flight))))
            continue
        expected_min = min(w.in_flight for w in router.workers)
        w = router.route(credit(f"r{i}"))
        assert router.workers[w].in_flight - 1 == expected_min
        in_flight.append(w)


# ------------------------------------------------------------------------- roots and entries


def test_a_root_sticks_to_its_worker_for_every_turn():
    router = StickyRouter(4)
    workers = set()
    for t in range(5):
        workers.add(send(router, credit("root", t, of=5)))
        send(router, credit(f"noise{t}", 0, of=2))  # other sessions move the loads around
    assert len(workers) == 1


def test_a_single_turn_root_creates_no_entry():
    router = StickyRouter(2)
    send(router, credit("one"))
    assert router.entry_count == 0
    assert all(w.active_sessions == 0 for w in router.workers)


def test_a_root_entry_is_evicted_on_its_final_turn_and_its_session_credited_back():
    router = StickyRouter(2)
    w = send(router, credit("r", 0, of=2))
    assert router.workers[w].active_sessions == 1
    send(router, credit("r", 1, of=2))
    assert router.entry_count == 0
    assert router.workers[w].active_sessions == 0


# ------------------------------------------------------------------------------ SPAWN pins


def test_a_spawn_child_starts_on_its_parents_worker_while_the_parent_entry_is_live():
    router = StickyRouter(4)
    w = send(router, credit("p", 0, of=3))
    keep_busy(router, w, 2)  # the parent's worker is now the most loaded
    assert send(router, spawn("c", 0, of=3, parent="p")) == w


@pytest.mark.parametrize("policy", [SPAWN_PIN])
def test_a_spawn_child_keeps_one_worker_after_its_parent_finishes(policy):
    router = StickyRouter(4, policy=policy)
    send(router, credit("p", 0, of=2))
    send(router, credit("p", 1, of=2))  # parent gone: its entry is evicted
    workers = set()
    for t in range(6):
        keep_busy(router, t % 4)
        workers.add(send(router, spawn("c", t, of=6, parent="p")))
    assert len(workers) == 1
    assert router.entry_count == 0  # released on its own final turn


def test_legacy_bounces_a_spawn_child_whose_parent_has_finished():
    router = StickyRouter(4, policy=LEGACY)
    send(router, credit("p", 0, of=2))
    send(router, credit("p", 1, of=2))
    workers = []
    for t in range(4):
        w_before = send(router, spawn("c", t, of=4, parent="p"), complete=False)
        workers.append(w_before)  # kept in flight: the next turn goes elsewhere
    assert len(set(workers)) == 4


def test_a_spawn_child_in_a_rootless_lane_keeps_one_worker():
    # The root's turns all lie before t*: it never sends, so no entry exists for it.
    router = StickyRouter(3)
    workers = {
        send(router, spawn("c", t, of=5, parent="never-sent"), complete=False) for t in range(5)
    }
    assert len(workers) == 1


def test_a_spawn_child_keeps_one_worker_while_its_parent_is_gated_at_replay_start():
    # A gated root sends nothing until its children finish: the children must not bounce.
    router = StickyRouter(3)
    c1 = {send(router, spawn("c1", t, of=3, parent="gated"), complete=False) for t in range(3)}
    c2 = {send(router, spawn("c2", t, of=3, parent="gated"), complete=False) for t in range(3)}
    assert len(c1) == 1 and len(c2) == 1
    w = send(router, credit("gated", 4, of=6))
    assert router.worker_of("gated") == w


def test_a_spawn_child_counts_as_an_active_sticky_session():
    router = StickyRouter(2)
    w = send(router, spawn("c", 0, of=3, parent="gone"))
    assert router.workers[w].active_sessions == 1


def test_a_single_turn_spawn_child_needs_no_entry():
    router = StickyRouter(2)
    send(router, spawn("c", 0, of=1, parent="gone"))
    assert router.entry_count == 0


# ------------------------------------------------------------------------------ FORK refs


def test_a_fork_child_goes_to_its_parents_worker_and_holds_the_entry_past_the_parents_end():
    router = StickyRouter(4)
    w = send(router, credit("p", 0, of=2, forks=True))
    assert router.register_child("p", "f")
    send(router, credit("p", 1, of=2))  # parent's final turn: the child still holds a ref
    assert router.worker_of("p") == w
    assert {send(router, fork("f", t, of=3, parent="p")) for t in range(3)} == {w}
    router.release_child("p")
    assert router.entry_count == 0
    assert router.workers[w].active_sessions == 0


def test_fork_grandchildren_resolve_through_aliases_at_any_depth():
    router = StickyRouter(4)
    w = send(router, credit("r", 0, of=3, forks=True))
    assert router.register_child("r", "f1")
    assert router.register_child("f1", "f2")  # f1 is an alias of r's entry
    assert router.register_child("f2", "f3")
    assert send(router, fork("f3", 0, of=2, parent="f2", depth=3)) == w
    assert router.key_count == 4  # r + three aliases, one entry


def test_an_entry_is_evicted_with_all_its_aliases_when_its_refcount_reaches_zero():
    router = StickyRouter(2)
    send(router, credit("r", 0, of=2, forks=True))
    router.register_child("r", "f1")
    router.register_child("f1", "f2")
    send(router, credit("r", 1, of=2))
    router.release_child("f1")  # f2 ends (released via its parent's alias)
    assert router.entry_count == 1
    router.release_child("r")  # f1 ends
    assert router.key_count == 0


def test_a_final_turn_that_declares_forks_keeps_the_entry_for_its_children():
    router = StickyRouter(2)
    w = send(router, credit("r", 0, of=2))
    send(router, credit("r", 1, of=2, forks=True))
    assert router.worker_of("r") == w  # kept although the owner's ref is gone
    router.register_child("r", "f")
    router.release_child("r")
    assert router.entry_count == 0


def test_eviction_credits_the_worker_the_entry_was_counted_against():
    router = StickyRouter(2)
    w = send(router, credit("r", 0, of=2, forks=True))
    router.register_child("r", "f")
    send(router, credit("r", 1, of=2))
    other = 1 - w
    keep_busy(router, w, 3)
    send(router, fork("f", 0, of=1, parent="r"))  # still w: the entry decides, not the load
    router.release_child("r")
    assert router.workers[w].active_sessions == 0
    assert router.workers[other].active_sessions == 0


def test_fork_children_of_a_spawn_child_attach_to_the_childs_entry():
    router = StickyRouter(4)
    send(router, credit("r", 0, of=1))
    w = send(router, spawn("s", 0, of=2, parent="r", forks=True))
    assert router.register_child("s", "g")
    keep_busy(router, w, 2)
    assert send(router, fork("g", 0, of=2, parent="s", depth=2)) == w


def test_legacy_routes_fork_children_of_a_spawn_child_least_loaded():
    router = StickyRouter(4, policy=LEGACY)
    send(router, credit("r", 0, of=1))
    send(router, spawn("s", 0, of=2, parent="r", forks=True))
    assert not router.register_child("s", "g")  # the SPAWN child owns no entry to attach to


def test_an_orphan_fork_child_pins_under_its_own_id_under_spawn_pin():
    router = StickyRouter(3)
    workers = {
        send(router, fork("f", t, of=3, parent="before-t-star"), complete=False) for t in range(3)
    }
    assert len(workers) == 1


def test_a_session_that_stops_early_releases_its_entry():
    router = StickyRouter(2)
    w = send(router, credit("r", 0, of=5))
    router.release_session("r")
    assert router.entry_count == 0
    assert router.workers[w].active_sessions == 0


# --------------------------------------------------------------------------- other policies


def test_least_loaded_policy_never_sticks():
    router = StickyRouter(4, policy=Policy.LEAST_LOADED)
    workers = {send(router, credit("r", t, of=4), complete=False) for t in range(4)}
    assert len(workers) == 4
    assert router.entry_count == 0


# ------------------------------------------------------------------------ workers come, go


def test_a_joining_worker_starts_at_the_average_virtual_sends():
    router = StickyRouter(2)
    for i in range(10):
        send(router, credit(f"s{i}"))
    new = router.add_worker()
    assert router.workers[new].virtual_sent == 5
    assert router.workers[new].in_flight == 0


def test_a_lost_worker_drops_its_entries_and_its_sessions_reroute():
    router = StickyRouter(3)
    w = send(router, credit("r", 0, of=3))
    owners = router.remove_worker(w)
    assert owners == ["r"]
    w2 = send(router, credit("r", 1, of=3))
    assert w2 != w
    assert router.worker_of("r") == w2


def test_the_last_worker_cannot_be_removed():
    router = StickyRouter(1)
    with pytest.raises(SpecError):
        router.remove_worker(0)


def test_an_orphan_fork_child_stays_pinned_after_its_parent_gets_an_entry():
    # Both replayed from t*: the child sends first, then its parent's first turn pins elsewhere.
    router = StickyRouter(3)
    w = send(router, fork("f", 0, of=3, parent="p"), complete=False)
    keep_busy(router, w, 3)
    parent_worker = send(router, credit("p", 5, of=9), complete=False)
    assert parent_worker != w
    assert send(router, fork("f", 1, of=3, parent="p")) == w


def test_a_fork_child_following_its_parents_new_entry_after_a_worker_loss_holds_it():
    router = StickyRouter(3)
    w = send(router, credit("p", 0, of=3, forks=True))
    assert router.register_child("p", "f")
    send(router, fork("f", 0, of=3, parent="p"))
    router.remove_worker(w)  # the entry and the child's alias go with the worker
    w2 = send(router, credit("p", 1, of=3))  # the parent pins a new entry
    assert send(router, fork("f", 1, of=3, parent="p")) == w2
    send(router, credit("p", 2, of=3))  # the parent's final turn: the child still holds it
    assert router.worker_of("p") == w2
    assert send(router, fork("f", 2, of=3, parent="p")) == w2
    router.release_child("p", "f")
    assert router.key_count == 0 and router.workers[w2].active_sessions == 0


def test_a_fork_child_whose_hold_went_with_a_lost_worker_releases_nothing():
    router = StickyRouter(3)
    w = send(router, credit("p", 0, of=3, forks=True))
    assert router.register_child("p", "f")
    router.remove_worker(w)
    w2 = send(router, credit("p", 1, of=3, forks=True))  # a new entry f never took
    assert router.register_child("p", "g")  # g holds the new entry
    router.release_child("p", "f")  # f ends before sending again: it held nothing here
    send(router, credit("p", 2, of=3))  # the owner's final turn
    assert router.worker_of("p") == w2  # still held for g
    router.release_child("p", "g")
    assert router.key_count == 0
