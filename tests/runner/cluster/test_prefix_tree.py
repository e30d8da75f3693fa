"""The prefix tree: matching, readiness, LRU eviction (checked against a naive block LRU)."""

from __future__ import annotations

import random
from collections import OrderedDict

from runner.cluster.keys import chain_block_keys
from runner.cluster.prefix_tree import PrefixTree
from tests.runner.cluster.builders import blocks


def _held(tree: PrefixTree, keys: tuple[int, ...], now_s: float = 0.0) -> int:
    return tree.match(keys, len(keys), ready_by_s=now_s)


def test_match_counts_the_leading_run_of_held_blocks() -> None:
    tree = PrefixTree(100)
    tree.touch(blocks(10), touched_s=0, ready_s=0)
    assert _held(tree, blocks(10)) == 10
    assert _held(tree, blocks(4)) == 4
    assert _held(tree, blocks(12)) == 10
    # Same contents from block 3 on, but a different block 2: only 2 blocks are shared.
    diverged = chain_block_keys([0, 1, 99, 3, 4, 5])
    assert _held(tree, diverged) == 2
    assert _held(tree, blocks(5, start=1)) == 0


def test_match_stops_at_the_limit() -> None:
    tree = PrefixTree(100)
    tree.touch(blocks(10), touched_s=0, ready_s=0)
    assert tree.match(blocks(10), 7) == 7


def test_a_divergent_prompt_splits_the_segment_and_both_stay_whole() -> None:
    tree = PrefixTree(100)
    a = blocks(10)
    b = chain_block_keys([0, 1, 2, 3, 50, 51])
    tree.touch(a, touched_s=0, ready_s=0)
    tree.touch(b, touched_s=1, ready_s=1)
    assert _held(tree, a, 1) == 10
    assert _held(tree, b, 1) == 6
    assert tree.blocks == 12


def test_blocks_being_computed_do_not_match_until_their_prefill_ends() -> None:
    tree = PrefixTree(100)
    tree.touch(blocks(4), touched_s=0, ready_s=0)
    tree.touch(blocks(10), touched_s=1, ready_s=5)  # blocks 4..9 ready at 5
    assert _held(tree, blocks(10), now_s=4.9) == 4
    assert _held(tree, blocks(10), now_s=5) == 10


def test_a_block_already_held_keeps_its_earlier_ready_time() -> None:
    tree = PrefixTree(100)
    tree.touch(blocks(6), touched_s=0, ready_s=2)
    tree.touch(blocks(6), touched_s=1, ready_s=9)  # recomputes them, but the first ends sooner
    assert _held(tree, blocks(6), now_s=2) == 6


def test_lru_evicts_the_least_recent_request_first() -> None:
    tree = PrefixTree(4)
    a, b, c = blocks(2, start=0), blocks(2, start=10), blocks(2, start=20)
    tree.touch(a, touched_s=0, ready_s=0)
    tree.touch(b, touched_s=1, ready_s=0)
    tree.touch(a, touched_s=2, ready_s=0)  # a is now more recent than b
    tree.touch(c, touched_s=3, ready_s=0)
    assert (_held(tree, a), _held(tree, b), _held(tree, c)) == (2, 0, 2)
    assert tree.blocks == 4


def test_lru_evicts_a_prompt_from_its_tail_so_its_head_still_hits() -> None:
    tree = PrefixTree(4)
    tree.touch(blocks(4), touched_s=0, ready_s=0)
    tree.touch(blocks(1, start=100), touched_s=1, ready_s=0)
    assert _held(tree, blocks(4)) == 3


def test_a_conversation_growing_turn_by_turn_stays_whole() -> None:
    tree = PrefixTree(1000)
    keys: tuple[int, ...] = ()
    for turn in range(20):
        keys = keys + chain_block_keys(
            range(turn * 10, turn * 10 + 10), seed=keys[-1] if keys else 0
        )
        assert _held(tree, keys) == turn * 10
        tree.touch(keys, touched_s=turn, ready_s=turn)
    assert tree.blocks == 200


def test_prune_forgets_segments_touched_before_the_cutoff() -> None:
    tree = PrefixTree(None)
    tree.touch(blocks(5), touched_s=0, ready_s=0)
    tree.touch(blocks(8), touched_s=10, ready_s=0)
    tree.prune(touched_by_s=5)
    # The first 5 blocks were touched again at 10 (as part of the longer prompt).
    assert _held(tree, blocks(8)) == 8
    tree.prune(touched_by_s=10)
    assert _held(tree, blocks(8)) == 0
    assert tree.blocks == 0


def test_touched_after_hides_stale_segments_without_pruning() -> None:
    tree = PrefixTree(None)
    tree.touch(blocks(3), touched_s=0, ready_s=0)
    tree.touch(blocks(6), touched_s=10, ready_s=0)
    assert tree.match(blocks(6), 6, touched_after_s=5) == 6
    assert tree.match(blocks(6), 6, touched_after_s=10) == 0


class _NaiveBlockLru:
    """The reference: every block in an OrderedDict; a request touches its blocks last to
    first (so its head is the most recent), then the least recent blocks are evicted."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.blocks: OrderedDict[int, None] = OrderedDict()

    def touch(self, keys: tuple[int, ...]) -> None:
        for key in reversed(keys):
            self.blocks[key] = None
            self.blocks.move_to_end(key)
        while len(self.blocks) > self.capacity:
            self.blocks.popitem(last=False)

    def match(self, keys: tuple[int, ...]) -> int:
        n = 0
        for key in keys:
            if key not in self.blocks:
                break
            n += 1
        return n


def test_eviction_order_equals_a_naive_block_level_lru() -> None:
    rng = random.Random(7)
    for capacity in (5, 17, 60):
        tree, naive = PrefixTree(capacity), _NaiveBlockLru(capacity)
        # A few system prompts, conversations that grow, and prompts cut at random points.
        prompts = [
            chain_block_keys(range(s * 1000, s * 1000 + rng.randint(1, 12))) for s in range(4)
        ]
        for step in range(3000):
            base = rng.choice(prompts)
            cut = base[: rng.randint(1, len(base))]
            extension = range(step * 100, step * 100 + rng.randint(0, 8))
            keys = cut + chain_block_keys(extension, seed=cut[-1])
            if rng.random() < 0.3:
                prompts.append(keys)
            assert tree.match(keys, len(keys)) == naive.match(keys), step
            tree.touch(keys, touched_s=step, ready_s=step)
            naive.touch(keys)
            assert tree.blocks == len(naive.blocks), step
        for keys in prompts:
            assert tree.match(keys, len(keys)) == naive.match(keys)
