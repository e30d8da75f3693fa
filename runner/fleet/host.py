"""Client workers in a process of their own (one, or several sharing its event loop): each
receives credits from its stream, builds their requests, sends them over its own connection
pool, keeps its own session copies, and returns the results.

A host decides nothing: the run's workload (its trees, and the orchestrator's builder settings
and salt) reaches it once, with its configuration, and each credit names the turn to send and
the routing decision's outputs (runner/fleet/wire.py); it builds the body the orchestrator's
own builder would (runner/wallclock/prompts.py). It holds a copy of every session it served (the
history it last sent) until that session's last turn is answered here; copies of sessions
whose later turns went to another worker stay, which is the stale-copy leak of seed 004, now
in a real process's memory. Its heartbeat reports RSS, CPU time, requests in flight and its
copies, so the orchestrator and the live page see each worker as the operating system does.

The run's configuration (endpoint, API key, headers, which may carry credentials) and its
workload (prompts may be confidential too) reach the hosts through Redis sealed: a Fernet
token under a key made for that run alone (`new_fleet_secret`), which never goes to Redis
itself. The orchestrator hands it to the hosts it starts out of band: a local `client-worker`
process in its environment (SECRET_ENV, not on its command line, which any user of the machine
can read), the web service's `fleet.host` task wrapped under the service's own at-rest key
(aiperf_web/core/crypto.py), which its hosts worker shares. Why this and not a call to the
service for the key: the hosts need nothing but Redis and the endpoint today; a call back
would give every host machine a route to the service's API and a credential for it, and the
runner (which has no service) a second way to work. Anyone reading Redis (a shared instance, a
dump, MONITOR) sees ciphertext only, and one run's key opens nothing of another run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import signal
import socket
import sys
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

import redis.asyncio as aioredis
from cryptography.fernet import Fernet, InvalidToken
from redis.exceptions import ResponseError

from runner.client import EncodedRequest, InferenceClient, ResponseResult, Timeouts
from runner.errors import ErrorCategory
from runner.fleet.loop import fleet_loop
from runner.fleet.plan import FleetError
from runner.fleet.resp import Pipelined, connect
from runner.fleet.wire import (
    CONTROL_CANCEL,
    CONTROL_STOP,
    GROUP,
    HEARTBEAT_S,
    HEARTBEAT_TTL_S,
    CreditEntry,
    RunKeys,
    Workload,
    decode_credits,
    decode_workload,
    encode_results,
    result_row,
)
from runner.wallclock.load import LoopLoad
from runner.wallclock.pacing import loop_pacer
from runner.wallclock.prompts import RequestBuilder
from runner.workers.history import HistoryStore

__all__ = [
    "SECRET_ENV",
    "HostClient",
    "HostReport",
    "new_fleet_secret",
    "read_host_config",
    "run_host",
    "serve_hosts",
    "write_host_config",
]

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_READ_BATCH = 512  # stream entries per read: one tick's worth at thousands of credits/s
_READ_BLOCK_MS = 100  # a read waits this long for work before checking whether to leave
_FINAL_FLUSH_S = 10.0  # after the stop: in-flight answers and the last results, at most
_RETURNS_LINGER_S = 60  # the results list outlives a host's end by this much (as the run's keys)
# The environment variable a local host process reads its run's key from.
SECRET_ENV = "AIPERF_FLEET_SECRET"


def new_fleet_secret() -> str:
    """A run's own key for its hosts' configuration (a Fernet key, urlsafe base64)."""
    return Fernet.generate_key().decode()


@dataclass(slots=True)
class HostReport:
    worker: int
    sent: int = 0
    cancelled: int = 0
    copies: int = 0  # session copies still held when the run ended (stale ones)
    copy_bytes: int = 0  # their length as text
    copy_held_bytes: int = 0  # what holding them as shared pieces costs (runner/workers/history)
    rss_start_bytes: int = 0
    rss_end_bytes: int = 0
    stopped: str = ""  # "stop" (told to), "orphaned" (the orchestrator went away)


@dataclass(slots=True)
class _State:
    # Session -> (the body last sent for it as shared pieces, its length as text).
    sessions: dict[str, tuple[tuple[bytes, ...], int]] = field(default_factory=dict)
    histories: HistoryStore = field(default_factory=HistoryStore)
    copy_bytes: int = 0
    tasks: dict[int, asyncio.Task[None]] = field(default_factory=dict)
    unanswered: dict[bytes, int] = field(default_factory=dict)  # stream entry -> its credits
    outbox: list[list[Any]] = field(default_factory=list)  # result rows (wire.result_row)
    acks: list[bytes] = field(default_factory=list)
    flush_wanted: asyncio.Event = field(default_factory=asyncio.Event)
    # Set when the host winds down: its loops finish the Redis command in hand and leave
    # (cancelling redis-py's asyncio client mid-command can leave it waiting forever).
    closing: asyncio.Event = field(default_factory=asyncio.Event)


def serve_hosts(
    redis_url: str,
    run: str,
    workers: Sequence[int],
    *,
    secret: str,
    wait_config_s: float = 30.0,
) -> list[HostReport]:
    """`run_host` for each of `workers` together on this process's own event loop, blocking:
    what a client-worker process runs (`python -m runner client-worker`, the service's
    `fleet.host` task). Each worker keeps its own stream, connections, session copies and
    heartbeat; they share the process, so their heartbeats report the same `host`, RSS and CPU.
    `secret` is the run's key (`new_fleet_secret`), given by whoever started the run.
    `kill -USR1 <pid>` prints what each of its tasks waits on."""
    with asyncio.Runner(loop_factory=fleet_loop) as runner:
        return runner.run(
            _with_stack_dump(_run_hosts(redis_url, run, workers, secret, wait_config_s))
        )


async def _run_hosts(
    redis_url: str, run: str, workers: Sequence[int], secret: str, wait_config_s: float
) -> list[HostReport]:
    hosts = (
        run_host(redis_url, run, w, secret=secret, wait_config_s=wait_config_s) for w in workers
    )
    return list(await asyncio.gather(*hosts))


_T = TypeVar("_T")


async def _with_stack_dump(coro: Coroutine[Any, Any, _T]) -> _T:
    loop = asyncio.get_running_loop()

    def dump() -> None:
        for task in asyncio.all_tasks(loop):
            task.print_stack(file=sys.stderr)
        sys.stderr.flush()

    # Not in every thread or on every platform (a task queue's worker thread): then without.
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGUSR1, dump)
    return await coro


def rss_bytes() -> int:
    """This process's resident set now (Linux), else its peak."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def write_host_config(
    client: Any,
    keys: RunKeys,
    *,
    endpoint: str,
    api_key: str | None,
    headers: dict[str, str],
    timeouts: Timeouts,
    connections: int,
    ttl_s: int,
    secret: str,
    workload: bytes | None = None,
) -> Any:
    """What every host of the run needs to reach the endpoint (a pipeline or client call) and
    to build its requests (`workload`, wire.encode_workload), sealed under the run's key
    `secret`: Redis never holds the API key, a header or a prompt in the clear. The sealed
    text is the configuration's JSON line, then the workload's bytes after a newline."""
    payload = {
        "endpoint": endpoint,
        "api_key": api_key,
        "headers": headers,
        "timeouts": [timeouts.connect_s, timeouts.read_s, timeouts.total_s, timeouts.pool_s],
        "connections": connections,
    }
    plain = json.dumps(payload).encode()
    if workload is not None:
        plain += b"\n" + workload
    sealed = Fernet(secret.encode()).encrypt(plain)
    return client.set(keys.prefix + "config", sealed, ex=ttl_s)


def open_host_config(sealed: bytes, secret: str) -> tuple[bytes, Workload | None]:
    """The configuration `write_host_config` sealed, as JSON, and the run's workload (None
    when it was given none); FleetError when `secret` is not the run's key (a host given
    another run's key, or none)."""
    try:
        plain = Fernet(secret.encode()).decrypt(sealed)
    except (InvalidToken, ValueError):
        raise FleetError(
            "the run's configuration does not open with the key this host was given "
            f"({SECRET_ENV} or the service's host task): it belongs to another run"
        ) from None
    # JSON never holds a raw newline: the first one ends the configuration.
    config, newline, workload = plain.partition(b"\n")
    return config, decode_workload(workload) if newline else None


class HostClient(Protocol):
    """What a host sends its credits through: the run's `InferenceClient`, or a stand-in that
    answers without a server (the fleet benchmark's transport-only figure)."""

    async def send(
        self,
        request: EncodedRequest,
        *,
        headers: Mapping[str, str] | None = None,
        on_result: Callable[[ResponseResult], None] | None = None,
    ) -> Any: ...

    async def aclose(self) -> None: ...


def read_host_config(raw: bytes) -> HostClient:
    """The client the run's configuration (`write_host_config`, opened) describes."""
    config = json.loads(raw)
    connect_s, read_s, total_s, pool_s = config["timeouts"]
    client = InferenceClient(
        config["endpoint"],
        concurrency=max(1, int(config["connections"])),
        api_key=config["api_key"],
        headers=config["headers"],
        timeouts=Timeouts(connect_s=connect_s, read_s=read_s, total_s=total_s, pool_s=pool_s),
    )
    return client


async def run_host(
    redis_url: str,
    run: str,
    worker: int,
    *,
    secret: str = "",
    wait_config_s: float = 30.0,
    client_for: Callable[[bytes], HostClient] = read_host_config,
) -> HostReport:
    """Serve client worker `worker` of run `run` until the orchestrator says stop (or stops
    refreshing the run's `alive` key). Returns what this worker did and holds. `secret`, the
    run's key, opens the run's configuration and workload; `client_for` turns the
    configuration into the client requests go through (a benchmark's stand-in answers without
    a server)."""
    keys = RunKeys(run)
    stream = keys.credits(worker)
    consumer = f"{socket.gethostname()}:{os.getpid()}"
    r = aioredis.from_url(redis_url, socket_timeout=15.0, socket_connect_timeout=5)
    report = HostReport(worker=worker, rss_start_bytes=rss_bytes())
    try:
        raw = await _wait_for(r, keys.prefix + "config", wait_config_s)
        if raw is None:
            report.stopped = "orphaned"
            return report
        try:
            config, workload = open_host_config(raw, secret)
            client = client_for(config)
        except FleetError as exc:
            report.stopped = f"failed: {exc}"
            return report
        with contextlib.suppress(ResponseError):  # BUSYGROUP: the orchestrator made it
            await r.xgroup_create(stream, GROUP, id="0", mkstream=True)
        state = _State()
        builder = None if workload is None else _Builder(workload)
        wall_offset = time.time() - time.perf_counter()
        # Reads and writes of every batch on lean connections of their own (resp.py).
        reads = connect(redis_url, timeout_s=15.0)
        writes = connect(redis_url, timeout_s=15.0)
        flusher = asyncio.create_task(_flush(writes, keys, stream, state, report))
        beats = asyncio.create_task(_heartbeat(r, keys, worker, state, report, consumer))
        try:
            report.stopped = await _serve(
                reads, stream, consumer, client, builder, state, report, wall_offset
            )
        except (aioredis.RedisError, OSError) as exc:
            report.stopped = f"failed: {exc}"
        # Answer what is still in flight (bounded: the orchestrator has settled anything
        # older), then hand the last results over and leave.
        if state.tasks:
            _, late = await asyncio.wait(list(state.tasks.values()), timeout=_FINAL_FLUSH_S)
            for task in late:
                task.cancel()
        state.closing.set()
        state.flush_wanted.set()
        _, stuck = await asyncio.wait([flusher, beats], timeout=_FINAL_FLUSH_S)
        for task in stuck:
            task.cancel()  # abandoned: the process is leaving
        with contextlib.suppress(TimeoutError, aioredis.RedisError, OSError):
            async with asyncio.timeout(_FINAL_FLUSH_S):
                await client.aclose()
                await reads.aclose()
                await writes.aclose()
                pipe = r.pipeline(transaction=False)
                pipe.delete(keys.heartbeat(worker))
                # Results pushed after the orchestrator stopped popping (answers late past its
                # drain) made the list anew, with no expiry: it goes with the run's other keys.
                pipe.expire(keys.returns, _RETURNS_LINGER_S)
                await pipe.execute()
        report.copies = len(state.sessions)
        report.copy_bytes = state.copy_bytes
        report.copy_held_bytes = state.histories.held_bytes
        report.rss_end_bytes = rss_bytes()
        return report
    finally:
        with contextlib.suppress(TimeoutError, aioredis.RedisError, OSError):
            async with asyncio.timeout(_FINAL_FLUSH_S):
                await r.aclose()


async def _wait_for(r: aioredis.Redis, key: str, timeout_s: float) -> bytes | None:
    deadline = time.monotonic() + timeout_s
    while True:
        raw = cast(bytes | None, await r.get(key))
        if raw is not None or time.monotonic() >= deadline:
            return raw
        await asyncio.sleep(0.05)


async def _serve(
    reads: Pipelined,
    stream: str,
    consumer: str,
    client: HostClient,
    builder: _Builder | None,
    state: _State,
    report: HostReport,
    wall_offset: float,
) -> str:
    read = [
        ("XREADGROUP", "GROUP", GROUP, consumer, "COUNT", _READ_BATCH, "BLOCK", _READ_BLOCK_MS,
         "STREAMS", stream, ">")
    ]  # fmt: skip
    while True:
        (reply,) = await reads.call(read)
        if report.stopped:  # orphaned (heartbeat) or failed (flusher)
            return report.stopped
        if not reply:
            continue
        for entry_id, flat in cast(list[tuple[bytes, list[bytes]]], reply[0][1]):
            fields = dict(zip(flat[::2], flat[1::2], strict=True))
            control = fields.get(b"c")
            if control is None:
                credits = decode_credits(fields)
                state.unanswered[entry_id] = len(credits)
                for credit in credits:
                    state.tasks[credit.id] = asyncio.create_task(
                        _send(client, builder, credit, entry_id, state, wall_offset)
                    )
                report.sent += len(credits)
                continue
            state.acks.append(entry_id)
            if control == CONTROL_CANCEL:
                for credit_id in fields[b"ids"].split(b","):
                    task = state.tasks.get(int(credit_id))
                    if task is not None:
                        task.cancel()
                        report.cancelled += 1
            elif control == CONTROL_STOP:
                return "stop"
        state.flush_wanted.set()


class _Builder:
    """The run's request builder on this host: the orchestrator's settings and salt, over the
    workload's trees (a credit names its tree by index)."""

    def __init__(self, workload: Workload) -> None:
        self.trees = workload.trees
        self.scopes = workload.scopes
        self.builder = RequestBuilder(
            (),
            model=workload.model,
            isolate_trees=workload.isolate_trees,
            want_worker_id=workload.want_worker_id,
            ignore_eos=workload.ignore_eos,
            marker_salt=workload.salt,
        )

    def build(self, credit: CreditEntry) -> tuple[EncodedRequest, Mapping[str, str]]:
        request, headers = self.builder.build_turn(
            self.trees[credit.tree],
            self.scopes[credit.tree],
            credit.template_id,
            credit.turn_index,
            root_id=credit.root_id,
            session_id=credit.session_id,
            priming=credit.priming,
            affinity=credit.decision(),
        )
        return EncodedRequest(request.path, request.encoded()), headers


async def _send(
    client: HostClient,
    builder: _Builder | None,
    entry: CreditEntry,
    entry_id: bytes,
    state: _State,
    wall_offset: float,
) -> None:
    results: list[ResponseResult] = []
    try:
        if builder is None:
            raise ValueError("the run gave this host no workload")
        await loop_pacer().turn()
        request, headers = builder.build(entry)
    except asyncio.CancelledError:
        request = None  # cancelled by the orchestrator before it was built: recorded there
    except (ValueError, LookupError) as exc:
        # A credit this host cannot build (a workload that is not the run's): answered as
        # the client's own failure, and the run's failure threshold decides.
        results.append(_unbuilt(str(exc)))
        request = None
    if request is not None:
        body = request.content
        # The copy this worker now holds of the session's history: what it last sent.
        # Held as shared pieces: what it shares with its previous turn costs nothing again.
        old = state.sessions.get(entry.session_id)
        history = state.histories.hold(body, old[0] if old is not None else None)
        if old is not None:
            state.histories.release(old[0])
            state.copy_bytes -= old[1]
        state.sessions[entry.session_id] = (history, len(body))
        state.copy_bytes += len(body)
    try:
        if request is not None:
            await client.send(request, headers=headers or None, on_result=results.append)
    except asyncio.CancelledError:
        pass  # cancelled by the orchestrator, which has recorded it already
    finally:
        del state.tasks[entry.id]
        if entry.session_end:
            gone = state.sessions.pop(entry.session_id, None)
            if gone is not None:
                state.histories.release(gone[0])
                state.copy_bytes -= gone[1]
        if results:
            state.outbox.append(result_row(entry.id, results[0], wall_offset))
        left = state.unanswered.pop(entry_id) - 1
        if left:
            state.unanswered[entry_id] = left
        else:  # the stream entry's every credit is answered
            state.acks.append(entry_id)
        state.flush_wanted.set()


def _unbuilt(detail: str) -> ResponseResult:
    # The worker cannot serve: no category says more (and the failure threshold counts it).
    return ResponseResult.failure(
        time.perf_counter(),
        ErrorCategory.WORKER_LOST,
        f"the client worker cannot build the request: {detail}"[:200],
    )


async def _flush(
    writes: Pipelined, keys: RunKeys, stream: str, state: _State, report: HostReport
) -> None:
    """Results and acknowledgements go out in one pipelined round trip per batch: what
    finished while the previous batch was on the wire makes the next one. A host that cannot
    return results is of no use: it leaves, its heartbeat stops, and the orchestrator settles
    what it owed as lost."""
    try:
        await _flush_forever(writes, keys, stream, state)
    except (aioredis.RedisError, OSError) as exc:
        report.stopped = f"failed: {exc}"


async def _flush_forever(writes: Pipelined, keys: RunKeys, stream: str, state: _State) -> None:
    while True:
        # Once closing, nothing wakes this loop again: it flushes what is left and leaves.
        if not state.closing.is_set():
            await state.flush_wanted.wait()
        state.flush_wanted.clear()
        if not (state.outbox or state.acks):
            if state.closing.is_set():
                return
            continue
        results, state.outbox = state.outbox, []
        acks, state.acks = state.acks, []
        commands: list[list[bytes | str]] = []
        if results:
            commands.append(["RPUSH", keys.returns, encode_results(results)])
        if acks:
            commands.append(["XACK", stream, GROUP, *acks])
            # An answered credit is of no more use: its entry must not stay in Redis for the
            # whole run.
            commands.append(["XDEL", stream, *acks])
        await writes.call(commands)


async def _heartbeat(
    r: aioredis.Redis,
    keys: RunKeys,
    worker: int,
    state: _State,
    report: HostReport,
    consumer: str,
) -> None:
    """Beats every HEARTBEAT_S; leaves when the orchestrator's `alive` key is gone (it died
    or the run ended without telling this host), so no host outlives its run for long."""
    ttl_ms = int(HEARTBEAT_TTL_S * 1000)
    # How late this process's event loop wakes up, over each beat's interval (the in-process
    # client's probe, runner/wallclock/load.py): a host whose loop is late sends its requests
    # and reads its streams late, which its CPU seconds alone do not always show.
    probe = LoopLoad.start()
    try:
        await _beat_until_closing(r, keys, worker, state, report, consumer, probe, ttl_ms)
    finally:
        await probe.stop()


async def _beat_until_closing(
    r: aioredis.Redis,
    keys: RunKeys,
    worker: int,
    state: _State,
    report: HostReport,
    consumer: str,
    probe: LoopLoad,
    ttl_ms: int,
) -> None:
    silent_since: float | None = None
    while not state.closing.is_set():
        load = probe.read()
        beat = {
            "worker": worker,
            "host": consumer,
            "t": time.time(),
            "rss_bytes": rss_bytes(),
            "cpu_s": round(time.process_time(), 3),
            "in_flight": len(state.tasks),
            "copies": len(state.sessions),
            "copy_bytes": state.copy_bytes,
            "copy_held_bytes": state.histories.held_bytes,
            "sent": report.sent,
            "loop_lag_ms": load["loop_lag_ms"],
            "loop_lag_mean_ms": load["loop_lag_mean_ms"],
        }
        pipe = r.pipeline(transaction=False)
        pipe.set(keys.heartbeat(worker), json.dumps(beat), px=ttl_ms)
        pipe.exists(keys.prefix + "alive")
        try:
            _, alive = await pipe.execute()
            silent_since = None
        except (aioredis.RedisError, OSError):
            # A blip: keep serving; Redis gone for longer than a heartbeat's life means the
            # orchestrator has already counted this worker lost.
            now = time.monotonic()
            silent_since = silent_since or now
            alive = now - silent_since < HEARTBEAT_TTL_S
        if not alive:
            report.stopped = report.stopped or "orphaned"
            for task in list(state.tasks.values()):
                task.cancel()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(state.closing.wait(), HEARTBEAT_S)
