"""Summary statistics of a loaded trace, as one plain JSON-able dict.

Owns what `inspect` prints and the scenario page shows on upload: counts of trees, sessions,
requests and children by mode, depth, span, token statistics and the ideal prefix-cache hit
ratio. It reads the model only; it never loads files.
"""

from __future__ import annotations

import bisect
import statistics
from typing import Any

from runner.trace.model import BranchMode, Trace

__all__ = ["inspect_trace"]


def _summary(values: list[int]) -> dict[str, float]:
    if not values:
        return {"mean": 0.0, "median": 0.0, "max": 0}
    return {
        "mean": round(statistics.fmean(values), 1),
        "median": float(statistics.median(values)),
        "max": max(values),
    }


def inspect_trace(trace: Trace) -> dict[str, Any]:
    """Counts and token statistics of `trace`.

    Keys: format, source, trees, sessions, requests, fork_children, spawn_children, max_depth,
    span_s (longest tree, start of the trace to the end of its last request), timestamped
    (every tree), block_sizes, input_tokens / output_tokens ({mean, median, max}),
    ideal_prefix_hit_ratio (share of hash blocks whose whole prefix chain an earlier request
    already sent: an infinite shared cache's block hit ratio), warnings (tolerated oddities).
    """
    sessions = fork_children = spawn_children = max_depth = 0
    inputs: list[int] = []
    outputs: list[int] = []
    # (start, tie-breaker, hash ids) of every request, to replay them in start order.
    timeline: list[tuple[float, int, tuple[int, ...]]] = []
    for tree in trace.trees:
        for session in tree.sessions.values():
            sessions += 1
            if session.mode is BranchMode.FORK:
                fork_children += 1
            elif session.mode is BranchMode.SPAWN:
                spawn_children += 1
            max_depth = max(max_depth, session.depth)
            for turn in session.turns:
                inputs.append(turn.input_tokens)
                outputs.append(turn.output_tokens)
                if turn.hash_ids:
                    timeline.append((turn.t_s, len(timeline), turn.hash_ids))
    return {
        "format": trace.format.value,
        "source": trace.source,
        "trees": len(trace.trees),
        "sessions": sessions,
        "requests": len(inputs),
        "fork_children": fork_children,
        "spawn_children": spawn_children,
        "max_depth": max_depth,
        "span_s": round(max((t.span_s for t in trace.trees), default=0.0), 3),
        "timestamped": all(t.timestamped for t in trace.trees),
        "block_sizes": sorted({t.block_size for t in trace.trees}),
        "input_tokens": _summary(inputs),
        "output_tokens": _summary(outputs),
        "ideal_prefix_hit_ratio": _ideal_prefix_hit_ratio(timeline),
        "warnings": int(trace.meta.get("warning_count", 0)),
    }


def _ideal_prefix_hit_ratio(timeline: list[tuple[float, int, tuple[int, ...]]]) -> float:
    """Blocks whose prefix chain was seen before / all blocks, requests in start order.

    A request's hits are its longest common prefix with any earlier request, and that is
    found at one of its two neighbours in the lexicographically sorted earlier requests; so
    the work is tuple comparisons and slices in C, not a Python step per block.
    """
    earlier = _SortedTuples()
    hits = total = 0
    for _, _, ids in sorted(timeline):
        below, above = earlier.neighbours(ids)
        best = 0
        if above is not None:
            best = _common_prefix(ids, above)
        if below is not None:
            best = max(best, _common_prefix(ids, below))
        hits += best
        total += len(ids)
        earlier.add(ids)
    return round(hits / total, 4) if total else 0.0


class _SortedTuples:
    """A sorted multiset of tuples with O(sqrt n) inserts: sorted chunks of at most CHUNK
    items (one flat list would move every later item on each insert: quadratic over a
    large trace)."""

    CHUNK = 1024

    def __init__(self) -> None:
        self._chunks: list[list[tuple[int, ...]]] = []
        self._firsts: list[tuple[int, ...]] = []  # each chunk's smallest item

    def _locate(self, item: tuple[int, ...]) -> tuple[int, int]:
        """(chunk, position) where `item` would be inserted (before any equal items)."""
        c = max(0, bisect.bisect_left(self._firsts, item) - 1)
        chunk = self._chunks[c]
        at = bisect.bisect_left(chunk, item)
        if at == len(chunk) and c + 1 < len(self._chunks):
            return c + 1, 0
        return c, at

    def neighbours(
        self, item: tuple[int, ...]
    ) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
        """The largest item below `item` and the smallest at or above it (None if none)."""
        if not self._chunks:
            return None, None
        c, at = self._locate(item)
        chunk = self._chunks[c]
        above = chunk[at] if at < len(chunk) else None
        if at > 0:
            below: tuple[int, ...] | None = chunk[at - 1]
        else:
            below = self._chunks[c - 1][-1] if c > 0 else None
        return below, above

    def add(self, item: tuple[int, ...]) -> None:
        if not self._chunks:
            self._chunks.append([item])
            self._firsts.append(item)
            return
        c, at = self._locate(item)
        chunk = self._chunks[c]
        chunk.insert(at, item)
        self._firsts[c] = chunk[0]
        if len(chunk) > 2 * self.CHUNK:
            self._chunks.insert(c + 1, chunk[self.CHUNK :])
            del chunk[self.CHUNK :]
            self._firsts.insert(c + 1, self._chunks[c + 1][0])


def _common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    hi = min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    lo, hi = 0, hi - 1  # invariant: a[:lo] == b[:lo] and a[:hi + 1] != b[:hi + 1]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo
