"""X-Dynamo-Session-ID affinity (docs/dynamo-observed.md §c): the header generation of released
Dynamo 1.3 to 1.6.x ("1.6"), and the same rules where the bind-era builds honour headers."""

from __future__ import annotations

import pytest

from runner.cluster import Cluster
from tests.runner.cluster.builders import (
    bind,
    blocks,
    cluster,
    placed,
    rejected,
    request,
    workers_of,
)

# Generations with header affinity: every rule here holds in both.
with_headers = pytest.mark.parametrize("version", ["bind", "1.6"])


def _stats(c: Cluster, now_s: float, worker: int) -> tuple[int, int, int, int]:
    w = c.stats(now_s)["workers"][worker]
    return w["header_binds"], w["header_follows"], w["header_expiries"], w["header_invalidations"]


@with_headers
def test_header_affinity_is_off_without_a_ttl(version: str) -> None:
    c = cluster(workers=3, dynamo_version=version)
    assert workers_of(c, [request(header="s") for _ in range(3)]) == [0, 1, 2]
    assert c.bound_keys(0.0) == 0


@with_headers
def test_first_header_request_binds_and_later_ones_follow(version: str) -> None:
    c = cluster(workers=3, header_affinity_ttl_s=60, dynamo_version=version)
    first = placed(c.submit(request(header="s"), 0.0))
    later = [placed(c.submit(request(header="s"), float(t))) for t in range(1, 4)]
    assert first.affinity == "header-bound"
    assert {p.affinity for p in later} == {"header-followed"}
    assert {p.worker_id for p in later} == {first.worker_id}
    assert c.bound_keys(4.0) == 1
    assert _stats(c, 4.0, first.worker_id) == (1, 3, 0, 0)


@with_headers
def test_the_same_session_id_pins_whatever_the_prompt(version: str) -> None:
    # kv routing would send each unrelated prompt to the emptiest worker; the binding wins.
    c = cluster(workers=4, router="kv", header_affinity_ttl_s=60, dynamo_version=version)
    placements = [
        placed(c.submit(request(blocks(8, start=1000 * i), header="s", output_tokens=50), 0.0))
        for i in range(4)
    ]
    assert len({p.worker_id for p in placements}) == 1
    unbound = [placed(c.submit(request(blocks(8, start=9000 + 1000 * i)), 0.0)) for i in range(3)]
    assert placements[0].worker_id not in {p.worker_id for p in unbound}


@with_headers
def test_header_binding_expires_an_idle_ttl_after_its_last_request_ends(version: str) -> None:
    c = cluster(workers=3, header_affinity_ttl_s=10, dynamo_version=version)
    first = placed(c.submit(request(header="s", output_tokens=2000), 0.0))
    assert first.end_s > 10  # a long request (a lease) holds the binding while it runs
    assert c.bound_keys(first.end_s + 9.9) == 1
    assert c.bound_keys(first.end_s + 10) == 0
    placed(c.submit(request(), first.end_s + 10))
    again = placed(c.submit(request(header="s"), first.end_s + 10))
    assert again.affinity == "header-bound"
    assert again.worker_id != first.worker_id
    assert _stats(c, first.end_s + 10, first.worker_id)[2] == 1


@with_headers
def test_a_request_in_flight_holds_the_binding_past_an_earlier_requests_ttl(version: str) -> None:
    c = cluster(workers=3, header_affinity_ttl_s=10, dynamo_version=version)
    short = placed(c.submit(request(header="s"), 0.0))
    long = placed(c.submit(request(header="s", output_tokens=3000), 1.0))
    assert long.end_s > short.end_s + 10
    later = placed(c.submit(request(header="s"), long.end_s + 5))
    assert (later.worker_id, later.affinity) == (short.worker_id, "header-followed")


@with_headers
def test_siblings_share_their_parent_groups_worker_while_the_parent_keeps_its_own(
    version: str,
) -> None:
    c = cluster(workers=4, header_affinity_ttl_s=60, dynamo_version=version)
    parent = placed(c.submit(request(header="p"), 0.0))
    first_child = placed(c.submit(request(header="c1", parent="p"), 1.0))
    second_child = placed(c.submit(request(header="c2", parent="p"), 2.0))
    assert second_child.worker_id == first_child.worker_id
    assert first_child.worker_id != parent.worker_id  # the group binds where it first lands
    assert placed(c.submit(request(header="p"), 3.0)).worker_id == parent.worker_id


def test_lineage_without_the_parent_header_keeps_the_tree_on_the_roots_worker() -> None:
    # What the dynamo-headers emitter sends under lineage: the root's id, no parent header.
    c = cluster(workers=4, header_affinity_ttl_s=60, dynamo_version="1.6")
    root = placed(c.submit(request(header="root"), 0.0))
    children = [placed(c.submit(request(header="root"), float(t))) for t in range(1, 4)]
    assert {p.worker_id for p in children} == {root.worker_id}


def test_without_parent_grouping_each_child_binds_its_own_id() -> None:
    c = cluster(workers=4, header_affinity_ttl_s=60, header_parent_grouping=False)
    placed(c.submit(request(header="p"), 0.0))
    first_child = placed(c.submit(request(header="c1", parent="p"), 1.0))
    second_child = placed(c.submit(request(header="c2", parent="p"), 2.0))
    assert second_child.worker_id != first_child.worker_id
    assert c.bound_keys(2.0) == 3


def test_a_session_control_binding_wins_over_a_header_binding() -> None:
    c = cluster(workers=4, header_affinity_ttl_s=60)
    by_header = placed(c.submit(request(header="h"), 0.0))
    by_body = placed(c.submit(request(control=bind("b")), 0.0))
    both = placed(c.submit(request(header="h", control=bind("b")), 1.0))
    assert by_header.worker_id != by_body.worker_id
    assert (both.worker_id, both.affinity) == (by_body.worker_id, "bound")


@with_headers
def test_header_binding_to_a_downed_worker_is_invalidated(version: str) -> None:
    c = cluster(workers=2, header_affinity_ttl_s=60, dynamo_version=version)
    first = placed(c.submit(request(header="s"), 0.0))
    c.worker_down(first.worker_id, 1.0)
    again = placed(c.submit(request(header="s"), 2.0))
    assert again.worker_id != first.worker_id
    assert again.affinity == "header-bound"
    assert _stats(c, 2.0, first.worker_id)[3] == 1
    assert c.stats(2.0)["totals"]["header_invalidations"] == 1


@with_headers
def test_a_session_id_over_256_bytes_is_refused_but_a_parent_id_is_not(version: str) -> None:
    c = cluster(workers=2, header_affinity_ttl_s=60, dynamo_version=version)
    at_limit = "é" * 128  # 256 bytes in UTF-8
    placed(c.submit(request(header=at_limit), 0.0))
    placed(c.submit(request(header="s", parent=at_limit + "x"), 0.0))  # as real 1.6.1 does
    refusal = rejected(c.submit(request(header=at_limit + "x"), 0.0))
    assert (refusal.status, refusal.message) == (400, "Invalid request")
    totals = c.stats(0.0)["totals"]
    assert totals["header_refusals"] == {"id_too_long": 1}
    assert (totals["requests"], totals["rejections"]) == (2, {"400": 1})


def test_a_long_id_is_not_checked_while_header_affinity_is_off() -> None:
    c = cluster(workers=2, dynamo_version="1.6")
    placed(c.submit(request(header="x" * 1000), 0.0))


@with_headers
def test_a_new_session_past_the_entry_limit_is_refused_until_one_expires(version: str) -> None:
    c = cluster(
        workers=4, header_affinity_ttl_s=10, header_affinity_max_sessions=3, dynamo_version=version
    )
    for session in ("a", "b", "c"):
        placed(c.submit(request(header=session), 0.0))
    refusal = rejected(c.submit(request(header="d"), 1.0))
    assert refusal.status == 429
    assert "resource exhausted" in refusal.message
    assert placed(c.submit(request(header="a"), 1.0)).affinity == "header-followed"
    placed(c.submit(request(), 1.0))  # traffic without the header is not limited
    # b and c idle out 10 s after their requests end; a was refreshed at 1 s.
    assert placed(c.submit(request(header="d"), 11.5)).affinity == "header-bound"
    assert c.stats(11.5)["totals"]["header_refusals"] == {"table_full": 1}


@with_headers
def test_soft_mode_routes_past_a_saturated_bound_worker_without_rebinding(version: str) -> None:
    c = cluster(
        workers=2,
        max_num_seqs=1,
        header_affinity_ttl_s=60,
        header_affinity_mode="soft",
        dynamo_version=version,
    )
    first = placed(c.submit(request(header="s", output_tokens=500), 0.0))
    busy = placed(c.submit(request(header="s"), 0.1))
    assert (busy.affinity, busy.queued_s) == ("header-fallback", 0.0)
    assert busy.worker_id != first.worker_id
    after = placed(c.submit(request(header="s"), first.end_s + 1))
    assert (after.worker_id, after.affinity) == (first.worker_id, "header-followed")
    worker = c.stats(first.end_s + 1)["workers"][first.worker_id]
    assert (worker["header_binds"], worker["header_fallbacks"]) == (1, 1)


@with_headers
def test_hard_mode_queues_behind_a_saturated_bound_worker(version: str) -> None:
    c = cluster(workers=2, max_num_seqs=1, header_affinity_ttl_s=60, dynamo_version=version)
    first = placed(c.submit(request(header="s", output_tokens=500), 0.0))
    busy = placed(c.submit(request(header="s"), 0.1))
    assert (busy.worker_id, busy.affinity) == (first.worker_id, "header-followed")
    assert busy.queued_s > 0
