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
    earlier: list[tuple[int, ...]] = []
    hits = total = 0
    for _, _, ids in sorted(timeline):
        at = bisect.bisect_left(earlier, ids)
        best = 0
        if at < len(earlier):
            best = _common_prefix(ids, earlier[at])
        if at > 0:
            best = max(best, _common_prefix(ids, earlier[at - 1]))
        hits += best
        total += len(ids)
        earlier.insert(at, ids)
    return round(hits / total, 4) if total else 0.0


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
