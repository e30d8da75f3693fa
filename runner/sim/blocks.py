"""Prompt block identities for the simulator: trace hash ids to the cluster's chained keys.

A trace names prompt blocks of its own size (64 tokens for Claude Code, 512 for Mooncake); the
cluster caches blocks of its size. Each cluster block is named by the trace blocks it covers
and its offset, chained from a seed unique to the replayed tree instance, so two lanes
replaying one trace never share cache (PRODUCT.md §4.1). A session's next turn mostly extends
its previous prompt, so its keys extend the previous keys and only new blocks are hashed.
"""

from __future__ import annotations

from runner.cluster import BlockPart, chain_block_keys
from runner.trace.model import Turn

__all__ = ["BlockKeys"]

_Keyed = tuple[tuple[BlockPart, ...], tuple[int, ...]]


class BlockKeys:
    def __init__(self, *, trace_block_tokens: int, cluster_block_tokens: int) -> None:
        self.trace_block = trace_block_tokens
        self.cluster_block = cluster_block_tokens
        self._parts: dict[int, tuple[BlockPart, ...]] = {}
        self._turns: list[Turn] = []  # keeps cached turns alive so their ids stay unique
        # Per session instance: the parts and keys of its latest prompt; per tree instance:
        # those of the latest child's first prompt (siblings share their system prefix).
        self._latest: dict[str, _Keyed] = {}
        self._latest_child: dict[int, _Keyed] = {}
        # Shared-prefix lengths between two template prompts, by the ids of their cached parts:
        # every replayed instance asks the same questions, so each is answered once.
        self._shared: dict[tuple[int, int], int] = {}

    def keys(
        self,
        turn: Turn,
        *,
        session_id: str,
        parent_id: str | None,
        seed: int,
        final: bool,
    ) -> tuple[int, ...]:
        """Chained keys of `turn`'s full blocks, in the tree instance seeded by `seed`.

        Extends the keys of the most similar prompt already keyed in the same instance (the
        session's previous turn, else its parent's latest turn or a sibling's first turn), so
        only new blocks are hashed.
        """
        parts = self._parts_of(turn)
        previous = self._latest.get(session_id)
        if previous is None:
            first_turn = True
            candidates = (
                self._latest.get(parent_id) if parent_id else None,
                self._latest_child.get(seed),
            )
        else:
            first_turn = False
            candidates = (previous, None)
        keys = self._extend(parts, candidates, seed)
        if final:
            self._latest.pop(session_id, None)
        else:
            self._latest[session_id] = (parts, keys)
        if first_turn and parent_id is not None:
            self._latest_child[seed] = (parts, keys)
        return keys

    def forget_tree(self, seed: int) -> None:
        self._latest_child.pop(seed, None)

    def _extend(
        self,
        parts: tuple[BlockPart, ...],
        candidates: tuple[_Keyed | None, _Keyed | None],
        seed: int,
    ) -> tuple[int, ...]:
        best_shared = 0
        best_keys: tuple[int, ...] = ()
        memo = self._shared
        for candidate in candidates:
            if candidate is None:
                continue
            old_parts, old_keys = candidate
            pair = (id(old_parts), id(parts))
            shared = memo.get(pair, -1)
            if shared < 0:
                shared = memo[pair] = _shared_prefix(old_parts, parts)
            if shared > best_shared:
                best_shared, best_keys = shared, old_keys
        if not best_shared:
            return chain_block_keys(parts, seed=seed)
        if best_shared == len(parts) == len(best_keys):
            return best_keys
        return best_keys[:best_shared] + chain_block_keys(
            parts[best_shared:], seed=best_keys[best_shared - 1]
        )

    def forget(self, session_id: str) -> None:
        self._latest.pop(session_id, None)

    def _parts_of(self, turn: Turn) -> tuple[BlockPart, ...]:
        parts = self._parts.get(id(turn))
        if parts is None:
            parts = self._parts[id(turn)] = self._template_parts(turn)
            self._turns.append(turn)
        return parts

    def _template_parts(self, turn: Turn) -> tuple[BlockPart, ...]:
        hash_ids = turn.hash_ids
        trace_block = self.trace_block
        cluster_block = self.cluster_block
        # Only cluster blocks fully covered by hashed tokens can ever be shared; an unhashed
        # tail is unique to its request.
        hashed_tokens = min(turn.input_tokens, len(hash_ids) * trace_block)
        blocks = hashed_tokens // cluster_block
        if trace_block == cluster_block:
            return tuple(hash_ids[:blocks])
        parts: list[BlockPart] = []
        for i in range(blocks):
            start = i * cluster_block
            first = start // trace_block
            last = (start + cluster_block - 1) // trace_block
            parts.append((*hash_ids[first : last + 1], start % trace_block))
        return tuple(parts)


def _shared_prefix(a: tuple[BlockPart, ...], b: tuple[BlockPart, ...]) -> int:
    """Length of the common leading run; tuple comparisons run in C, so bisect on them."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo
