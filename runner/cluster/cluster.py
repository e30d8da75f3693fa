"""The simulated inference cluster: a Dynamo-like frontend (router + session affinity) over engines.

Owns where each request goes (docs/product.md §4.8): session_control and header bindings first,
then the router mode, then the analytic timing of the chosen engine. Which affinity contract
applies is the configured Dynamo generation's (config.DynamoVersion). It does no I/O, starts
no tasks and reads no clock: every call takes the caller's `now_s` (virtual time in the
simulator, scaled monotonic time in the mock server), which must not go backwards (an
earlier value is treated as the latest one seen).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Literal, NamedTuple, TypedDict

from runner.cluster.affinity import (
    BindingStore,
    SessionControl,
    SessionControlError,
    parse_session_control,
)
from runner.cluster.config import ClusterConfig
from runner.cluster.engine import Engine, LiveRequest
from runner.cluster.prefix_tree import PrefixTree

__all__ = [
    "AffinityOutcome",
    "Cluster",
    "ClusterRequest",
    "ClusterStats",
    "ClusterTotals",
    "Placement",
    "Rejection",
    "WorkerStats",
]

# What server-side affinity did for one request:
#   bound / opened      session_control bind / open stored (or overwrote) a binding
#   followed            a bare session_id went to its live binding and slid its TTL
#   closed              a close went to its live binding, which was then removed
#   header-bound        X-Dynamo-Session-ID: the first request bound its key
#   header-followed     X-Dynamo-Session-ID: the request went to its key's binding
#   header-fallback     soft header affinity: the bound engine had no free slot, so the
#                       request was routed normally and the binding kept
#   none                nothing (no affinity, an unbound bare session_id or close, ...)
AffinityOutcome = Literal[
    "none",
    "bound",
    "opened",
    "followed",
    "closed",
    "header-bound",
    "header-followed",
    "header-fallback",
]

# Dynamo v1.6 keys a subagent group by its parent id under an internal prefix (§1.3, #14521:
# `\u{1}sg:<blake3(parent)>`); the raw parent id stands in for its hash, one-to-one as well.
_GROUP_KEY_PREFIX = "\x01sg:"

# Why header affinity refused a request (ClusterTotals.header_refusals), with its status.
HeaderRefusal = Literal["id_too_long", "table_full"]
# A 257-byte X-Dynamo-Session-ID with affinity on: real 1.6.1 answers exactly this 400
# (docs/dynamo-observed.md §c); a 257-byte parent id it accepts.
_ID_TOO_LONG = (400, "Invalid request")
# Dynamo names the entry-limit error "resource exhausted"; 429 is that code's HTTP mapping
# (gRPC RESOURCE_EXHAUSTED). Assumed: 65,536 live sessions were not reproduced on a real one.
_TABLE_FULL_STATUS = 429


class ClusterRequest(NamedTuple):
    """One request as the frontend sees it (build it with keywords).

    `block_keys` must be chained (key i names blocks 0..i, as chain_block_keys makes them):
    the prefix cache compares one key to decide that a whole run of blocks matches. A
    request's id must be unique among requests in flight (cancel finds it by id). A
    NamedTuple: one is built per request and a frozen dataclass costs twice as much.
    """

    request_id: str
    block_keys: tuple[int, ...]  # the prompt's full blocks, first block first
    prompt_tokens: int
    output_tokens: int
    # `nvext.session_control` exactly as sent (normally a dict; anything else gets a 400).
    session_control: object = None
    # X-Dynamo-Session-ID and X-Dynamo-Parent-Session-ID. Their length limit is in UTF-8
    # bytes: a server handing raw header bytes over should decode them with "surrogateescape"
    # so that every byte counts once. X-Dynamo-Session-Final is not here: Dynamo has no unbind.
    session_header: str | None = None
    parent_session_header: str | None = None
    # Salts the first block key only: requests of different scopes never share cache even
    # with equal keys (the simulator replays one trace's cached key chains per tree
    # instance); 0 shares by content alone, as a real server does.
    scope: int = 0


class Placement(NamedTuple):
    """Where the request runs and when: durations from submit, `end_s` on the caller's clock.

    Immutable; a NamedTuple rather than a frozen dataclass because one is built per request
    on the simulator's hot path and costs half as much.
    """

    worker_id: int
    dp_rank: int
    cached_tokens: int  # usage.prompt_tokens_details.cached_tokens
    queued_s: float  # waiting for a batch slot
    ttft_s: float  # submit to first token: queue, prefill queue, prefill
    itl_s: float  # gap between consecutive output tokens
    end_s: float  # last token
    affinity: AffinityOutcome = "none"


@dataclass(frozen=True, slots=True)
class Rejection:
    """The frontend refused the request; the mock server answers with this status and text."""

    status: int
    message: str


class WorkerStats(TypedDict):
    worker_id: int
    up: bool
    requests: int
    running: int
    queued: int
    prompt_tokens: int
    cached_tokens: int  # prefix-cache hits
    cache_blocks_used: int
    cache_capacity_blocks: int
    kv_usage: float  # KV blocks held by its requests / capacity (what decode time grows with)
    bound_keys: int  # live session_control and header bindings to this worker
    binds: int
    closes: int
    expiries: int
    bindings_dropped: int  # removed because the worker went down
    sessions_seen: int  # distinct session ids among its requests
    # Header affinity alone (binds/expiries/bindings_dropped above count both kinds).
    header_binds: int  # keys bound here by their first dispatched request
    header_follows: int  # requests sent here by a live header binding
    header_expiries: int  # bindings here that idled past their TTL
    header_invalidations: int  # bindings here dropped because the worker went down
    header_fallbacks: int  # soft mode: bound here, routed elsewhere (no free slot)


class ClusterTotals(TypedDict):
    requests: int
    running: int
    queued: int
    prompt_tokens: int
    cached_tokens: int
    prefix_cache_hit_ratio: float
    cache_blocks_used: int
    bound_keys: int
    binds: int
    closes: int
    close_misses: int  # close for a key with no live binding
    expiries: int
    bindings_dropped: int
    sessions_seen: int
    rejections: dict[str, int]  # by HTTP status
    header_binds: int
    header_follows: int
    header_expiries: int
    header_invalidations: int
    header_fallbacks: int
    # Requests refused by the header limits, by reason; a refused request reaches no worker,
    # so these are counted for the cluster only.
    header_refusals: dict[str, int]


class ClusterStats(TypedDict):
    now_s: float
    router: str
    dynamo_version: str
    header_affinity_ttl_s: float | None  # None: header affinity off
    header_affinity_mode: str
    workers: list[WorkerStats]
    totals: ClusterTotals


class Cluster:
    """N workers × dp ranks behind one frontend; see ClusterConfig for the knobs."""

    def __init__(self, config: ClusterConfig | None = None) -> None:
        self._config = config = config if config is not None else ClusterConfig()
        self._live: dict[str, LiveRequest] = {}
        dp = config.dp_ranks
        # Engine index = worker_id * dp_ranks + dp_rank, so index order is (worker, rank)
        # order: scanning it breaks ties towards the lowest worker id.
        self._engines = [
            Engine(index=i, worker_id=i // dp, dp_rank=i % dp, config=config, live_by_id=self._live)
            for i in range(config.engines)
        ]
        self._worker_up = [True] * config.workers
        self._up_engines: list[int] = list(range(config.engines))
        # Round-robin visits every worker before a second rank of any worker.
        self._rr_order = [w * dp + r for r in range(dp) for w in range(config.workers)]
        self._rr_next = 0
        self._rng = random.Random(config.seed)
        # kv-approx: what the router believes each engine holds, from its own decisions.
        self._predicted = (
            [PrefixTree(None) for _ in self._engines] if config.router == "kv-approx" else []
        )
        self._sessions = BindingStore(config.engines)  # nvext.session_control
        self._headers = BindingStore(config.engines)  # X-Dynamo-Session-ID
        self._honour_control = config.honour_session_control or config.router in (
            "kv",
            "kv-approx",
        )
        self._header_soft = config.header_affinity_mode == "soft"
        self._header_refusals: dict[str, int] = {}
        self._sessions_seen: list[set[str]] = [set() for _ in range(config.workers)]
        self._all_sessions_seen: set[str] = set()
        self._close_misses = 0
        self._rejections: dict[str, int] = {}
        self._seq = 0
        self._now_s = -math.inf
        self._next_sweep_s = -math.inf
        self._next_prune_s = -math.inf

    @property
    def config(self) -> ClusterConfig:
        return self._config

    def submit(self, request: ClusterRequest, now_s: float) -> Placement | Rejection:
        """Route and time one request (or refuse it, as Dynamo's frontend would).

        In order: the request's own checks (token counts, session_control), then where it
        goes (a live binding, else the router), the engine's timing, and last the affinity
        books (on_routed).
        """
        now_s = self._tick(now_s)
        config = self._config
        limit = config.max_request_tokens
        if not (
            0 <= request.prompt_tokens <= limit
            and 0 <= request.output_tokens <= limit - request.prompt_tokens
        ):
            return self._reject(
                400,
                f"the request holds {request.prompt_tokens} prompt and {request.output_tokens} "
                f"output tokens; this model takes at most {limit} in all",
            )
        control = None
        if request.session_control is not None:
            try:
                control = parse_session_control(
                    request.session_control, version=config.dynamo_version
                )
            except SessionControlError as exc:
                return self._reject(400, str(exc))
        session_id = request.session_header or (control.session_id if control else None)
        if not self._honour_control:
            control = None
        header_key = self._header_key(request)

        # Before selection: a live binding decides the engine, bypassing the router (§1.2).
        bound = self._sessions.peek(control.session_id, now_s) if control is not None else None
        header_bound = None
        if header_key is not None:
            refusal = self._header_limits(request, header_key, now_s)
            if refusal is not None:
                return refusal
            header_bound = self._headers.peek(header_key, now_s)
        index = bound if bound is not None else header_bound
        if (
            bound is None
            and index is not None
            and self._header_soft
            and not self._engines[index].has_free_slot(now_s)
        ):
            # Soft mode passes the binding as a preference. Our model of what the router makes
            # of it (not observed): a saturated bound engine is passed over, and the binding
            # stays where it was.
            index = None
        if index is None:
            index = self._route(request, now_s)
            if index is None:
                return self._reject(503, "no inference worker is up")

        engine = self._engines[index]
        self._seq += 1
        admit_s, first_token_s, end_s, itl_s, cached_tokens = engine.admit(
            request.request_id,
            request.block_keys,
            request.prompt_tokens,
            request.output_tokens,
            now_s,
            self._seq,
            request.scope,
        )
        if self._predicted:
            self._predicted[index].touch(
                request.block_keys, touched_s=now_s, ready_s=-math.inf, scope=request.scope
            )
        if session_id is not None:
            self._sessions_seen[engine.worker_id].add(session_id)
            self._all_sessions_seen.add(session_id)

        outcome: AffinityOutcome = "none"
        if control is not None:
            outcome = self._on_routed_control(control, index, bound, now_s)
        if header_key is not None:
            header_outcome = self._on_routed_header(header_key, index, header_bound, end_s)
            if outcome == "none" or header_outcome == "header-fallback":
                outcome = header_outcome

        return Placement(
            engine.worker_id,
            engine.dp_rank,
            cached_tokens,
            admit_s - now_s,
            first_token_s - now_s,
            itl_s,
            end_s,
            outcome,
        )

    def _header_key(self, request: ClusterRequest) -> str | None:
        """The X-Dynamo-Session-ID binding key: the session's own id, or its parent's group
        key when grouping is on (v1.6); None when header affinity is off or absent (the
        configuration allows a TTL only for generations that have header affinity)."""
        config = self._config
        if config.header_affinity_ttl_s is None or request.session_header is None:
            return None
        parent = request.parent_session_header
        if parent is not None and config.header_parent_grouping:
            return _GROUP_KEY_PREFIX + parent
        return request.session_header

    def _header_limits(self, request: ClusterRequest, key: str, now_s: float) -> Rejection | None:
        """Header affinity's limits (§1.3): session ids of at most 256 bytes, at most 65,536
        bound keys; a request past either is refused before it is routed. Only the session
        id's length is checked: real 1.6.1 takes a longer parent id (dynamo-observed.md §c)."""
        config = self._config
        session = request.session_header
        assert session is not None  # a header key exists only with a session header
        if len(session.encode("utf-8", "surrogateescape")) > config.header_affinity_max_id_bytes:
            self._count_refusal("id_too_long")
            return self._reject(*_ID_TOO_LONG)
        headers = self._headers
        limit = config.header_affinity_max_sessions
        if len(headers) >= limit and headers.peek(key, now_s) is None:
            headers.sweep(now_s)  # expired entries make room before anything is refused
            if len(headers) >= limit:
                self._count_refusal("table_full")
                return self._reject(
                    _TABLE_FULL_STATUS,
                    f"resource exhausted: session affinity holds {limit} sessions",
                )
        return None

    def _count_refusal(self, reason: HeaderRefusal) -> None:
        self._header_refusals[reason] = self._header_refusals.get(reason, 0) + 1

    def _on_routed_control(
        self, control: SessionControl, index: int, bound: int | None, now_s: float
    ) -> AffinityOutcome:
        """session_control after selection (§1.2, §1.3): follow, close, or (re)bind."""
        action = control.action
        if action is None:
            if bound is None:
                return "none"
            self._sessions.slide(control.session_id, now_s)
            return "followed"
        if action == "close":
            if self._sessions.unbind(control.session_id) is not None:
                return "closed"
            self._close_misses += 1
            return "none"
        timeout_s = control.timeout_s
        self._sessions.bind(control.session_id, index, expires_s=now_s + timeout_s, ttl_s=timeout_s)
        return "bound" if action == "bind" else "opened"

    def _on_routed_header(
        self, key: str, index: int, bound: int | None, end_s: float
    ) -> AffinityOutcome:
        """X-Dynamo-Session-ID after selection (§1.3): the first dispatched request binds the
        key; every request under it is a lease that holds the binding while it runs, and the
        idle TTL runs from the end of the last one. Nothing unbinds (Session-Final neither)."""
        ttl_s = self._config.header_affinity_ttl_s
        assert ttl_s is not None
        headers = self._headers
        expires_s = end_s + ttl_s
        if bound is None:
            headers.bind(key, index, expires_s=expires_s, ttl_s=ttl_s)
            return "header-bound"
        headers.hold_until(key, expires_s)
        if index == bound:
            headers.follows[bound] += 1
            return "header-followed"
        if self._header_soft:
            headers.fallbacks[bound] += 1
            return "header-fallback"
        return "none"  # a session_control binding sent it elsewhere

    def cancel(self, request_id: str, now_s: float) -> bool:
        """The client went away: free the request's slot. False if it is unknown or ended."""
        now_s = self._tick(now_s)
        request = self._live.pop(request_id, None)
        if request is None or request.end_s <= now_s:
            return False
        self._engines[request.engine].cancel(request, now_s)
        return True

    def worker_down(self, worker_id: int, now_s: float) -> tuple[str, ...]:
        """Take a worker down: its in-flight requests (returned) fail, its bindings are
        dropped and its cache is lost. Does nothing if it is already down."""
        self._check_worker(worker_id)
        now_s = self._tick(now_s)
        if not self._worker_up[worker_id]:
            return ()
        self._worker_up[worker_id] = False
        engines = self._worker_engines(worker_id)
        lost: list[str] = []
        for engine in engines:
            engine.release_ended(now_s)
            lost.extend(engine.in_flight())
            engine.reset()
            if self._predicted:
                self._predicted[engine.index].clear()
        indices = frozenset(engine.index for engine in engines)
        self._sessions.drop_engines(indices)
        self._headers.drop_engines(indices)
        self._up_engines = [i for i in self._up_engines if i not in indices]
        return tuple(lost)

    def worker_up(self, worker_id: int, now_s: float) -> None:
        """Bring a worker back, empty (its cache was lost when it went down)."""
        self._check_worker(worker_id)
        self._tick(now_s)
        if self._worker_up[worker_id]:
            return
        self._worker_up[worker_id] = True
        dp = self._config.dp_ranks
        self._up_engines = [i for i in range(len(self._engines)) if self._worker_up[i // dp]]

    def worker_is_up(self, worker_id: int) -> bool:
        self._check_worker(worker_id)
        return self._worker_up[worker_id]

    def bound_keys(self, now_s: float) -> int:
        """Live session_control and header bindings (expired ones excluded, swept or not)."""
        now_s = self._tick(now_s)
        return sum(self._sessions.live_per_engine(now_s)) + sum(
            self._headers.live_per_engine(now_s)
        )

    def stats(self, now_s: float) -> ClusterStats:
        """A JSON-able snapshot: per worker and totals. O(requests in flight + bindings)."""
        now_s = self._tick(now_s)
        config = self._config
        sessions, headers = self._sessions, self._headers
        bound_sessions = sessions.live_per_engine(now_s)
        bound_headers = headers.live_per_engine(now_s)
        capacity_blocks = config.capacity_blocks * config.dp_ranks
        workers: list[WorkerStats] = []
        for worker_id in range(config.workers):
            running = queued = active_blocks = 0
            requests = prompt_tokens = cached_tokens = cache_blocks = 0
            bound_keys = binds = closes = expiries = dropped = 0
            h_binds = h_follows = h_expiries = h_dropped = h_fallbacks = 0
            for engine in self._worker_engines(worker_id):
                i = engine.index
                engine_running, engine_queued = engine.running_and_queued(now_s)
                running += engine_running
                queued += engine_queued
                active_blocks += engine.active_blocks
                requests += engine.requests
                prompt_tokens += engine.prompt_tokens
                cached_tokens += engine.cached_tokens
                cache_blocks += engine.cache.blocks
                bound_keys += bound_sessions[i] + bound_headers[i]
                binds += sessions.binds[i] + headers.binds[i]
                closes += sessions.closes[i] + headers.closes[i]
                expiries += sessions.expiries[i] + headers.expiries[i]
                dropped += sessions.dropped[i] + headers.dropped[i]
                h_binds += headers.binds[i]
                h_follows += headers.follows[i]
                h_expiries += headers.expiries[i]
                h_dropped += headers.dropped[i]
                h_fallbacks += headers.fallbacks[i]
            workers.append(
                WorkerStats(
                    worker_id=worker_id,
                    up=self._worker_up[worker_id],
                    requests=requests,
                    running=running,
                    queued=queued,
                    prompt_tokens=prompt_tokens,
                    cached_tokens=cached_tokens,
                    cache_blocks_used=cache_blocks,
                    cache_capacity_blocks=capacity_blocks,
                    kv_usage=min(1.0, active_blocks / capacity_blocks),
                    bound_keys=bound_keys,
                    binds=binds,
                    closes=closes,
                    expiries=expiries,
                    bindings_dropped=dropped,
                    sessions_seen=len(self._sessions_seen[worker_id]),
                    header_binds=h_binds,
                    header_follows=h_follows,
                    header_expiries=h_expiries,
                    header_invalidations=h_dropped,
                    header_fallbacks=h_fallbacks,
                )
            )
        prompt_total = sum(w["prompt_tokens"] for w in workers)
        cached_total = sum(w["cached_tokens"] for w in workers)
        totals = ClusterTotals(
            requests=sum(w["requests"] for w in workers),
            running=sum(w["running"] for w in workers),
            queued=sum(w["queued"] for w in workers),
            prompt_tokens=prompt_total,
            cached_tokens=cached_total,
            prefix_cache_hit_ratio=cached_total / prompt_total if prompt_total else 0.0,
            cache_blocks_used=sum(w["cache_blocks_used"] for w in workers),
            bound_keys=sum(w["bound_keys"] for w in workers),
            binds=sum(w["binds"] for w in workers),
            closes=sum(w["closes"] for w in workers),
            close_misses=self._close_misses,
            expiries=sum(w["expiries"] for w in workers),
            bindings_dropped=sum(w["bindings_dropped"] for w in workers),
            sessions_seen=len(self._all_sessions_seen),
            rejections=dict(self._rejections),
            header_binds=sum(w["header_binds"] for w in workers),
            header_follows=sum(w["header_follows"] for w in workers),
            header_expiries=sum(w["header_expiries"] for w in workers),
            header_invalidations=sum(w["header_invalidations"] for w in workers),
            header_fallbacks=sum(w["header_fallbacks"] for w in workers),
            header_refusals=dict(self._header_refusals),
        )
        return ClusterStats(
            now_s=now_s,
            router=config.router,
            dynamo_version=config.dynamo_version.value,
            header_affinity_ttl_s=config.header_affinity_ttl_s,
            header_affinity_mode=config.header_affinity_mode,
            workers=workers,
            totals=totals,
        )

    def _route(self, request: ClusterRequest, now_s: float) -> int | None:
        """The router mode's choice among engines whose worker is up; None if none is."""
        up = self._up_engines
        if not up:
            return None
        mode = self._config.router
        if mode == "round-robin":
            order = self._rr_order
            while True:  # terminates: at least one engine in `order` is up
                index = order[self._rr_next]
                self._rr_next = (self._rr_next + 1) % len(order)
                if self._worker_up[self._engines[index].worker_id]:
                    return index
        if mode == "random":
            return self._rng.choice(up)
        engines = self._engines
        if mode == "least-loaded":
            # min() keeps the first of equals: ties go to the lowest (worker, rank).
            return min(up, key=lambda i: engines[i].load(now_s))
        return self._route_kv(request, now_s)

    def _route_kv(self, request: ClusterRequest, now_s: float) -> int:
        """Lowest cost = uncached prompt blocks + KV blocks in use (§1.5, the classic form with
        overlap weight 1); ties to the lowest (worker, rank). `kv` sees blocks stored by
        finished prefills (what KV events report); `kv-approx` sees blocks it routed there
        in the last kv_approx_ttl_s."""
        keys = request.block_keys
        prompt_blocks = -(-request.prompt_tokens // self._config.block_size_tokens)
        touched_after_s = now_s - self._config.kv_approx_ttl_s
        best, best_cost = -1, math.inf
        for i in self._up_engines:
            engine = self._engines[i]
            if self._predicted:
                overlap = self._predicted[i].match(
                    keys, len(keys), scope=request.scope, touched_after_s=touched_after_s
                )
            else:
                overlap = engine.cache.match(keys, len(keys), scope=request.scope, ready_by_s=now_s)
            engine.release_ended(now_s)
            cost = max(0, prompt_blocks - overlap) + engine.active_blocks
            if cost < best_cost:
                best, best_cost = i, cost
        return best

    def _tick(self, now_s: float) -> float:
        """Clamp the clock to never go back; run the periodic sweeps that are due."""
        if now_s < self._now_s:
            now_s = self._now_s
        self._now_s = now_s
        if now_s >= self._next_sweep_s:
            self._sessions.sweep(now_s)
            self._headers.sweep(now_s)
            self._next_sweep_s = now_s + self._config.session_sweep_s
        if self._predicted and now_s >= self._next_prune_s:
            # Pruning every half TTL keeps the predicted index at most 1.5 TTLs of traffic.
            ttl_s = self._config.kv_approx_ttl_s
            for tree in self._predicted:
                tree.prune(touched_by_s=now_s - ttl_s)
            self._next_prune_s = now_s + ttl_s / 2
        return now_s

    def _reject(self, status: int, message: str) -> Rejection:
        key = str(status)
        self._rejections[key] = self._rejections.get(key, 0) + 1
        return Rejection(status=status, message=message)

    def _worker_engines(self, worker_id: int) -> list[Engine]:
        dp = self._config.dp_ranks
        return self._engines[worker_id * dp : (worker_id + 1) * dp]

    def _check_worker(self, worker_id: int) -> None:
        if not 0 <= worker_id < self._config.workers:
            raise ValueError(
                f"no worker {worker_id}: this cluster has workers 0..{self._config.workers - 1}"
            )
