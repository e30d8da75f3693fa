"""Dynamo's `nvext.session_control` affinity (docs/engine.md, docs/product.md §4.8)."""

from __future__ import annotations

import pytest

from tests.runner.cluster.builders import (
    bind,
    close,
    cluster,
    follow,
    open_,
    placed,
    rejected,
    request,
    workers_of,
)

_BIND_REJECTED_BY_12 = (
    "Failed to deserialize the JSON body into the target type: nvext.session_control.action: "
    "unknown variant `bind`, expected `open` or `close`"
)


def test_bind_pins_every_later_request_to_the_bound_worker() -> None:
    c = cluster(workers=4)
    first = placed(c.submit(request(control=bind("s")), 0.0))
    assert first.affinity == "bound"
    placements = [
        placed(c.submit(request(control=ctl), t))
        for t, ctl in [(1.0, follow("s")), (2.0, bind("s")), (3.0, follow("s")), (4.0, bind("s"))]
    ]
    assert {p.worker_id for p in placements} == {first.worker_id}
    assert [p.affinity for p in placements] == ["followed", "bound", "followed", "bound"]
    # Unbound traffic keeps rotating over every worker meanwhile.
    assert sorted(workers_of(c, [request() for _ in range(4)], 5.0)) == [0, 1, 2, 3]


def test_bind_pins_the_dp_rank_too() -> None:
    c = cluster(workers=2, dp_ranks=2)
    placed(c.submit(request(), 0.0))  # round-robin moves on to (worker 1, rank 0)
    first = placed(c.submit(request(control=bind("s")), 0.0))
    again = [placed(c.submit(request(control=follow("s")), 1.0)) for _ in range(3)]
    assert {(p.worker_id, p.dp_rank) for p in again} == {(first.worker_id, first.dp_rank)}


def test_dynamo_12_rejects_bind_with_http_400() -> None:
    c = cluster(dynamo_version="1.2")
    rejection = rejected(c.submit(request(control=bind("s")), 0.0))
    assert rejection.status == 400
    assert rejection.message == _BIND_REJECTED_BY_12
    assert c.stats(0.0)["totals"]["rejections"] == {"400": 1}
    assert c.stats(0.0)["totals"]["requests"] == 0


def test_dynamo_12_accepts_open_then_bare_session_id_then_close() -> None:
    c = cluster(workers=3, dynamo_version="1.2")
    opened = placed(c.submit(request(control=open_("s")), 0.0))
    followed = placed(c.submit(request(control=follow("s")), 1.0))
    closed = placed(c.submit(request(control=close("s")), 2.0))
    assert (opened.affinity, followed.affinity, closed.affinity) == ("opened", "followed", "closed")
    assert opened.worker_id == followed.worker_id == closed.worker_id
    assert c.bound_keys(2.0) == 0


def test_bind_era_accepts_open_like_bind() -> None:
    c = cluster(workers=3)
    opened = placed(c.submit(request(control=open_("s")), 0.0))
    followed = placed(c.submit(request(control=follow("s")), 1.0))
    assert opened.worker_id == followed.worker_id
    assert followed.affinity == "followed"


@pytest.mark.parametrize(
    ("version", "expected"),
    [("1.2", "expected `open` or `close`"), ("bind", "expected one of `open`, `bind`, `close`")],
)
def test_unknown_action_is_rejected_with_http_400(version: str, expected: str) -> None:
    c = cluster(dynamo_version=version)
    rejection = rejected(c.submit(request(control={"session_id": "s", "action": "pin"}), 0.0))
    assert rejection.status == 400
    assert rejection.message.endswith(
        f"nvext.session_control.action: unknown variant `pin`, {expected}"
    )


@pytest.mark.parametrize(
    ("control", "problem"),
    [
        ({"action": "bind"}, "nvext.session_control: missing field `session_id`"),
        ({"session_id": 7}, "session_id: invalid type: integer `7`, expected a string"),
        ({"session_id": "s", "timeout": 1.5}, "timeout: invalid type: floating point `1.5`"),
        ({"session_id": "s", "timeout": "300"}, 'timeout: invalid type: string "300"'),
        ({"session_id": "s", "timeout": -1}, "timeout: invalid value: integer `-1`, expected u64"),
        ({"session_id": "s", "timeout": True}, "timeout: invalid type: boolean `true`"),
        ({"session_id": "s", "action": 3}, "action: invalid type: integer `3`"),
        ("s", 'invalid type: string "s", expected struct SessionControl'),
    ],
)
def test_malformed_session_control_is_rejected_with_http_400(control: object, problem: str) -> None:
    rejection = rejected(cluster().submit(request(control=control), 0.0))
    assert rejection.status == 400
    assert rejection.message.startswith("Failed to deserialize the JSON body into the target type:")
    assert problem in rejection.message


def test_null_action_is_a_bare_session_id() -> None:
    c = cluster(workers=3)
    first = placed(c.submit(request(control=bind("s")), 0.0))
    again = placed(c.submit(request(control={"session_id": "s", "action": None}), 1.0))
    assert (again.worker_id, again.affinity) == (first.worker_id, "followed")


def test_close_routes_to_the_bound_worker_then_unbinds() -> None:
    c = cluster(workers=4)
    bound = placed(c.submit(request(control=bind("s")), 0.0))
    placed(c.submit(request(), 0.0))  # move round-robin on
    closing = placed(c.submit(request(control=close("s")), 1.0))
    assert (closing.worker_id, closing.affinity) == (bound.worker_id, "closed")
    assert c.bound_keys(1.0) == 0
    after = placed(c.submit(request(control=follow("s")), 2.0))
    assert after.affinity == "none"
    worker = c.stats(2.0)["workers"][bound.worker_id]
    assert (worker["binds"], worker["closes"], worker["bound_keys"]) == (1, 1, 0)


def test_close_without_a_binding_is_routed_normally_and_counted_as_a_miss() -> None:
    c = cluster(workers=2)
    p = placed(c.submit(request(control=close("nobody")), 0.0))
    assert p.affinity == "none"
    totals = c.stats(0.0)["totals"]
    assert (totals["closes"], totals["close_misses"]) == (0, 1)


def test_a_child_closing_a_lineage_key_unbinds_it_for_the_whole_tree() -> None:
    # The lineage hazard of §1.2: every session of the tree binds the root's id, so any
    # child's close removes the binding the root and its siblings rely on.
    c = cluster(workers=4)
    root = placed(c.submit(request(control=bind("root")), 0.0))
    child = placed(c.submit(request(control=bind("root")), 1.0))
    assert child.worker_id == root.worker_id
    placed(c.submit(request(control=close("root")), 2.0))
    assert placed(c.submit(request(control=follow("root")), 3.0)).affinity == "none"


def test_bare_session_id_creates_no_binding() -> None:
    c = cluster(workers=4)
    placements = [placed(c.submit(request(control=follow("s")), float(t))) for t in range(4)]
    assert sorted(p.worker_id for p in placements) == [0, 1, 2, 3]
    assert {p.affinity for p in placements} == {"none"}
    assert c.bound_keys(4.0) == 0


def test_bare_session_id_slides_the_binding_ttl() -> None:
    c = cluster(workers=4)
    first = placed(c.submit(request(control=bind("s", timeout=10)), 0.0))
    assert placed(c.submit(request(control=follow("s")), 8.0)).worker_id == first.worker_id
    # 15 s after the bind, but only 7 s after the last use: still bound.
    later = placed(c.submit(request(control=follow("s")), 15.0))
    assert (later.worker_id, later.affinity) == (first.worker_id, "followed")


def test_bind_overwrites_the_timeout_and_refreshes_the_ttl() -> None:
    c = cluster(workers=4)
    placed(c.submit(request(control=bind("s", timeout=100)), 0.0))
    placed(c.submit(request(control=bind("s", timeout=5)), 1.0))
    assert c.bound_keys(5.9) == 1
    assert c.bound_keys(6.0) == 0


def test_default_timeout_is_300_seconds() -> None:
    c = cluster()
    placed(c.submit(request(control=bind("s")), 0.0))
    assert c.bound_keys(299.9) == 1
    assert c.bound_keys(300.0) == 0


def test_binding_expires_after_its_ttl_and_the_sweep_counts_it() -> None:
    c = cluster(workers=4, session_sweep_s=30)
    bound = placed(c.submit(request(control=bind("s", timeout=10)), 0.0))
    # Expired at 10 s: no longer counted, but the reaper has not run yet.
    stats = c.stats(20.0)
    assert (stats["totals"]["bound_keys"], stats["totals"]["expiries"]) == (0, 0)
    # The sweep at 30 s (one period after the first call) removes and counts it.
    stats = c.stats(30.0)
    assert stats["totals"]["expiries"] == 1
    assert stats["workers"][bound.worker_id]["expiries"] == 1


def test_an_expired_binding_is_dropped_at_access_before_the_sweep() -> None:
    c = cluster(workers=4, session_sweep_s=1000)
    bound = placed(c.submit(request(control=bind("s", timeout=10)), 0.0))
    placed(c.submit(request(), 0.0))
    later = placed(c.submit(request(control=follow("s")), 10.0))
    assert later.affinity == "none"
    assert later.worker_id != bound.worker_id
    assert c.stats(10.0)["totals"]["expiries"] == 1


def test_binding_to_a_downed_worker_is_dropped() -> None:
    c = cluster(workers=3)
    bound = placed(c.submit(request(control=bind("s")), 0.0))
    c.worker_down(bound.worker_id, 1.0)
    assert c.bound_keys(1.0) == 0
    assert c.stats(1.0)["workers"][bound.worker_id]["bindings_dropped"] == 1
    bare = placed(c.submit(request(control=follow("s")), 2.0))
    assert bare.worker_id != bound.worker_id
    assert bare.affinity == "none"
    # The session binds again, now to a worker that is up.
    rebound = placed(c.submit(request(control=bind("s")), 3.0))
    assert placed(c.submit(request(control=follow("s")), 4.0)).worker_id == rebound.worker_id


def test_a_bound_worker_down_with_nothing_else_up_gives_503() -> None:
    c = cluster(workers=1)
    placed(c.submit(request(control=bind("s")), 0.0))
    c.worker_down(0, 1.0)
    rejection = rejected(c.submit(request(control=follow("s")), 2.0))
    assert rejection.status == 503
    assert c.stats(2.0)["totals"]["rejections"] == {"503": 1}


def test_session_control_is_honoured_in_every_router_mode_by_default() -> None:
    for router in ("round-robin", "random", "least-loaded", "kv", "kv-approx"):
        c = cluster(workers=4, router=router)
        first = placed(c.submit(request(control=bind("s"), output_tokens=500), 0.0))
        others = [placed(c.submit(request(control=follow("s")), 0.1)) for _ in range(3)]
        assert {p.worker_id for p in others} == {first.worker_id}, router


def test_without_honouring_only_kv_modes_use_session_control_like_real_dynamo() -> None:
    rr = cluster(workers=4, honour_session_control=False)
    placed(rr.submit(request(control=bind("s")), 0.0))
    assert sorted(workers_of(rr, [request(control=follow("s")) for _ in range(3)])) == [1, 2, 3]
    assert rr.bound_keys(0.0) == 0
    kv = cluster(workers=4, router="kv", honour_session_control=False)
    first = placed(kv.submit(request(control=bind("s"), output_tokens=500), 0.0))
    assert set(workers_of(kv, [request(control=follow("s")) for _ in range(3)])) == {
        first.worker_id
    }


def test_session_control_is_still_validated_when_not_honoured() -> None:
    c = cluster(dynamo_version="1.2", honour_session_control=False)
    assert rejected(c.submit(request(control=bind("s")), 0.0)).status == 400
