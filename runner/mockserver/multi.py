"""The mock served by several processes: HTTP fronts sharing one port, one owner of the state.

Owns the multi-process mode (`mock-server --processes N`, `start_mock_server(processes=N)`):
N front processes each listen on the same port with SO_REUSEPORT, so the kernel spreads new
connections over N accept loops, and one owner process (the one that started them) keeps the
cluster state. It decides nothing itself: routing, caching and timing stay `runner.cluster`'s,
the HTTP surface `app.py`'s.

Why one state owner rather than shared memory or sessions pinned to processes: the cluster's
decisions read state that every session writes (the KV router scores each worker by a prefix
cache all sessions filled; header and session_control bindings; batch slots; the fault RNG
drawn in arrival order). Pinning a session to a front would split that state and change the
decisions; sharing a Python object graph across processes would need a lock around every
read. So the owner holds the one `MockApp` state a single-process mock holds, and the
fronts do what costs per byte and per connection (accept, HTTP, JSON, tokens and block keys,
SSE rendering and pacing) and ask the owner one small question per request: the same
decisions in the order the owner receives them, the same `/stats`, `/metrics`, `/health`
and `/admin/*` answers from whichever front a client reaches.

Wire: one socketpair per front, frames of a 4-byte big-endian length and a pickle (both ends
are this package, the pair is private to the two processes).

    front -> owner   ("decide", corr, keys, prompt_tokens, output_tokens, session_control,
                      session, parent, start)         -> ("re", corr, Decision)
                     ("cancel", request_id, now)        (no answer)
                     ("stats" | "health", corr)         -> ("re", corr, value)
                     ("admin", corr, path)              -> ("re", corr, body) | ("err", ...)
                     ("counters", token, ServerStats, cpu_s, pid)   (answers "counters?")
    owner -> front   ("reset",)  ("lost", request_ids)  ("counters?", token)

Block keys are hashes of the prompt's words (str hashes, salted per process): the fronts share
one PYTHONHASHSEED, drawn at random per server, so one prompt names the same blocks on each.

Times cross as `time.monotonic()` values: CLOCK_MONOTONIC is one clock for every process of
the machine, so the owner subtracts its own clock origin.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import itertools
import json
import logging
import os
import pickle
import secrets
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import uvloop

from runner.errors import RunnerError
from runner.mockserver.app import Decision, MockApp
from runner.mockserver.config import MockServerConfig
from runner.mockserver.parse import ApiError, Call
from runner.mockserver.stats import ProcessStats, ServerCounters, ServerStats, StatsBody

__all__ = ["MAX_PROCESSES", "FrontApp", "front_main", "run_owner"]

MAX_PROCESSES = 64
_HEAD = struct.Struct(">I")
_STARTUP_TIMEOUT_S = 30.0
# /stats and /metrics wait this long for each front's counters; a front that is later (a
# starved machine) counts with the last counters it sent, so a scrape is never refused.
_COUNTERS_TIMEOUT_S = 1.0
_FRONT_READY = "mock front ready"
_log = logging.getLogger("runner.mockserver")


# -- framing -------------------------------------------------------------------------------


def _frame(message: tuple[Any, ...]) -> bytes:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEAD.pack(len(payload)) + payload


async def _read(reader: asyncio.StreamReader) -> tuple[Any, ...] | None:
    """The next message, or None at the end of the stream."""
    try:
        head = await reader.readexactly(_HEAD.size)
        payload = await reader.readexactly(_HEAD.unpack(head)[0])
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    message: tuple[Any, ...] = pickle.loads(payload)
    return message


def _keys_bytes(keys: tuple[int, ...]) -> bytes:
    # Chained block keys are Python hashes: signed 64-bit. 8 bytes each, no per-int pickling.
    return array.array("q", keys).tobytes()


def _keys_tuple(data: bytes) -> tuple[int, ...]:
    keys = array.array("q")
    keys.frombytes(data)
    return tuple(keys)


# -- the front -----------------------------------------------------------------------------


class FrontApp(MockApp):
    """The HTTP face in a front process: its own counters and in-flight answers, the
    cluster state asked of the owner over `attach`ed streams."""

    def __init__(self, config: MockServerConfig) -> None:
        self._writer: asyncio.StreamWriter | None = None
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._corr = itertools.count(1)
        super().__init__(config)

    def reset(self) -> None:
        """The local half of a reset (the owner's broadcast): fresh counters and in-flight
        table; answers in flight settle with those they started with, as in one process."""
        self._counters = ServerCounters()
        self._flights = {}
        self._cancel = self._send_cancel

    def attach(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> asyncio.Task[None]:
        """Start reading the owner's messages; the task ends when the owner goes away."""
        self._writer = writer
        return asyncio.ensure_future(self._listen(reader))

    async def _listen(self, reader: asyncio.StreamReader) -> None:
        try:
            while (message := await _read(reader)) is not None:
                kind = message[0]
                if kind == "re":
                    future = self._pending.pop(message[1], None)
                    if future is not None and not future.done():
                        future.set_result(message[2])
                elif kind == "err":
                    future = self._pending.pop(message[1], None)
                    if future is not None and not future.done():
                        _, _, status, text, code = message
                        future.set_exception(ApiError(status, text, code=code))
                elif kind == "lost":
                    self.lose(message[1])
                elif kind == "reset":
                    self.reset()
                elif kind == "counters?":
                    self._send(
                        (
                            "counters",
                            message[1],
                            self._counters.snapshot(),
                            time.process_time(),
                            os.getpid(),
                        )
                    )
        finally:
            gone = ApiError(503, "the mock's state process is gone", code="no_state")
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(gone)
            self._pending.clear()
            self._writer = None

    def _send(self, message: tuple[Any, ...]) -> None:
        if self._writer is None:
            raise ApiError(503, "the mock's state process is gone", code="no_state")
        self._writer.write(_frame(message))

    async def _ask(self, *message: Any) -> Any:
        corr = next(self._corr)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[corr] = future
        try:
            self._send((message[0], corr, *message[1:]))
        except ApiError:
            del self._pending[corr]
            raise
        return await future

    def _send_cancel(self, request_id: str, now: float) -> None:
        with contextlib.suppress(ApiError):
            self._send(("cancel", request_id, now))

    async def _decide(self, call: Call, session: str | None, parent: str | None) -> Decision:
        decision: Decision = await self._ask(
            "decide",
            _keys_bytes(call.block_keys),
            call.prompt_tokens,
            call.output_tokens,
            call.session_control,
            session,
            parent,
            time.monotonic(),
        )
        return decision

    async def _stats_body(self) -> StatsBody:
        body: StatsBody = await self._ask("stats")
        return body

    async def _admin_async(self, path: str) -> bytes:
        body: bytes = await self._ask("admin", path)
        return body

    async def _workers_up(self) -> tuple[int, int]:
        up: tuple[int, int] = await self._ask("health")
        return up


def front_main() -> int:
    """A front process: argv HOST PORT FD (FD: its end of the owner's socketpair), the
    config as JSON on stdin; one ready line on stdout once listening."""
    from runner.mockserver.server import (
        _hide_deliberate_disconnects,
        _interrupt,
        _listen,
        _run,
        _uvicorn_server,
        config_from_json,
    )

    host, port, fd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    config = config_from_json(json.loads(sys.stdin.read()))
    sock = _listen(host, port, reuse_port=True)
    link = socket.socket(fileno=fd)
    app = FrontApp(config)
    server = _uvicorn_server(app)

    async def setup() -> None:
        reader, writer = await asyncio.open_connection(sock=link, limit=2**26)
        task = app.attach(reader, writer)
        # The owner gone (stopped, killed): this front stops too, never serving alone.
        task.add_done_callback(lambda _: setattr(server, "should_exit", True))

    def ready() -> None:
        sys.stdout.write(f"{_FRONT_READY} {os.getpid()}\n")
        sys.stdout.flush()

    _hide_deliberate_disconnects()
    signal.signal(signal.SIGTERM, _interrupt)
    with contextlib.suppress(KeyboardInterrupt):
        _run(server, sock, ready, setup)
    return 0


# -- the owner -----------------------------------------------------------------------------


class _OwnerApp(MockApp):
    """The one cluster state: a MockApp that serves no HTTP; its resets and lost answers
    reach every front."""

    def __init__(self, config: MockServerConfig, owner: _Owner) -> None:
        self._owner = owner
        super().__init__(config)

    def reset(self) -> None:
        super().reset()
        self._owner.broadcast(("reset",))

    def lose(self, request_ids: Any) -> None:
        ids = tuple(request_ids)
        if ids:
            self._owner.broadcast(("lost", ids))


class _Owner:
    def __init__(self, config: MockServerConfig) -> None:
        self.writers: list[asyncio.StreamWriter] = []
        self.pids: list[int] = []
        self.app = _OwnerApp(config, self)
        self._tokens = itertools.count(1)
        self._gathering: dict[int, tuple[list[tuple[Any, ...]], asyncio.Future[None]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._last: dict[int, tuple[Any, ...]] = {}  # each front's latest counters, by pid

    def broadcast(self, message: tuple[Any, ...]) -> None:
        frame = _frame(message)
        for writer in self.writers:
            writer.write(frame)

    async def serve_front(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        app = self.app
        while (message := await _read(reader)) is not None:
            kind = message[0]
            if kind == "decide":
                _, corr, keys, prompt_tokens, output_tokens, control, session, parent, start = (
                    message
                )
                call = Call(
                    chat=True,
                    stream=True,
                    include_usage=False,
                    prompt_tokens=prompt_tokens,
                    block_keys=_keys_tuple(keys),
                    output_tokens=output_tokens,
                    finish_reason="",
                    want_worker_id=False,
                    session_control=control,
                )
                writer.write(_frame(("re", corr, app.decide(call, session, parent, start))))
            elif kind == "cancel":
                app._cancel(message[1], message[2])
            elif kind == "counters":
                self._last[message[4]] = message
                gathering = self._gathering.get(message[1])
                if gathering is not None:
                    gathering[0].append(message)
                    if len(gathering[0]) == len(self.writers) and not gathering[1].done():
                        gathering[1].set_result(None)
            elif kind == "stats":
                # Gathered in a task: the fronts' answers arrive on this very loop.
                task = asyncio.ensure_future(self._answer_stats(writer, message[1]))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            elif kind == "health":
                writer.write(_frame(("re", message[1], app.workers_up())))
            elif kind == "admin":
                try:
                    body = app.admin(message[2])
                except ApiError as exc:
                    writer.write(_frame(("err", message[1], exc.status, exc.message, exc.code)))
                else:
                    writer.write(_frame(("re", message[1], body)))

    async def _answer_stats(self, writer: asyncio.StreamWriter, corr: int) -> None:
        writer.write(_frame(("re", corr, await self.stats())))

    async def stats(self) -> StatsBody:
        """The owner's cluster stats with every front's counters summed, CPU of all."""
        token = next(self._tokens)
        answers: list[tuple[Any, ...]] = []
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._gathering[token] = (answers, done)
        try:
            self.broadcast(("counters?", token))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done, _COUNTERS_TIMEOUT_S)
        finally:
            del self._gathering[token]
        body = self.app.stats()
        own_cpu = body["process_cpu_s"]
        processes = [ProcessStats(role="state", pid=os.getpid(), cpu_s=own_cpu, requests=0)]
        server = body["server"]
        for _, _, counters, cpu_s, pid in sorted(self._last.values(), key=lambda a: a[4]):
            _add_counters(server, counters)
            served = sum(counters["requests"].values())
            processes.append(
                ProcessStats(role="http", pid=pid, cpu_s=round(cpu_s, 3), requests=served)
            )
        body["process_cpu_s"] = round(sum(p["cpu_s"] for p in processes), 3)
        body["processes"] = processes
        return body


def _add_counters(total: ServerStats, part: ServerStats) -> None:
    for status, n in part["requests"].items():
        total["requests"][status] = total["requests"].get(status, 0) + n
    total["requests"] = dict(sorted(total["requests"].items(), key=lambda item: int(item[0])))
    for kind, n in part["faults_injected"].items():
        total["faults_injected"][kind] = total["faults_injected"].get(kind, 0) + n
    for key in (
        "streams_broken",
        "worker_down_failures",
        "client_disconnects",
        "prompt_tokens",
        "cached_tokens",
        "completion_tokens",
        "coalesced_tokens",
        "in_flight",
    ):
        total[key] += part[key]


def run_owner(
    config: MockServerConfig,
    *,
    host: str,
    port: int,
    processes: int,
    on_ready: Callable[[str], None],
    stop: threading.Event | None = None,
) -> None:
    """Start `processes` fronts on host:port, then own the state until stopped.

    Blocks. Stops on `stop` being set, or (main thread) SIGINT / SIGTERM; a front that dies
    stops the whole server with RunnerError. `on_ready(url)` once every front listens.
    """
    from runner.mockserver.server import _listen, _read_line, _url, config_to_json

    if not 2 <= processes <= MAX_PROCESSES:
        raise RunnerError(f"processes must be 2..{MAX_PROCESSES} here, got {processes}")
    # Holds the port (port 0 resolves here) until the fronts listen on it; never listens.
    placeholder = _listen(host, port, reuse_port=True)
    url = _url(host, placeholder)
    bound = placeholder.getsockname()[1]
    owner = _Owner(config)
    pairs = [socket.socketpair() for _ in range(processes)]
    children: list[subprocess.Popen[str]] = []
    try:
        config_json = json.dumps(config_to_json(config))
        hash_seed = 1 + secrets.randbelow(2**32 - 1)  # random per server, as Python's own
        for _, theirs in pairs:
            children.append(_spawn_front(host, bound, theirs, config_json, hash_seed))
            theirs.close()
        deadline = time.monotonic() + _STARTUP_TIMEOUT_S
        for child in children:
            line = _read_line(child, max(0.1, deadline - time.monotonic()))
            if not line or not line.startswith(_FRONT_READY):
                raise RunnerError(f"a mock front process did not start (said {line!r})")
            owner.pids.append(child.pid)
        placeholder.close()
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(_own(owner, [mine for mine, _ in pairs], children, url, on_ready, stop))
    finally:
        placeholder.close()
        _stop_children(children)
        for mine, theirs in pairs:
            mine.close()
            theirs.close()


def _spawn_front(
    host: str, port: int, link: socket.socket, config_json: str, hash_seed: int
) -> subprocess.Popen[str]:
    script = "import sys; from runner.mockserver.multi import front_main; sys.exit(front_main())"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = [root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    # One str-hash salt for all fronts: block keys hash the prompt's words (parse.block_keys),
    # and salted per process the same prompt would name different blocks on each front.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "PYTHONHASHSEED": str(hash_seed)}
    child = subprocess.Popen(
        [sys.executable, "-c", script, host, str(port), str(link.fileno())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=None,
        env=env,
        text=True,
        pass_fds=(link.fileno(),),
    )
    assert child.stdin is not None
    child.stdin.write(config_json)
    child.stdin.close()
    return child


async def _own(
    owner: _Owner,
    links: list[socket.socket],
    children: list[subprocess.Popen[str]],
    url: str,
    on_ready: Callable[[str], None],
    stop: threading.Event | None,
) -> None:
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stopping.set)
    tasks = []
    for link in links:
        reader, writer = await asyncio.open_connection(sock=link, limit=2**26)
        owner.writers.append(writer)
        tasks.append(asyncio.ensure_future(owner.serve_front(reader, writer)))
    on_ready(url)
    failure = None
    try:
        while not stopping.is_set():
            if stop is not None and stop.is_set():
                break
            dead = [c for c in children if c.poll() is not None]
            if dead or any(t.done() for t in tasks):
                codes = ", ".join(f"{c.pid}: exit {c.returncode}" for c in dead)
                failure = f"a mock front process ended ({codes or 'its link closed'})"
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), 0.25)
    finally:
        for task in tasks:
            task.cancel()
        for writer in owner.writers:
            writer.close()
    if failure is not None:
        _log.error("%s; stopping the mock", failure)
        raise RunnerError(failure)


def _stop_children(children: list[subprocess.Popen[str]], timeout_s: float = 10.0) -> None:
    for child in children:
        if child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signal.SIGINT)
    deadline = time.monotonic() + timeout_s
    for child in children:
        try:
            child.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
