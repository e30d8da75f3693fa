"""The frontend's router modes, and workers going down and up."""

from __future__ import annotations

import pytest

from runner.cluster import Cluster
from tests.runner.cluster.builders import (
    BLOCK,
    blocks,
    cluster,
    placed,
    rejected,
    request,
    workers_of,
)


def test_round_robin_cycles_over_up_workers() -> None:
    c = cluster(workers=3)
    assert workers_of(c, [request() for _ in range(4)]) == [0, 1, 2, 0]
    c.worker_down(1, 0.0)
    assert workers_of(c, [request() for _ in range(4)]) == [2, 0, 2, 0]
    c.worker_up(1, 0.0)
    assert workers_of(c, [request() for _ in range(3)]) == [1, 2, 0]


def test_round_robin_visits_every_worker_before_a_second_rank() -> None:
    c = cluster(workers=2, dp_ranks=2)
    placements = [placed(c.submit(request(), 0.0)) for _ in range(4)]
    assert [(p.worker_id, p.dp_rank) for p in placements] == [(0, 0), (1, 0), (0, 1), (1, 1)]


def test_random_router_is_reproducible_from_its_seed_and_skips_down_workers() -> None:
    def run(seed: int) -> list[int]:
        c = cluster(workers=4, router="random", seed=seed)
        c.worker_down(2, 0.0)
        return workers_of(c, [request() for _ in range(40)])

    assert run(1) == run(1)
    assert run(1) != run(2)
    assert set(run(1)) == {0, 1, 3}


def test_least_loaded_picks_the_worker_with_fewest_requests_in_flight() -> None:
    c = cluster(workers=3, router="least-loaded")
    long = [request(output_tokens=1000) for _ in range(2)]
    assert workers_of(c, long) == [0, 1]  # ties go to the lowest worker id
    assert workers_of(c, [request(output_tokens=1000)], 0.1) == [2]
    # Every worker holds one; the next tie goes to worker 0 again.
    assert workers_of(c, [request()], 0.2) == [0]


def test_least_loaded_forgets_requests_that_have_ended() -> None:
    c = cluster(workers=2, router="least-loaded")
    first = placed(c.submit(request(output_tokens=10), 0.0))
    assert first.worker_id == 0
    assert workers_of(c, [request()], first.end_s) == [0]


def _holder_of(keys: tuple[int, ...], router: str, **config: object) -> tuple[Cluster, float]:
    """A cluster where worker 1 (not the tie-break favourite 0) holds `keys`: an unrelated
    long request makes worker 0 busy while `keys` is routed."""
    c = cluster(workers=3, router=router, **config)
    busy = placed(c.submit(request(blocks(5, start=10_000), output_tokens=200), 0.0))
    holder = placed(c.submit(request(keys, output_tokens=2), 0.0))
    assert (busy.worker_id, holder.worker_id) == (0, 1)
    return c, max(busy.end_s, holder.end_s)


def test_kv_router_prefers_the_worker_holding_the_prefix() -> None:
    keys = blocks(40)
    c, idle_s = _holder_of(keys, "kv")
    extended = keys + blocks(5, start=500)
    p = placed(c.submit(request(extended), idle_s + 1))
    assert (p.worker_id, p.cached_tokens) == (1, 40 * BLOCK)


def test_kv_router_weighs_the_prefix_against_load() -> None:
    keys = blocks(10)
    c, idle_s = _holder_of(keys, "kv")
    # A long request extending the prefix goes to its holder and loads it with far more KV
    # than the 10 blocks the prefix would save the next request.
    loader = request(keys + blocks(90, start=777), output_tokens=5000)
    assert placed(c.submit(loader, idle_s)).worker_id == 1
    assert placed(c.submit(request(keys), idle_s)).worker_id == 0


@pytest.mark.parametrize(("router", "expected_worker"), [("kv", 1), ("kv-approx", 0)])
def test_a_sibling_during_the_parents_prefill_follows_it_only_under_kv_approx(
    router: str, expected_worker: int
) -> None:
    # kv sees blocks once their prefill has stored them (KV events); kv-approx believes its
    # own routing decision at once.
    c = cluster(workers=2, router=router)
    keys = blocks(200)
    parent = placed(c.submit(request(keys, output_tokens=2), 0.0))
    loader = placed(c.submit(request(blocks(100, start=9000), output_tokens=1000), 0.0))
    assert (parent.worker_id, loader.worker_id) == (0, 1)
    sibling = placed(c.submit(request(keys, output_tokens=2), parent.ttft_s / 2))
    assert sibling.worker_id == expected_worker
    assert sibling.cached_tokens == 0  # either way, nothing is computed yet


def test_kv_approx_forgets_after_ttl() -> None:
    keys = blocks(40)
    c, idle_s = _holder_of(keys, "kv-approx", kv_approx_ttl_s=120)
    assert placed(c.submit(request(keys), idle_s + 60)).worker_id == 1  # refreshed at +60
    assert placed(c.submit(request(keys), idle_s + 60 + 119)).worker_id == 1
    forgotten = placed(c.submit(request(keys), idle_s + 60 + 119 + 121))
    assert forgotten.worker_id == 0
    # The real cache still held the blocks: only the router's prediction expired.


def test_worker_down_returns_its_requests_in_flight_and_loses_its_cache() -> None:
    c = cluster(workers=2)
    keys = blocks(10)
    running = request(keys, output_tokens=1000)
    placed(c.submit(running, 0.0))
    placed(c.submit(request(), 0.0))
    assert c.worker_down(0, 1.0) == (running.request_id,)
    assert c.worker_down(0, 1.0) == ()  # already down
    assert not c.worker_is_up(0)
    assert not c.cancel(running.request_id, 1.0)
    c.worker_up(0, 2.0)
    c.worker_down(1, 2.0)
    after = placed(c.submit(request(keys), 3.0))
    assert (after.worker_id, after.cached_tokens) == (0, 0)
    stats = c.stats(3.0)["workers"][0]
    assert (stats["up"], stats["running"], stats["cache_blocks_used"]) == (True, 1, 10)


def test_unknown_worker_ids_are_refused() -> None:
    c = cluster(workers=2)
    with pytest.raises(ValueError, match="no worker 2"):
        c.worker_down(2, 0.0)
    with pytest.raises(ValueError, match="no worker -1"):
        c.worker_up(-1, 0.0)


@pytest.mark.parametrize("router", ["round-robin", "random", "least-loaded", "kv", "kv-approx"])
def test_with_every_worker_down_requests_get_503(router: str) -> None:
    c = cluster(workers=2, router=router)
    c.worker_down(0, 0.0)
    c.worker_down(1, 0.0)
    rejection = rejected(c.submit(request(), 0.0))
    assert (rejection.status, rejection.message) == (503, "no inference worker is up")
