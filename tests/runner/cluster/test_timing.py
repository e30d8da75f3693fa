"""The analytic timing model: slots and queueing, prefill, decode, prefix hits, cancel."""

from __future__ import annotations

import pytest

from runner.cluster import ClusterConfig, chain_block_keys
from tests.runner.cluster.builders import BLOCK, blocks, cluster, placed, request

CONFIG = ClusterConfig()


def _prefill_s(tokens: int) -> float:
    return CONFIG.prefill_ms(tokens) / 1000


def _itl_s(kv_blocks: int, capacity_blocks: int = 16384) -> float:
    return CONFIG.decode_ms(kv_blocks / capacity_blocks) / 1000


def test_first_token_comes_after_the_prefill_and_each_later_token_after_one_decode_step() -> None:
    c = cluster(workers=1)
    p = placed(c.submit(request(prompt_tokens=1000, output_tokens=11), now_s=100.0))
    assert p.queued_s == 0
    assert p.ttft_s == pytest.approx(_prefill_s(1000))
    kv_blocks = -(-1011 // BLOCK)
    assert p.itl_s == pytest.approx(_itl_s(kv_blocks))
    assert p.end_s == pytest.approx(100.0 + p.ttft_s + 10 * p.itl_s)


def test_decode_step_grows_with_the_kv_the_worker_holds() -> None:
    c = cluster(workers=1, capacity_blocks=1000)
    small = placed(c.submit(request(prompt_tokens=64, output_tokens=10_000), 0.0))
    big = placed(c.submit(request(prompt_tokens=500 * BLOCK, output_tokens=10), 0.0))
    assert big.itl_s > small.itl_s
    held_blocks = -(-(64 + 10_000) // BLOCK) + -(-(500 * BLOCK + 10) // BLOCK)
    assert big.itl_s == pytest.approx(_itl_s(held_blocks, 1000))


def test_kv_usage_is_capped_at_full() -> None:
    c = cluster(workers=1, capacity_blocks=10)
    p = placed(c.submit(request(prompt_tokens=100 * BLOCK, output_tokens=2), 0.0))
    assert p.itl_s == pytest.approx(CONFIG.decode_ms(1.0) / 1000)


def test_prefills_on_one_worker_run_one_after_another() -> None:
    c = cluster(workers=1)
    first = placed(c.submit(request(prompt_tokens=2000), 0.0))
    second = placed(c.submit(request(prompt_tokens=1000), 0.0))
    assert second.queued_s == 0  # it has a slot, but waits for the prefill queue
    assert second.ttft_s == pytest.approx(first.ttft_s + _prefill_s(1000))


def test_queue_waits_for_the_earliest_slot() -> None:
    c = cluster(workers=1, max_num_seqs=2)
    long = placed(c.submit(request(prompt_tokens=100, output_tokens=1000), 0.0))
    short = placed(c.submit(request(prompt_tokens=100, output_tokens=10), 0.0))
    third = placed(c.submit(request(prompt_tokens=100, output_tokens=10), 0.0))
    assert short.end_s < long.end_s
    assert third.queued_s == pytest.approx(short.end_s)
    assert third.ttft_s == pytest.approx(short.end_s + _prefill_s(100))


def test_queued_requests_take_slots_in_arrival_order() -> None:
    c = cluster(workers=1, max_num_seqs=1)
    first = placed(c.submit(request(prompt_tokens=100, output_tokens=100), 0.0))
    second = placed(c.submit(request(prompt_tokens=100, output_tokens=100), 0.1))
    third = placed(c.submit(request(prompt_tokens=100, output_tokens=100), 0.2))
    assert second.queued_s == pytest.approx(first.end_s - 0.1)
    assert third.queued_s == pytest.approx(second.end_s - 0.2)


def test_a_finished_request_frees_its_slot_without_any_call() -> None:
    c = cluster(workers=1, max_num_seqs=1)
    first = placed(c.submit(request(prompt_tokens=100, output_tokens=5), 0.0))
    later = placed(c.submit(request(prompt_tokens=100, output_tokens=5), first.end_s + 1))
    assert later.queued_s == 0


def test_cached_prompt_prefills_faster() -> None:
    c = cluster(workers=1)
    keys = blocks(200)
    cold = placed(c.submit(request(keys, prompt_tokens=200 * BLOCK + 30), 0.0))
    warm = placed(c.submit(request(keys, prompt_tokens=200 * BLOCK + 30), cold.end_s + 1))
    assert cold.cached_tokens == 0
    assert warm.cached_tokens == 200 * BLOCK
    assert warm.ttft_s == pytest.approx(_prefill_s(30))
    assert warm.ttft_s < cold.ttft_s / 10


def test_a_fully_cached_block_aligned_prompt_recomputes_its_last_block() -> None:
    # vLLM caps a hit at prompt_tokens - 1 to compute the last token's logits; only full
    # blocks hit, so the last block is prefilled again.
    c = cluster(workers=1)
    keys = blocks(10)
    first = placed(c.submit(request(keys, prompt_tokens=10 * BLOCK), 0.0))
    again = placed(c.submit(request(keys, prompt_tokens=10 * BLOCK), first.end_s))
    assert again.cached_tokens == 9 * BLOCK
    assert again.ttft_s == pytest.approx(_prefill_s(BLOCK))


def test_prefix_hit_counts_only_leading_resident_blocks() -> None:
    c = cluster(workers=1)
    placed(c.submit(request(blocks(10)), 0.0))
    # Blocks 0-2 shared; then a different block 3; blocks 4-9 have the same contents but a
    # different prefix, so they are different blocks.
    keys = chain_block_keys([0, 1, 2, 99, 4, 5, 6, 7, 8, 9])
    p = placed(c.submit(request(keys), 10.0))
    assert p.cached_tokens == 3 * BLOCK
    shifted = placed(c.submit(request(blocks(10, start=1)), 20.0))
    assert shifted.cached_tokens == 0


def test_sibling_arriving_during_prefill_does_not_hit() -> None:
    c = cluster(workers=1)
    keys = blocks(100)
    parent = placed(c.submit(request(keys), 0.0))
    during = placed(c.submit(request(keys), parent.ttft_s / 2))
    after = placed(c.submit(request(keys), parent.ttft_s))
    assert during.cached_tokens == 0
    assert after.cached_tokens == 100 * BLOCK


def test_lru_evicts_least_recent_block_when_full() -> None:
    c = cluster(workers=1, capacity_blocks=20)
    a, b, c_keys = blocks(10, start=0), blocks(10, start=100), blocks(10, start=200)
    placed(c.submit(request(a), 0.0))
    placed(c.submit(request(b), 1.0))
    placed(c.submit(request(a), 2.0))  # a is used again: b is now the least recent
    placed(c.submit(request(c_keys), 3.0))
    assert placed(c.submit(request(a), 4.0)).cached_tokens == 10 * BLOCK
    assert placed(c.submit(request(b), 5.0)).cached_tokens == 0
    assert c.stats(5.0)["workers"][0]["cache_blocks_used"] == 20


def test_cache_is_per_worker() -> None:
    c = cluster(workers=2)
    keys = blocks(10)
    first = placed(c.submit(request(keys), 0.0))
    other = placed(c.submit(request(keys), 5.0))  # round-robin: the other worker
    assert first.worker_id != other.worker_id
    assert other.cached_tokens == 0


def test_cache_is_per_dp_rank() -> None:
    c = cluster(workers=1, dp_ranks=2)
    keys = blocks(10)
    first = placed(c.submit(request(keys), 0.0))
    other = placed(c.submit(request(keys), 5.0))
    assert (first.dp_rank, other.dp_rank) == (0, 1)
    assert other.cached_tokens == 0


def test_zero_time_scale_gives_zero_latency() -> None:
    c = cluster(workers=1, time_scale=0, max_num_seqs=1)
    for i in range(3):
        p = placed(c.submit(request(blocks(50), output_tokens=100), 7.0))
        assert (p.queued_s, p.ttft_s, p.itl_s, p.end_s) == (0, 0, 0, 7.0)
        assert p.cached_tokens == (0 if i == 0 else 50 * BLOCK)


def test_time_scale_multiplies_every_modelled_duration() -> None:
    normal = placed(cluster(workers=1).submit(request(prompt_tokens=3000, output_tokens=9), 0))
    fast = placed(
        cluster(workers=1, time_scale=0.25).submit(request(prompt_tokens=3000, output_tokens=9), 0)
    )
    assert fast.ttft_s == pytest.approx(normal.ttft_s / 4)
    assert fast.itl_s == pytest.approx(normal.itl_s / 4)


def test_cancel_frees_the_slot_for_the_next_request() -> None:
    c = cluster(workers=1, max_num_seqs=1)
    long = request(prompt_tokens=100, output_tokens=10_000)
    placed(c.submit(long, 0.0))
    assert c.cancel(long.request_id, 1.0)
    assert placed(c.submit(request(prompt_tokens=100), 1.0)).queued_s == 0
    assert c.stats(1.0)["workers"][0]["running"] == 1


def test_cancel_of_a_queued_request_frees_its_slot_when_it_would_have_started() -> None:
    c = cluster(workers=1, max_num_seqs=1)
    first = placed(c.submit(request(prompt_tokens=100, output_tokens=100), 0.0))
    queued = request(prompt_tokens=100, output_tokens=100)
    placed(c.submit(queued, 0.0))
    assert c.cancel(queued.request_id, 0.1)
    later = placed(c.submit(request(prompt_tokens=100), 0.2))
    assert later.queued_s == pytest.approx(first.end_s - 0.2)


def test_cancel_of_an_unknown_or_finished_request_returns_false() -> None:
    c = cluster(workers=1)
    r = request(prompt_tokens=100, output_tokens=2)
    p = placed(c.submit(r, 0.0))
    assert not c.cancel("nobody", 0.0)
    assert not c.cancel(r.request_id, p.end_s + 1)


def test_a_clock_going_backwards_is_treated_as_the_latest_time_seen() -> None:
    c = cluster(workers=1, max_num_seqs=1)
    first = placed(c.submit(request(prompt_tokens=100, output_tokens=100), 10.0))
    late = placed(c.submit(request(prompt_tokens=100), 5.0))
    assert late.queued_s == pytest.approx(first.end_s - 10.0)
