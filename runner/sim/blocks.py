"""Prompt block identities for the simulator: trace hash ids to the cluster's chained keys.

A trace names prompt blocks of its own size (64 tokens for Claude Code, 512 for Mooncake); the
cluster caches blocks of its size. Each cluster block is named by the trace blocks it covers
and its offset, chained from the start, and salted per replayed tree instance so two lanes
replaying one trace never share cache (PRODUCT.md §4.1). Keys of a trace turn are computed once
and cached; salting is one XOR per block.
"""

from __future__ import annotations

from runner.cluster import chain_block_keys
from runner.trace.model import Turn

__all__ = ["BlockKeys"]


class BlockKeys:
    def __init__(self, *, trace_block_tokens: int, cluster_block_tokens: int) -> None:
        self.trace_block = trace_block_tokens
        self.cluster_block = cluster_block_tokens
        self._by_turn: dict[int, tuple[int, ...]] = {}
        self._turns: list[Turn] = []  # keeps cached turns alive so their ids stay unique

    def keys(self, turn: Turn, *, salt: int) -> tuple[int, ...]:
        base = self._by_turn.get(id(turn))
        if base is None:
            base = self._by_turn[id(turn)] = self._template_keys(turn)
            self._turns.append(turn)
        if not salt:
            return base
        return tuple([key ^ salt for key in base])

    def _template_keys(self, turn: Turn) -> tuple[int, ...]:
        hash_ids = turn.hash_ids
        trace_block = self.trace_block
        cluster_block = self.cluster_block
        # Only cluster blocks fully covered by hashed tokens can ever be shared; an unhashed
        # tail is unique to its request.
        hashed_tokens = min(turn.input_tokens, len(hash_ids) * trace_block)
        blocks = hashed_tokens // cluster_block
        if trace_block == cluster_block:
            return chain_block_keys(hash_ids[:blocks])
        parts: list[tuple[int, ...]] = []
        for i in range(blocks):
            start = i * cluster_block
            first = start // trace_block
            last = (start + cluster_block - 1) // trace_block
            parts.append((*hash_ids[first : last + 1], start % trace_block))
        return chain_block_keys(parts)
