"""One simulated engine (a worker's data-parallel rank): batch slots, prefill queue, prefix cache.

Owns the analytic timing of a request placed here: when it gets a slot, how much of its
prompt hits the cache, when its first token and its end come. Every time is computed at
submit, in O(log n): nothing is stepped, no call is needed when a request ends (ended entries
are dropped whenever the engine is next touched). It does not route and knows no sessions.

Approximations (chosen so an hour at concurrency 256 simulates in seconds):
- Slots: max_num_seqs requests hold a slot from admission to end; a request arriving with
  every slot taken waits FIFO for the earliest slot to free (its queued_s).
- Prefill: prefills run one at a time per engine, each prefill_ms(uncached tokens), in
  admission order. Decode does not slow prefill down, nor prefill decode.
- Decode: every output token after the first costs decode_ms(p), p fixed at admission:
  peak KV blocks (prompt + output) of the requests here, running or queued for a slot,
  over capacity_blocks, capped at 1.
- Cache hits are judged at admission: a block counts once the prefill that computes it has
  ended, so a sibling admitted while that prefill runs recomputes the prefix.
- The prefix cache (capacity_blocks of prompt blocks, LRU) is not tied to the KV that
  running requests hold: their blocks are not pinned, and output tokens are never cached.
- cancel frees the slot early but does not reschedule requests already queued behind it,
  return prefill time already reserved, or un-cache the blocks it would have computed.
"""

from __future__ import annotations

import heapq
import math

from runner.cluster.config import ClusterConfig
from runner.cluster.prefix_tree import PrefixTree

__all__ = ["Admission", "Engine", "LiveRequest"]


class LiveRequest:
    """A request holding (or queued for) a slot; found by id for cancel."""

    __slots__ = ("admit_s", "end_s", "engine", "kv_blocks", "request_id", "seq")

    def __init__(
        self, request_id: str, engine: int, seq: int, admit_s: float, end_s: float, kv_blocks: int
    ) -> None:
        self.request_id = request_id
        self.engine = engine
        self.seq = seq
        self.admit_s = admit_s
        self.end_s = end_s
        self.kv_blocks = kv_blocks


# What admit() decided: (admit_s: the slot is taken, first_token_s: prefill ends, end_s,
# itl_s, cached_tokens). A plain tuple: it is built once per request on the hot path.
Admission = tuple[float, float, float, float, int]


class Engine:
    """State of one (worker, dp rank)."""

    __slots__ = (
        "_config",
        "_live",
        "_live_by_id",
        "_ms_to_s",
        "_slots",
        "active_blocks",
        "cache",
        "cached_tokens",
        "dp_rank",
        "index",
        "prefill_free_s",
        "prompt_tokens",
        "requests",
        "worker_id",
    )

    def __init__(
        self,
        *,
        index: int,
        worker_id: int,
        dp_rank: int,
        config: ClusterConfig,
        live_by_id: dict[str, LiveRequest],
    ) -> None:
        self.index = index
        self.worker_id = worker_id
        self.dp_rank = dp_rank
        self._config = config
        self._ms_to_s = config.time_scale / 1000.0
        self._live_by_id = live_by_id  # shared by every engine of the cluster
        # One entry per slot in use: the end time of the last request given that slot.
        self._slots: list[float] = []
        # Every request here, running or queued: (end_s, seq, request), earliest end first.
        self._live: list[tuple[float, int, LiveRequest]] = []
        self.prefill_free_s = -math.inf  # the prefill queue is busy until then
        self.active_blocks = 0  # KV blocks of the requests in self._live
        self.cache = PrefixTree(config.capacity_blocks)
        self.requests = 0
        self.prompt_tokens = 0
        self.cached_tokens = 0

    def load(self, now_s: float) -> int:
        """Requests running or queued here."""
        self.release_ended(now_s)
        return len(self._live)

    def has_free_slot(self, now_s: float) -> bool:
        """A request arriving now would start at once (max_num_seqs not all taken)."""
        slots = self._slots
        return len(slots) < self._config.max_num_seqs or slots[0] <= now_s

    def release_ended(self, now_s: float) -> None:
        live = self._live
        by_id = self._live_by_id
        while live and live[0][0] <= now_s:
            _, _, request = heapq.heappop(live)
            self.active_blocks -= request.kv_blocks
            if by_id.get(request.request_id) is request:
                del by_id[request.request_id]

    def admit(
        self,
        request_id: str,
        block_keys: tuple[int, ...],
        prompt_tokens: int,
        output_tokens: int,
        now_s: float,
        seq: int,
        scope: int = 0,
    ) -> Admission:
        self.release_ended(now_s)
        config = self._config
        block_size = config.block_size_tokens
        slots = self._slots
        full = len(slots) >= config.max_num_seqs
        admit_s = max(now_s, slots[0]) if full else now_s

        # vLLM recomputes the last prompt token to get logits, so a hit never covers the
        # whole prompt: at most the full blocks before the last token.
        limit = min(len(block_keys), (prompt_tokens - 1) // block_size) if prompt_tokens else 0
        hit_blocks = (
            self.cache.match(block_keys, limit, scope=scope, ready_by_s=admit_s) if limit > 0 else 0
        )
        cached_tokens = hit_blocks * block_size
        uncached_tokens = max(1, prompt_tokens - cached_tokens)

        prefill_start_s = max(admit_s, self.prefill_free_s)
        first_token_s = prefill_start_s + config.prefill_ms(uncached_tokens) * self._ms_to_s
        self.prefill_free_s = first_token_s

        # Peak KV of the request (prompt plus every output token) is held from admission.
        kv_blocks = -(-(prompt_tokens + output_tokens) // block_size)
        self.active_blocks += kv_blocks
        kv_usage = min(1.0, self.active_blocks / config.capacity_blocks)
        itl_s = config.decode_ms(kv_usage) * self._ms_to_s
        end_s = first_token_s + max(0, output_tokens - 1) * itl_s

        if full:
            heapq.heapreplace(slots, end_s)
        else:
            heapq.heappush(slots, end_s)
        request = LiveRequest(request_id, self.index, seq, admit_s, end_s, kv_blocks)
        heapq.heappush(self._live, (end_s, seq, request))
        self._live_by_id[request_id] = request
        self.cache.touch(block_keys, touched_s=now_s, ready_s=first_token_s, scope=scope)

        self.requests += 1
        self.prompt_tokens += prompt_tokens
        self.cached_tokens += cached_tokens
        return admit_s, first_token_s, end_s, itl_s, cached_tokens

    def cancel(self, request: LiveRequest, now_s: float) -> None:
        """Free the request's slot now (or, if it is still queued, when it would have started)."""
        freed_s = max(now_s, request.admit_s)
        slots = self._slots
        # Slots are anonymous: any slot ending when this request ends is as good as its own.
        # If a queued request already took this slot over, the end is gone and nothing frees.
        for i, end_s in enumerate(slots):
            if end_s == request.end_s:
                slots[i] = freed_s
                heapq.heapify(slots)
                break
        live = self._live
        for i, entry in enumerate(live):
            if entry[2] is request:
                live[i] = live[-1]
                live.pop()
                heapq.heapify(live)
                self.active_blocks -= request.kv_blocks
                break

    def running_and_queued(self, now_s: float) -> tuple[int, int]:
        self.release_ended(now_s)
        queued = sum(1 for _, _, request in self._live if request.admit_s > now_s)
        return len(self._live) - queued, queued

    def in_flight(self) -> list[str]:
        return [request.request_id for _, _, request in self._live]

    def reset(self) -> None:
        """The worker went down: requests, slots, prefill queue and cache are all lost."""
        for _, _, request in self._live:
            if self._live_by_id.get(request.request_id) is request:
                del self._live_by_id[request.request_id]
        self._live = []
        self._slots = []
        self.prefill_free_s = -math.inf
        self.active_blocks = 0
        self.cache.clear()
