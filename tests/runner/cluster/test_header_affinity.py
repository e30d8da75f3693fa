"""X-Dynamo-Session-ID affinity with an idle TTL (server-side.md §1.3)."""

from __future__ import annotations

from tests.runner.cluster.builders import bind, cluster, placed, request, workers_of


def test_header_affinity_is_off_without_a_ttl() -> None:
    c = cluster(workers=3)
    assert workers_of(c, [request(header="s") for _ in range(3)]) == [0, 1, 2]
    assert c.bound_keys(0.0) == 0


def test_first_header_request_binds_and_later_ones_follow() -> None:
    c = cluster(workers=3, header_affinity_ttl_s=60)
    first = placed(c.submit(request(header="s"), 0.0))
    later = [placed(c.submit(request(header="s"), float(t))) for t in range(1, 4)]
    assert first.affinity == "header-bound"
    assert {p.affinity for p in later} == {"header-followed"}
    assert {p.worker_id for p in later} == {first.worker_id}
    assert c.bound_keys(4.0) == 1


def test_header_binding_expires_an_idle_ttl_after_its_last_request_ends() -> None:
    c = cluster(workers=3, header_affinity_ttl_s=10)
    first = placed(c.submit(request(header="s", output_tokens=2000), 0.0))
    assert first.end_s > 10  # a long request holds the binding while it runs
    assert c.bound_keys(first.end_s + 9.9) == 1
    assert c.bound_keys(first.end_s + 10) == 0
    placed(c.submit(request(), first.end_s + 10))
    again = placed(c.submit(request(header="s"), first.end_s + 10))
    assert again.affinity == "header-bound"
    assert again.worker_id != first.worker_id


def test_siblings_share_their_parent_groups_worker_while_the_parent_keeps_its_own() -> None:
    c = cluster(workers=4, header_affinity_ttl_s=60)
    parent = placed(c.submit(request(header="p"), 0.0))
    first_child = placed(c.submit(request(header="c1", parent="p"), 1.0))
    second_child = placed(c.submit(request(header="c2", parent="p"), 2.0))
    assert second_child.worker_id == first_child.worker_id
    assert first_child.worker_id != parent.worker_id  # the group binds where it first lands
    assert placed(c.submit(request(header="p"), 3.0)).worker_id == parent.worker_id


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


def test_header_binding_to_a_downed_worker_is_dropped() -> None:
    c = cluster(workers=2, header_affinity_ttl_s=60)
    first = placed(c.submit(request(header="s"), 0.0))
    c.worker_down(first.worker_id, 1.0)
    again = placed(c.submit(request(header="s"), 2.0))
    assert again.worker_id != first.worker_id
    assert again.affinity == "header-bound"
