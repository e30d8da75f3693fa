"""The orchestrator's side: a `RequestSender` whose client workers are processes elsewhere.

The engine, its router and its books stay in the orchestrating process; the run's workload
goes to the hosts once, with their configuration, and every dispatch goes out as a credit
that names what to send and carries the routing decision's outputs (runner/fleet/wire.py):
the hosts build the bodies. A credit is appended to its worker's stream and its result popped
from the run's one return list. Everything is batched per event-loop tick: all credits issued
in a tick go out in one pipelined round trip, and one blocking pop takes every result waiting.
The driver posts dispatches (`post`: no task or future per request) and hears each result
through its callback.
Hosts are watched by their heartbeats; a host that stops beating is lost: its credits still
owed are classified (sent and unanswered, or never read) and answered as `worker_lost`, never
re-sent, and the engine is told so its sessions fail or migrate by its own rule.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from runner.client import ResponseResult
from runner.errors import ErrorCategory
from runner.fleet.host import new_fleet_secret, write_host_config
from runner.fleet.line import FleetLine, busy_hosts, pause
from runner.fleet.plan import FleetError
from runner.fleet.resp import connect
from runner.fleet.wire import (
    CONTROL_CANCEL,
    CONTROL_STOP,
    GROUP,
    HEARTBEAT_TTL_S,
    CreditEntry,
    RunKeys,
    Workload,
    affinity_of,
    decode_results,
    encode_credits,
    encode_workload,
)
from runner.replay.engine import Dispatch
from runner.trace import Trace, Tree
from runner.wallclock.prompts import RequestBuilder
from runner.wallclock.replay import LiveConfig

__all__ = ["FleetError", "FleetSender", "LostWorker"]

log = logging.getLogger(__name__)

_POP_BATCH = 1024
_POP_BLOCK_S = 0.05  # a pop waits this long before the watcher's checks run again
_RETRY_S = 0.1  # a flush or pop Redis failed is tried again this much later
_ALIVE_TTL_S = 60  # hosts leave once the orchestrator stops refreshing this long (a busy
# orchestrator loop may not refresh for seconds; its death is what this is for)
_CONFIG_TTL_S = 24 * 3600
_REDIS_GRACE_S = 10.0  # Redis unreachable this long: the run's owed requests are settled
_CLOSE_S = 5.0  # closing waits at most this long per step
_WORD_EVERY_S = 15.0  # a run waiting for hosts says so this often
_LINGER_S = 60  # the run's keys outlive its end by this much
_ABANDONED_S = 600  # the run's keys outlive an orchestrator that died by this much
# No Redis command waits longer than this for its answer (blocking ones block far less).
SOCKET_TIMEOUT_S = 15.0


@dataclass(frozen=True, slots=True)
class LostWorker:
    worker: int
    at_s: float  # orchestrator clock (perf_counter)
    in_flight: int  # credits the host had read and not answered
    unread: int  # credits still in its stream, never read
    redelivered: int  # of the in-flight ones, credits whose entry was delivered more than once


OnDone = Callable[[Dispatch, ResponseResult], None]


class _Owed:
    """A credit posted and not yet answered (a plain class: one per request)."""

    __slots__ = ("dispatch", "entry", "on_done", "sent_at", "worker")

    def __init__(self, dispatch: Dispatch, on_done: OnDone, worker: int, sent_at: float) -> None:
        self.dispatch = dispatch
        self.on_done = on_done
        self.worker = worker
        self.sent_at = sent_at
        self.entry: bytes | None = None  # the stream entry that carried it, once appended


@dataclass(slots=True)
class FleetStats:
    credits: int = 0
    flushes: int = 0
    pops: int = 0
    results: int = 0
    late_results: int = 0  # answers for credits already settled (cancelled, lost)
    cancelled: int = 0  # credits the orchestrator cancelled before their answer came
    lost: list[LostWorker] = field(default_factory=list)


class FleetSender:
    """Client workers 0..workers-1, each a host process reading `credits:<w>` of run `run`.

    `start()` writes the hosts' configuration, creates the streams and waits for every host's
    first heartbeat; hosts may be started before or after it. `on_worker_lost` is called once
    per lost host (the live driver points it at the engine's `lose_worker`).
    """

    def __init__(
        self,
        traces: Sequence[Trace],
        config: LiveConfig,
        *,
        redis_url: str,
        run: str,
        secret: str | None = None,
    ) -> None:
        """Client workers `config.engine.client_workers`, reaching `config`'s endpoint as the
        in-process sender would (the same requests, headers, timeouts and connections). The
        hosts' configuration goes to Redis sealed under `secret`, the run's key (a new one
        when not given: `self.secret`), which the hosts must be given another way."""
        self.secret = secret or new_fleet_secret()
        # Only for its salt and scopes: the hosts build with the same (the workload says).
        self.builder = builder = RequestBuilder(
            traces,
            model=config.model,
            isolate_trees=config.isolate_trees,
            want_worker_id=config.want_worker_id,
            ignore_eos=config.ignore_eos,
        )
        trees = tuple(tree for trace in traces for tree in trace.trees)
        self._tree_index = {id(tree): index for index, tree in enumerate(trees)}
        # For trees the engine holds as other objects (the same traces loaded twice).
        self._tree_ids: dict[str, int] = {}
        for index, tree in enumerate(trees):
            self._tree_ids.setdefault(tree.id, index)
        self.workload = Workload(
            trees=trees,
            scopes=tuple(builder.scope(tree) for tree in trees),
            model=config.model,
            salt=builder.salt,
            isolate_trees=config.isolate_trees,
            want_worker_id=config.want_worker_id,
            ignore_eos=config.ignore_eos,
        )
        self.keys = RunKeys(run)
        self.workers = workers = config.engine.client_workers
        self.endpoint = config.endpoint
        self.api_key = config.api_key
        self.headers = dict(config.headers)
        self.timeouts = config.timeouts
        # Each host gets its share of the run's connections (at least a few of its own).
        self.connections = max(4, -(-config.connections // workers))
        self.redis = aioredis.from_url(
            redis_url, socket_timeout=SOCKET_TIMEOUT_S, socket_connect_timeout=5
        )
        # The two calls of every tick (credits out, results in) on lean connections of their
        # own (runner/fleet/resp.py): redis-py's per-command CPU was most of a credit's.
        self._out = connect(redis_url, timeout_s=SOCKET_TIMEOUT_S)
        self._in = connect(redis_url, timeout_s=SOCKET_TIMEOUT_S)
        self.on_worker_lost: Callable[[int, float], None] | None = None
        self.stats = FleetStats()
        self.heartbeats: dict[int, dict[str, Any]] = {}
        self._last_beats: dict[int, dict[str, Any]] = {}
        self.broken: str | None = None  # why Redis is given up on, once it is
        # Benchmarks: per result, the time from `send` to the result back minus the host's own
        # exchange time, i.e. what the trip through Redis added (same-machine clocks).
        self.record_transit = False
        self.transits_s: list[float] = []
        self._ids = itertools.count(1)
        self._owed: dict[int, _Owed] = {}
        self._outbox: dict[int, list[CreditEntry]] = {}
        self._cancels: dict[int, list[int]] = {}
        # The flush and the pop run as callbacks, not tasks: a credit costs no task switch.
        # One flush is in flight at a time; credits posted meanwhile go out with the next.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._flush_due = False  # a flush is scheduled for the loop's next turn
        self._flushing = False  # a flush's append is in flight
        self._flushed_all = asyncio.Event()  # set while no flush is in flight
        self._flushed_all.set()
        self._popping = False  # a pop is in flight
        self._pop_command: list[tuple[Any, ...]] = [
            ("BLMPOP", _POP_BLOCK_S, 1, self.keys.returns, "LEFT", "COUNT", _POP_BATCH)
        ]
        self._failing_since: dict[str, float] = {}  # per call kind: when Redis began failing it
        self._lost: set[int] = set()
        # Set by aclose: the loops finish the Redis command in hand and leave. Cancelling one
        # mid-command can leave redis-py's asyncio connection waiting forever.
        self._closing = False
        self._closed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._wall_offset = time.time() - time.perf_counter()

    async def start(
        self,
        *,
        timeout_s: float = 60.0,
        start_hosts: Callable[[], None] | None = None,
        on_wait: Callable[[str], None] | None = None,
        stop: asyncio.Event | None = None,
    ) -> None:
        """Open the run's keys and wait for every host's first heartbeat.

        `start_hosts` starts them from a pool shared with other runs (the service's hosts
        queue): the run then first waits for its turn in the fleet's line, so runs take pool
        processes one whole run at a time, in the order they asked (two runs each holding
        part of what they need would wait for each other forever), and waits while other
        runs' hosts keep the pool busy; `timeout_s` counts only while none do. Without it,
        the caller starts the hosts (they may come before or after this call) and `timeout_s`
        counts from now. `on_wait` hears what the run waits for, now and then; `stop`, once set,
        ends the waiting with Stopped (checked between Redis commands, never cancelling one)."""
        try:
            await self._open()
            if start_hosts is None:
                await self._wait_for_hosts(timeout_s, on_wait, stop, pool=False)
            else:
                line = FleetLine(self.redis, self.keys)
                try:
                    await line.wait_turn(self._keep_alive, on_wait, stop)
                    start_hosts()
                    await self._wait_for_hosts(timeout_s, on_wait, stop, pool=True)
                finally:
                    await line.leave()
        except (OSError, ConnectionError, aioredis.RedisError) as exc:
            raise FleetError(f"cannot reach Redis for the run's client workers: {exc}") from exc
        self._loop = asyncio.get_running_loop()
        self._pop()
        self._want_flush()  # what was posted before the hosts answered
        self._tasks = [asyncio.create_task(self._watch_loop())]

    async def _open(self) -> None:
        """The hosts' configuration, the run's streams, and the keys' expiry."""
        keys = self.keys
        pipe = self.redis.pipeline(transaction=False)
        pipe.set(keys.prefix + "alive", b"1", ex=_ALIVE_TTL_S)
        write_host_config(
            pipe,
            keys,
            endpoint=self.endpoint,
            api_key=self.api_key,
            headers=self.headers,
            timeouts=self.timeouts,
            connections=self.connections,
            ttl_s=_CONFIG_TTL_S,
            secret=self.secret,
            workload=encode_workload(self.workload),
        )
        await pipe.execute()
        for worker in range(self.workers):
            with contextlib.suppress(ResponseError):  # BUSYGROUP: a host made it
                await self.redis.xgroup_create(keys.credits(worker), GROUP, id="0", mkstream=True)
        await self._keep_alive()

    async def _keep_alive(self) -> None:
        """The run's keys stay while this orchestrator lives (refreshed every few seconds)
        and expire soon after it dies: hosts leave, and nothing stays in Redis for long."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.set(self.keys.prefix + "alive", b"1", ex=_ALIVE_TTL_S)
        for key in self._run_keys():
            pipe.expire(key, _ABANDONED_S)
        await pipe.execute()

    async def _wait_for_hosts(
        self,
        timeout_s: float,
        on_wait: Callable[[str], None] | None,
        stop: asyncio.Event | None,
        *,
        pool: bool,
    ) -> None:
        deadline = time.monotonic() + timeout_s
        next_look = next_word = time.monotonic()
        while True:
            beats = await self._read_heartbeats()
            if len(beats) == self.workers:
                self.heartbeats = beats
                return
            now = time.monotonic()
            if pool and now >= next_look:
                # Hosts serving other runs will free their pool processes when those end:
                # no timeout while they do.
                await self._keep_alive()
                runs, hosts = await busy_hosts(self.redis, self.keys)
                next_look = now + 1.0
                if hosts:
                    deadline = max(deadline, now + timeout_s)
                    if on_wait is not None and now >= next_word:
                        on_wait(
                            f"waiting for client-worker hosts: {len(beats)} of {self.workers} "
                            f"answering; the host pool is busy with {runs} other run(s) "
                            f"({hosts} worker(s))"
                        )
                        next_word = now + _WORD_EVERY_S
            if now >= deadline:
                missing = sorted(set(range(self.workers)) - set(beats))
                raise FleetError(
                    f"client workers {missing} did not start within {timeout_s:g} s "
                    f"({len(beats)} of {self.workers} answered): start more host processes "
                    "or lower the run's client workers"
                )
            await pause(0.05, stop)

    def _give_up(self, detail: str) -> None:
        self.broken = detail
        now = time.perf_counter()
        owed, self._owed = self._owed, {}
        self._settle_soon(owed.values(), ErrorCategory.WORKER_LOST, detail, now)

    @staticmethod
    def _settle_soon(
        owed: Iterable[_Owed], error: ErrorCategory, detail: str, end_s: float
    ) -> None:
        """Answer these credits with `error`, each callback on the loop's next turn: after
        whoever settles them has told the driver why (a lost worker, first)."""
        loop = asyncio.get_running_loop()
        for entry in owed:
            result = _failed(entry.sent_at, error, detail, end_s=end_s)
            loop.call_soon(entry.on_done, entry.dispatch, result)

    # ------------------------------------------------------------------------ sending

    def post(self, dispatch: Dispatch, on_done: OnDone) -> int | None:
        """Send `dispatch` with the next flush; `on_done(dispatch, result)` is called exactly
        once with its outcome, never from within this call. Returns the credit's id (None
        when it fails at once: its worker is lost, or Redis is)."""
        worker = dispatch.worker
        sent_at = time.perf_counter()
        if worker in self._lost or self.broken:
            detail = self.broken or f"client worker {worker} lost"
            result = _failed(sent_at, ErrorCategory.WORKER_LOST, detail)
            asyncio.get_running_loop().call_soon(on_done, dispatch, result)
            return None
        credit = dispatch.credit
        tree = self._tree_index.get(id(credit.tree))
        if tree is None:
            tree = self._tree_of(credit.tree)
        credit_id = next(self._ids)
        self._owed[credit_id] = _Owed(dispatch, on_done, worker, sent_at)
        outbox = self._outbox.get(worker)
        if outbox is None:
            outbox = self._outbox[worker] = []
        outbox.append(
            CreditEntry(
                credit_id,
                tree,
                credit.template_id,
                credit.turn_index,
                credit.root_id,
                credit.session_id,
                credit.priming,
                credit.turn_index + 1 >= credit.num_turns,
                affinity_of(dispatch.affinity),
            )
        )
        self.stats.credits += 1
        self._want_flush()
        return credit_id

    def _tree_of(self, tree: Tree | None) -> int:
        """The workload's index of a tree the engine holds as another object than ours."""
        index = None if tree is None else self._tree_ids.get(tree.id)
        if index is None:
            raise ValueError(
                f"tree {getattr(tree, 'id', None)!r} is not in the workload the hosts were "
                "given: the engine and the fleet's sender must replay the same traces"
            )
        self._tree_index[id(tree)] = index
        return index

    def cancel_posted(self) -> None:
        """Every credit posted and not answered ends now as cancelled (its callback called
        before this returns); its host is told to stop sending it."""
        if not self._owed:
            return
        owed, self._owed = self._owed, {}
        now = time.perf_counter()
        for credit_id, entry in owed.items():
            self.stats.cancelled += 1
            self._cancels.setdefault(entry.worker, []).append(credit_id)
            result = _failed(entry.sent_at, ErrorCategory.CANCELLED, _CANCELLED, end_s=now)
            entry.on_done(entry.dispatch, result)
        self._want_flush()

    async def send(self, dispatch: Dispatch, on_result: Callable[[ResponseResult], None]) -> None:
        """`post` awaited, for a caller with a task per request (RequestSender)."""
        future: asyncio.Future[ResponseResult] = asyncio.get_running_loop().create_future()

        def done(_: Dispatch, result: ResponseResult) -> None:
            if not future.done():
                future.set_result(result)

        sent_at = time.perf_counter()
        credit_id = self.post(dispatch, done)
        try:
            result = await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                on_result(future.result())  # answered just before the cancel landed: kept
                raise
            owed = self._owed.pop(credit_id, None) if credit_id is not None else None
            if owed is not None:
                self.stats.cancelled += 1
                self._cancels.setdefault(owed.worker, []).append(cast(int, credit_id))
                self._want_flush()
            on_result(_failed(sent_at, ErrorCategory.CANCELLED, _CANCELLED))
            raise
        on_result(result)

    def _want_flush(self) -> None:
        """Flush on the loop's next turn: every credit posted in this turn goes out in one
        append (and, while one is in flight, with the next: the flush after its reply)."""
        if self._flush_due or self._flushing or self._loop is None:
            return
        self._flush_due = True
        self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_due = False
        if self._flushing or self.broken or not (self._outbox or self._cancels):
            return
        keys = self.keys
        outbox, self._outbox = self._outbox, {}
        cancels, self._cancels = self._cancels, {}
        commands: list[list[bytes | str]] = []
        batches = list(outbox.values())
        for worker, credits in outbox.items():
            commands.append(_xadd(keys.credits(worker), encode_credits(credits)))
        for worker, ids in cancels.items():
            fields = {b"c": CONTROL_CANCEL, b"ids": ",".join(map(str, ids)).encode()}
            commands.append(_xadd(keys.credits(worker), fields))
        self._flushing = True
        self._flushed_all.clear()
        self._out.submit(commands, lambda outcome: self._flushed(batches, outcome))

    def _flushed(self, batches: list[list[CreditEntry]], outcome: list[Any] | Exception) -> None:
        self._flushing = False
        self._flushed_all.set()
        if isinstance(outcome, Exception):
            # The batch is not re-sent (it may have been appended, and a request is never
            # sent twice): its credits end now as lost, or the run would wait for them forever
            # (an answer that comes all the same is counted late).
            now = time.perf_counter()
            lost: list[_Owed] = []
            for credits in batches:
                for credit in credits:
                    entry = self._owed.pop(credit.id, None)
                    if entry is not None:
                        lost.append(entry)
            detail = f"its credit could not be appended to Redis: {outcome}"
            self._settle_soon(lost, ErrorCategory.WORKER_LOST, detail, now)
            self._redis_failed("flush", outcome, self._want_flush)
            return
        self._failing_since.pop("flush", None)
        # Which entry carried each credit: a lost host's pending entries then say which of
        # its credits it had read.
        owed = self._owed
        for credits, entry_id in zip(batches, outcome, strict=False):
            for credit in credits:
                entry = owed.get(credit.id)
                if entry is not None:
                    entry.entry = entry_id
        self.stats.flushes += 1
        if not self._closing:
            self._flush()  # what was posted while this one was out

    def _pop(self) -> None:
        """One blocking pop in flight while the run lasts: each reply's results are answered
        and the next pop goes out, from the connection's callback."""
        if self._closing or self.broken or self._popping:
            return
        self._popping = True
        self._in.submit(self._pop_command, self._popped)

    def _popped(self, outcome: list[Any] | Exception) -> None:
        self._popping = False
        if isinstance(outcome, Exception):
            self._redis_failed("pop", outcome, self._pop)
            return
        self._failing_since.pop("pop", None)
        (reply,) = outcome
        if reply:
            try:
                self._answer(cast(list[bytes], reply[1]))
            except Exception as exc:
                # A fault of ours: the run must still end (everything owed is settled, every
                # later send fails at once and the failure threshold stops the run).
                log.exception("client-worker fleet %s: answering results failed", self.keys.run)
                self._give_up(f"the fleet's results could not be answered: {exc!r}")
                return
        self._pop()

    def _answer(self, items: list[bytes]) -> None:
        offset = self._wall_offset
        owed = self._owed
        stats = self.stats
        stats.pops += 1
        record_transit = self.record_transit
        for raw in items:
            for credit_id, result in decode_results(raw, offset):
                entry = owed.pop(credit_id, None)
                if entry is None:
                    stats.late_results += 1
                    continue
                stats.results += 1
                if record_transit:
                    elapsed = time.perf_counter() - entry.sent_at
                    self.transits_s.append(elapsed - (result.end_s - result.start_s))
                entry.on_done(entry.dispatch, result)

    def _redis_failed(self, kind: str, exc: Exception, retry: Callable[[], None] | None) -> None:
        """A flush, pop or look at the hosts that Redis failed: tried again (`retry` shortly;
        the watch at its next look), until Redis has failed that kind of call for
        _REDIS_GRACE_S without a success between; then everything owed is settled as lost, so
        the run ends instead of waiting forever for answers that cannot come."""
        if self._closing or self.broken:
            return
        now = time.monotonic()
        since = self._failing_since.setdefault(kind, now)
        if now - since >= _REDIS_GRACE_S:
            self._give_up(f"lost contact with Redis: {exc}")
            return
        if retry is not None:
            assert self._loop is not None
            self._loop.call_later(_RETRY_S, retry)

    # ------------------------------------------------------------------------ watching

    async def _read_heartbeats(self) -> dict[int, dict[str, Any]]:
        names = [self.keys.heartbeat(w) for w in range(self.workers)]
        values = await self.redis.mget(names)
        return {w: json.loads(v) for w, v in enumerate(values) if v is not None}

    async def _watch_loop(self) -> None:
        """A look at the hosts every few seconds, through Redis blips."""
        while not self._closing and not self.broken:
            await self._sleep(HEARTBEAT_TTL_S / 6)
            if self._closed.is_set():
                return
            try:
                await self._watch_once()
            except (aioredis.RedisError, OSError) as exc:
                self._redis_failed("watch", exc, None)
            except Exception as exc:
                # A fault of ours: the run must still end (everything owed is settled, every
                # later send fails at once and the failure threshold stops the run).
                log.exception("client-worker fleet %s: watching the hosts failed", self.keys.run)
                self._give_up(f"the fleet's watch on its hosts failed: {exc!r}")
            else:
                self._failing_since.pop("watch", None)

    async def _watch_once(self) -> None:
        await self._keep_alive()
        beats = await self._read_heartbeats()
        self.heartbeats = beats
        self._last_beats.update(beats)  # a lost host's last word stays on view
        for worker in range(self.workers):
            if worker not in beats and worker not in self._lost:
                await self._lose(worker)

    async def _lose(self, worker: int) -> None:
        """Settle everything owed by a silent host: what it had read and not answered (its
        stream's pending entries, with their delivery counts) and what it never read."""
        self._lost.add(worker)
        stream = self.keys.credits(worker)
        deliveries: dict[bytes, int] = {}  # pending (read, not all answered) entry -> times
        with contextlib.suppress(aioredis.RedisError):
            pending = await self.redis.xpending_range(stream, GROUP, "-", "+", 100_000)
            deliveries = {cast(bytes, p["message_id"]): int(p["times_delivered"]) for p in pending}
        now = time.perf_counter()
        owed = [(cid, o) for cid, o in self._owed.items() if o.worker == worker]
        read = [o for _, o in owed if o.entry is not None and o.entry in deliveries]
        in_flight = len(read)
        unread = len(owed) - in_flight
        redelivered = sum(1 for o in read if deliveries[cast(bytes, o.entry)] > 1)
        detail = f"client worker {worker} stopped answering"
        for credit_id, _ in owed:
            del self._owed[credit_id]
        # Answered on the loop's next turn: after the driver heard of the loss (below).
        self._settle_soon([entry for _, entry in owed], ErrorCategory.WORKER_LOST, detail, now)
        self._outbox.pop(worker, None)
        self.stats.lost.append(LostWorker(worker, now, in_flight, unread, redelivered))
        if self.on_worker_lost is not None:
            self.on_worker_lost(worker, now)

    def lost_workers(self) -> list[LostWorker]:
        return list(self.stats.lost)

    def host_view(self, t0: float) -> list[dict[str, Any]]:
        """Each client worker as its host last reported it (run time `at_s` of a loss is
        measured from `t0`, the driver's start on the perf_counter clock)."""
        lost = {entry.worker: entry for entry in self.stats.lost}
        view: list[dict[str, Any]] = []
        for worker in range(self.workers):
            beat = self.heartbeats.get(worker) or self._last_beats.get(worker) or {}
            entry = lost.get(worker)
            view.append(
                {
                    "worker": worker,
                    "host": beat.get("host"),
                    "rss_bytes": beat.get("rss_bytes"),
                    "cpu_s": beat.get("cpu_s"),
                    "in_flight": beat.get("in_flight"),
                    "copies": beat.get("copies"),
                    "copy_bytes": beat.get("copy_bytes"),
                    "copy_held_bytes": beat.get("copy_held_bytes"),
                    "sent": beat.get("sent"),
                    "loop_lag_ms": beat.get("loop_lag_ms"),
                    "loop_lag_mean_ms": beat.get("loop_lag_mean_ms"),
                    "lost_at_s": None if entry is None else round(entry.at_s - t0, 3),
                }
            )
        return view

    def summary(self, t0: float) -> dict[str, Any]:
        stats = self.stats
        return {
            "hosts": self.host_view(t0),
            "credits": stats.credits,
            "results": stats.results,
            "late_results": stats.late_results,
            "cancelled": stats.cancelled,
            "lost": [
                {
                    "worker": entry.worker,
                    "at_s": round(entry.at_s - t0, 3),
                    "in_flight": entry.in_flight,
                    "unread": entry.unread,
                    "redelivered": entry.redelivered,
                }
                for entry in stats.lost
            ],
        }

    # ------------------------------------------------------------------------ closing

    def _run_keys(self) -> list[str]:
        keys = self.keys
        return [
            keys.prefix + "config",
            keys.returns,
            *[keys.credits(w) for w in range(self.workers)],
        ]

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closed.wait(), seconds)

    async def aclose(self) -> None:
        """Tell every host the run is over, and let the run's keys expire."""
        # What was posted or cancelled last goes out before the hosts' stop.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_CLOSE_S):
                await self._flushed_all.wait()
                self._flush()
                await self._flushed_all.wait()
        self._closing = True
        self._closed.set()
        if self._tasks:
            # Each loop ends within one blocking pop; one that does not is abandoned.
            _, stuck = await asyncio.wait(self._tasks, timeout=_CLOSE_S)
            for task in stuck:
                task.cancel()
        keys = self.keys
        with contextlib.suppress(aioredis.RedisError, OSError, TimeoutError):
            async with asyncio.timeout(_CLOSE_S):
                pipe = self.redis.pipeline(transaction=False)
                for worker in range(self.workers):
                    pipe.xadd(keys.credits(worker), {b"c": CONTROL_STOP})
                # Hosts read their stop within a read block; the run's keys go a minute later
                # (deleting a stream a slow host has yet to read would cut it off mid-goodbye).
                # A host that missed its stop leaves a few seconds later all the same.
                pipe.expire(keys.prefix + "alive", 3)
                for key in self._run_keys():
                    pipe.expire(key, _LINGER_S)
                await pipe.execute()
        with contextlib.suppress(aioredis.RedisError, OSError, TimeoutError):
            async with asyncio.timeout(_CLOSE_S):
                await self._out.aclose()
                await self._in.aclose()
                await self.redis.aclose()


_CANCELLED = "cancelled by the caller"


def _xadd(stream: str, fields: dict[bytes, bytes]) -> list[bytes | str]:
    command: list[bytes | str] = ["XADD", stream, "*"]
    for name, value in fields.items():
        command += (name, value)
    return command


def _failed(
    start_s: float, error: ErrorCategory, detail: str, *, end_s: float | None = None
) -> ResponseResult:
    return ResponseResult.failure(start_s, error, detail, end_s=end_s)
