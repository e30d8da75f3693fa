"""A lean Redis connection for the fleet's busiest calls: the orchestrator's per-tick append
of credits and its pop of results, a host's read of credits and push of results.

redis-py's asyncio client spends 150-220 µs of CPU a command on this machine (a pool lease,
its command packing and retry wrappers, a lock; measured with hiredis present), and the
orchestrator makes two such calls every tick of a few credits: at 2,000 credits/s that alone
was more CPU than the engine's own work. Here a pipeline is one write of the packed commands on
an asyncio protocol whose replies hiredis parses; the replies of each call are matched to it in
order (a FIFO of calls, so a caller cancelled mid-call leaves the connection usable: its
replies are read and dropped). `submit` is a call without a task or future: its callback hears
the replies from the connection's own (the orchestrator's per-tick calls, where a task switch
per call was a good part of a credit's CPU); one watchdog timer per connection, not one per
call, gives up a call past its deadline. Errors are redis-py's exceptions (ResponseError for an
error reply, ConnectionError and TimeoutError for the link), so callers handle both clients
alike.

Plain TCP and Unix sockets, with AUTH and SELECT from the URL; a URL it does not take (TLS)
falls back to redis-py (`connect`).
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import hiredis
import redis.asyncio as aioredis
from redis.asyncio.connection import SSLConnection, parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = ["Pipelined", "connect"]

Command = Sequence[bytes | str | int | float]

log = logging.getLogger(__name__)

_WATCH_S = 1.0  # how often a connection looks for a call past its deadline
# The tasks `submit` needed (opening a link, redis-py's calls): held until done.
_submitting: set[asyncio.Future[None]] = set()


OnReply = Callable[[list[Any] | Exception], None]


class Pipelined(Protocol):
    """Commands sent together, their replies in order (an error reply raises).

    `call` awaits them; `submit` is the same without a task or future: `on_reply` is called
    once, with the replies or the exception `call` would raise, from the connection's own
    callback (so it must not block, and whatever it raises is its caller's fault, logged)."""

    async def call(self, commands: Sequence[Command]) -> list[Any]: ...

    def submit(self, commands: Sequence[Command], on_reply: OnReply) -> None: ...

    async def aclose(self) -> None: ...


def connect(url: str, *, timeout_s: float) -> Pipelined:
    """A lean connection for `url` (opened on first use), or redis-py's for a URL it does not
    take. `timeout_s` bounds each call beyond any blocking time its commands ask for."""
    options = parse_url(url)
    if options.get("connection_class") is SSLConnection:
        return _RedisPy(url, timeout_s)
    return _Lean(dict(options), timeout_s)


class _Call:
    """One pipeline in flight: its replies so far, and who hears them (a future, for `call`,
    or a callback, for `submit`)."""

    __slots__ = ("count", "deadline", "future", "on_reply", "replies")

    def __init__(
        self,
        count: int,
        deadline: float,
        future: asyncio.Future[list[Any]] | None,
        on_reply: OnReply | None,
    ) -> None:
        self.count = count
        self.deadline = deadline
        self.future = future
        self.on_reply = on_reply
        self.replies: list[Any] = []

    def settle(self, outcome: list[Any] | Exception) -> None:
        future = self.future
        if future is not None:
            if future.done():  # its caller was cancelled: the replies are dropped
                return
            if isinstance(outcome, Exception):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
            return
        assert self.on_reply is not None
        _deliver(self.on_reply, outcome)


def _deliver(on_reply: OnReply, outcome: list[Any] | Exception) -> None:
    """`on_reply` hears the replies, or the first error reply among them, or the link's
    error; whatever it raises is logged (it runs in the connection's callback)."""
    if not isinstance(outcome, Exception):
        error = next((r for r in outcome if isinstance(r, ResponseError)), None)
        outcome = outcome if error is None else error
    try:
        on_reply(outcome)
    except Exception:
        log.exception("a Redis reply's callback failed")


class _Protocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.reader = hiredis.Reader(replyError=ResponseError)
        self.calls: collections.deque[_Call] = collections.deque()
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._watchdog: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self._watchdog = asyncio.get_running_loop().call_later(_WATCH_S, self._watch)

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        calls = self.calls
        reader.feed(data)
        while (reply := reader.gets()) is not False:
            if not calls:  # nobody asked: a protocol error, the link is dropped
                self._fail(RedisConnectionError("a Redis reply nobody asked for"))
                return
            call = calls[0]
            call.replies.append(reply)
            if len(call.replies) == call.count:
                calls.popleft()
                call.settle(call.replies)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(RedisConnectionError(f"connection to Redis lost: {exc or 'closed'}"))

    def _watch(self) -> None:
        """One timer per connection, not one per call: a call unanswered past its deadline
        gives the link up (the replies in order behind it could not be told apart from its
        own), and the next call reconnects."""
        if self.closed:
            return
        loop = asyncio.get_running_loop()
        if self.calls and min(call.deadline for call in self.calls) < loop.time():
            self._fail(RedisTimeoutError("Redis did not answer in time"))
            return
        self._watchdog = loop.call_later(_WATCH_S, self._watch)

    def _fail(self, error: Exception) -> None:
        self.closed = True
        if self._watchdog is not None:
            self._watchdog.cancel()
        if self.transport is not None:
            self.transport.abort()
        while self.calls:
            self.calls.popleft().settle(error)


def _pack(commands: Sequence[Command]) -> bytes:
    parts: list[bytes] = []
    for command in commands:
        parts.append(b"*%d\r\n" % len(command))
        for arg in command:
            if isinstance(arg, bytes):
                data = arg
            elif isinstance(arg, str):
                data = arg.encode()
            else:
                data = repr(arg).encode()
            parts.append(b"$%d\r\n" % len(data))
            parts.append(data)
            parts.append(b"\r\n")
    return b"".join(parts)


class _Lean:
    def __init__(self, options: dict[str, Any], timeout_s: float) -> None:
        self.options = options
        self.timeout_s = timeout_s
        self.protocol: _Protocol | None = None
        self._connecting: asyncio.Lock | None = None

    async def _open(self) -> _Protocol:
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            protocol = self.protocol
            if protocol is not None and not protocol.closed:
                return protocol
            loop = asyncio.get_running_loop()
            options = self.options
            try:
                async with asyncio.timeout(self.timeout_s):
                    if "path" in options:
                        _, protocol = await loop.create_unix_connection(_Protocol, options["path"])
                    else:
                        _, protocol = await loop.create_connection(
                            _Protocol, options.get("host", "localhost"), options.get("port", 6379)
                        )
            except (OSError, TimeoutError) as exc:
                raise RedisConnectionError(f"cannot connect to Redis: {exc}") from exc
            setup: list[Command] = []
            if options.get("password"):
                username = options.get("username")
                setup.append(
                    ("AUTH", username, options["password"])
                    if username
                    else ("AUTH", options["password"])
                )
            if options.get("db"):
                setup.append(("SELECT", int(options["db"])))
            self.protocol = protocol
            if setup:
                await self._send(protocol, setup)
            return protocol

    async def call(self, commands: Sequence[Command]) -> list[Any]:
        protocol = self.protocol
        if protocol is None or protocol.closed:
            protocol = await self._open()
        return await self._send(protocol, commands)

    def submit(self, commands: Sequence[Command], on_reply: OnReply) -> None:
        protocol = self.protocol
        if protocol is not None and not protocol.closed:
            self._write(protocol, commands, None, on_reply)
            return
        # Opening takes a task; submits made meanwhile queue behind it on the lock, in order.
        task = asyncio.ensure_future(self._open_and_submit(commands, on_reply))
        _submitting.add(task)
        task.add_done_callback(_submitting.discard)

    async def _open_and_submit(self, commands: Sequence[Command], on_reply: OnReply) -> None:
        try:
            protocol = await self._open()
        except (RedisConnectionError, RedisTimeoutError, ResponseError) as exc:
            _deliver(on_reply, exc)
            return
        self._write(protocol, commands, None, on_reply)

    async def _send(self, protocol: _Protocol, commands: Sequence[Command]) -> list[Any]:
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._write(protocol, commands, future, None)
        replies = await future
        for reply in replies:
            if isinstance(reply, ResponseError):
                raise reply
        return replies

    def _write(
        self,
        protocol: _Protocol,
        commands: Sequence[Command],
        future: asyncio.Future[list[Any]] | None,
        on_reply: OnReply | None,
    ) -> None:
        deadline = asyncio.get_running_loop().time() + self.timeout_s + _blocking_s(commands)
        protocol.calls.append(_Call(len(commands), deadline, future, on_reply))
        assert protocol.transport is not None
        protocol.transport.write(_pack(commands))

    async def aclose(self) -> None:
        protocol = self.protocol
        self.protocol = None
        if protocol is not None and protocol.transport is not None:
            protocol.closed = True
            protocol.transport.close()


def _blocking_s(commands: Sequence[Command]) -> float:
    """How long the commands may block in Redis by their own arguments (BLMPOP's timeout in
    seconds, XREADGROUP's BLOCK in milliseconds)."""
    total = 0.0
    for command in commands:
        name = command[0]
        if name == "BLMPOP":
            total += float(command[1])
        elif name == "XREADGROUP" and "BLOCK" in command:
            total += float(command[list(command).index("BLOCK") + 1]) / 1000.0
    return total


class _RedisPy:
    """The same calls through redis-py (a TLS URL)."""

    def __init__(self, url: str, timeout_s: float) -> None:
        self.redis = aioredis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=5)

    async def call(self, commands: Sequence[Command]) -> list[Any]:
        pipe = self.redis.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        return list(await pipe.execute())

    def submit(self, commands: Sequence[Command], on_reply: OnReply) -> None:
        task = asyncio.ensure_future(self._call_back(commands, on_reply))
        _submitting.add(task)
        task.add_done_callback(_submitting.discard)

    async def _call_back(self, commands: Sequence[Command], on_reply: OnReply) -> None:
        try:
            outcome: list[Any] | Exception = await self.call(commands)
        except (aioredis.RedisError, OSError) as exc:
            outcome = exc
        _deliver(on_reply, outcome)

    async def aclose(self) -> None:
        await self.redis.aclose()
