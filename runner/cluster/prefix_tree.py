"""A block-level LRU prefix cache stored as a radix tree of chained block keys.

Owns which blocks one engine (worker, dp rank) holds, which of them are still being computed,
and which block is evicted next. It is also the kv-approx router's predicted index (no
capacity, entries judged by when they were last routed). Pure data structure: no clock of its
own, no routing.

Why a tree and not an OrderedDict of blocks: a request touches ~300 blocks, and per-block
dict work costs ~100 µs a request in CPython; here a request touches one node per shared
segment (agent system prompt, conversation), a turn that extends its conversation grows the
leaf in place, and because keys are chained (key i names blocks 0..i, see keys.py) one key
comparison tells whether a whole segment matches.

The eviction order equals a block-level LRU in which every request touches its blocks from
the last to the first (vLLM frees a finished request's blocks tail first for the same reason):
a block's recency is that of the newest request through it, ancestors are never older than
their descendants, so the least recent block is always at the end of some leaf segment.
"""

from __future__ import annotations

import heapq
import math

__all__ = ["PrefixTree"]


class _Node:
    __slots__ = ("children", "end", "parent", "slot", "src", "stamp", "start", "touched_s")

    def __init__(
        self,
        src: tuple[int, ...],
        start: int,
        end: int,
        parent: _Node | None,
        stamp: int,
        touched_s: float,
        slot: int,
    ) -> None:
        # The segment's block keys are src[start:end]. A view, never a copy: copying a
        # 300-key tuple touches 300 int objects' refcounts, and that cache traffic was the
        # largest cost of a submit; splitting, growing and trimming only move the bounds.
        self.src = src
        self.start = start
        self.end = end
        self.parent = parent  # None once removed (marks stale heap entries)
        self.children: dict[int, _Node] = {}  # by the child's first key
        self.stamp = stamp  # LRU order: the newest touch through this segment
        self.touched_s = touched_s  # caller time of that touch (kv-approx expiry)
        # The key this node is filed under in its parent: its first key, salted with the
        # request's scope for the root's children (see PrefixTree).
        self.slot = slot


class PrefixTree:
    """Blocks held, as chains of keys; LRU-evicted beyond `capacity_blocks` (None: no limit)."""

    __slots__ = (
        "_capacity_blocks",
        "_leaves",
        "_nodes",
        "_pending",
        "_pushes",
        "_root",
        "_stamp",
        "blocks",
    )

    def __init__(self, capacity_blocks: int | None) -> None:
        self._capacity_blocks = capacity_blocks
        self._root = _Node((), 0, 0, None, 0, math.inf, 0)
        self._stamp = 0
        self._nodes = 0
        self._pushes = 0
        # Min-heap of (stamp, push number, leaf): the least recent leaf first. Entries go
        # stale when a leaf is touched again, gains a child or is removed; they are skipped
        # on pop and compacted away when they outnumber the live nodes.
        self._leaves: list[tuple[int, int, _Node]] = []
        # Blocks still being computed, per prefill: (ready_s, position, key, scope) says "from
        # `position` on, a path of `scope` through `key` is not ready before ready_s". Kept
        # apart from the nodes so segments can merge freely; only prefills in flight are listed.
        self._pending: list[tuple[float, int, int, int]] = []
        self.blocks = 0

    def match(
        self,
        keys: tuple[int, ...],
        limit: int,
        *,
        scope: int = 0,
        ready_by_s: float = math.inf,
        touched_after_s: float = -math.inf,
    ) -> int:
        """How many leading blocks of `keys[:limit]` are held, computed by `ready_by_s` and
        touched after `touched_after_s`.

        A block is never ready before its predecessors, nor touched later than them, so the
        held-and-ready blocks always form a leading run. `scope` salts the first key only:
        a whole chain lives in the subtree of its first block, so two scopes never share a
        block although their later keys may be equal (the simulator keys every replayed
        instance of a trace turn with the same cached chain and a scope per instance).
        """
        node = self._root
        pos = 0
        while pos < limit:
            child = node.children.get(keys[pos] ^ scope if pos == 0 else keys[pos])
            if child is None or child.touched_s <= touched_after_s:
                break
            common = _common_prefix(child, keys, pos, limit)
            pos += common
            if common < child.end - child.start:
                break
            node = child
        for ready_s, start, key, key_scope in self._pending:
            if ready_s > ready_by_s and start < pos and keys[start] == key and key_scope == scope:
                pos = start
        return pos

    def touch(
        self, keys: tuple[int, ...], *, touched_s: float, ready_s: float, scope: int = 0
    ) -> None:
        """Record that a request held `keys` at `touched_s`: refresh the blocks held, add the
        rest (computed by `ready_s`), then evict least recent blocks beyond capacity.

        A block already held keeps its own ready time: the earlier prefill that computes it
        is the one a later request can hit.
        """
        self._stamp += 1
        stamp = self._stamp
        node = self._root
        pos = 0
        n = len(keys)
        while pos < n:
            slot = keys[pos] ^ scope if pos == 0 else keys[pos]
            child = node.children.get(slot)
            if child is None:
                if node is not self._root and not node.children:
                    # The request extends a leaf (the next turn of a conversation): grow it.
                    # Its keys agree with the leaf's up to `pos` (chained), so view them.
                    node.src, node.start = keys, pos - (node.end - node.start)
                    node.end = n
                else:
                    child = _Node(keys, pos, n, node, stamp, touched_s, slot)
                    node.children[slot] = child
                    node = child
                    self._nodes += 1
                self._add_pending(ready_s, pos, keys[pos], scope, touched_s)
                self.blocks += n - pos
                break
            common = _common_prefix(child, keys, pos, n)
            if common < child.end - child.start:
                child = self._split(child, common)
            child.stamp = stamp
            child.touched_s = touched_s
            pos += common
            node = child
        if self._capacity_blocks is None:
            return
        if node is not self._root and not node.children:
            self._push_leaf(node)
        if self.blocks > self._capacity_blocks:
            self._evict(self.blocks - self._capacity_blocks)

    def prune(self, *, touched_by_s: float) -> None:
        """Drop every segment last touched at or before `touched_by_s` (kv-approx expiry).

        A segment's descendants are never touched later than it, so whole subtrees go.
        """
        stack = [self._root]
        while stack:
            node = stack.pop()
            for first_key, child in list(node.children.items()):
                if child.touched_s <= touched_by_s:
                    del node.children[first_key]
                    self._forget_subtree(child)
                else:
                    stack.append(child)
            if self._capacity_blocks is not None and node is not self._root and not node.children:
                self._push_leaf(node)  # keep "every leaf has a heap entry" for eviction

    def clear(self) -> None:
        self._root.children = {}
        self._leaves = []
        self._pending = []
        self._nodes = 0
        self.blocks = 0

    def _add_pending(
        self, ready_s: float, position: int, key: int, scope: int, now_s: float
    ) -> None:
        pending = self._pending
        while pending and pending[0][0] <= now_s:
            heapq.heappop(pending)  # computed already: every later check would pass
        if ready_s > now_s:
            heapq.heappush(pending, (ready_s, position, key, scope))

    def _split(self, node: _Node, at: int) -> _Node:
        """Cut `node` after `at` blocks; the new upper part takes its place in the tree.

        The lower part keeps its identity, stamp and leaf status, so its heap entry stays valid.
        """
        parent = node.parent
        assert parent is not None
        cut = node.start + at
        upper = _Node(node.src, node.start, cut, parent, node.stamp, node.touched_s, node.slot)
        parent.children[upper.slot] = upper
        node.start = cut
        node.parent = upper
        node.slot = node.src[cut]
        upper.children[node.slot] = node
        self._nodes += 1
        return upper

    def _push_leaf(self, node: _Node) -> None:
        self._pushes += 1
        heapq.heappush(self._leaves, (node.stamp, self._pushes, node))
        if len(self._leaves) > 2 * self._nodes + 1024:
            self._rebuild_leaf_heap()

    def _evict(self, excess_blocks: int) -> None:
        heap = self._leaves
        root = self._root
        while excess_blocks > 0:
            stamp, push, node = heapq.heappop(heap)
            if node.parent is None or node.stamp != stamp or node.children:
                continue  # stale entry
            size = node.end - node.start
            if size > excess_blocks:
                # Trim the segment's tail: its last blocks are the least recent ones.
                node.end -= excess_blocks
                self.blocks -= excess_blocks
                heapq.heappush(heap, (stamp, push, node))
                return
            parent = node.parent
            del parent.children[node.slot]
            node.parent = None
            self._nodes -= 1
            self.blocks -= size
            excess_blocks -= size
            if parent is not root and not parent.children:
                self._push_leaf(parent)

    def _forget_subtree(self, top: _Node) -> None:
        stack = [top]
        while stack:
            node = stack.pop()
            node.parent = None
            self._nodes -= 1
            self.blocks -= node.end - node.start
            stack.extend(node.children.values())

    def _rebuild_leaf_heap(self) -> None:
        leaves: list[tuple[int, int, _Node]] = []
        stack = list(self._root.children.values())
        while stack:
            node = stack.pop()
            if node.children:
                stack.extend(node.children.values())
            else:
                self._pushes += 1
                leaves.append((node.stamp, self._pushes, node))
        heapq.heapify(leaves)
        self._leaves = leaves


def _common_prefix(node: _Node, keys: tuple[int, ...], pos: int, end: int) -> int:
    """Length of the common prefix of `node`'s segment and `keys[pos:end]`, given that
    their first keys are equal.

    Keys are chained (key i names blocks 0..i), so equal keys at one offset mean equal
    prefixes up to it: one comparison settles the usual full match, and a binary search on
    single keys finds a divergence inside the segment.
    """
    src, start = node.src, node.start
    span = node.end - start
    if end - pos < span:
        span = end - pos
    if keys[pos + span - 1] == src[start + span - 1]:
        return span
    lo, hi = 1, span - 1  # invariant: the first lo keys match; the common prefix is at most hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if keys[pos + mid - 1] == src[start + mid - 1]:
            lo = mid
        else:
            hi = mid - 1
    return lo
