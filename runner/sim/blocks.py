"""Prompt block identities for the simulator: trace hash ids to the cluster's chained keys.

A trace names prompt blocks of its own size (64 tokens for Claude Code, 512 for Mooncake); the
cluster caches blocks of its size. Each cluster block is named by the trace blocks it covers
and its offset, chained from the start. The chain depends only on the trace turn, so it is
computed once per trace turn (extending the session's previous turn) and shared by every
replayed instance; instances are kept apart by the cluster request's `scope`, not by keys.
"""

from __future__ import annotations

from runner.cluster import BlockPart, chain_block_keys
from runner.trace.model import Tree, Turn

__all__ = ["BlockKeys"]


class BlockKeys:
    def __init__(self, *, trace_block_tokens: int, cluster_block_tokens: int) -> None:
        self.trace_block = trace_block_tokens
        self.cluster_block = cluster_block_tokens
        # By id() of a trace turn: its parts and chained keys. `_turns` keeps the turns
        # alive so their ids are never reused while cached.
        self._keyed: dict[int, tuple[tuple[BlockPart, ...], tuple[int, ...]]] = {}
        self._turns: list[Turn] = []

    def keys(self, tree: Tree, session_id: str, turn_index: int) -> tuple[int, ...]:
        """Chained keys of the full blocks of turn `turn_index` of trace session `session_id`."""
        turn = tree.sessions[session_id].turns[turn_index]
        keyed = self._keyed.get(id(turn))
        if keyed is not None:
            return keyed[1]
        parts = self._parts(turn)
        previous = None
        if turn_index > 0:
            previous = self._keyed.get(id(tree.sessions[session_id].turns[turn_index - 1]))
        if previous is None:
            keys = chain_block_keys(parts)
        else:
            old_parts, old_keys = previous
            shared = _shared_prefix(old_parts, parts)
            if shared:
                keys = old_keys[:shared] + chain_block_keys(
                    parts[shared:], seed=old_keys[shared - 1]
                )
            else:
                keys = chain_block_keys(parts)
        self._keyed[id(turn)] = (parts, keys)
        self._turns.append(turn)
        return keys

    def _parts(self, turn: Turn) -> tuple[BlockPart, ...]:
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
