"""A lean Redis connection for the fleet's busiest calls: the orchestrator's per-tick append
of credits and its pop of results, a host's read of credits and push of results.

redis-py's asyncio client spends 150-220 µs of CPU a command on this machine (a pool lease,
its command packing and retry wrappers, a lock; measured with hiredis present), and the
orchestrator makes two such calls every tick of a few credits: at 2,000 credits/s that alone
was more CPU than the engine's own work. Here a pipeline is one write of the packed commands on
an asyncio protocol whose replies hiredis parses; the replies of each call are matched to it in
order (a FIFO of calls, so a caller cancelled mid-call leaves the connection usable: its
replies are read and dropped). Errors are redis-py's exceptions (ResponseError for an error
reply, ConnectionError and TimeoutError for the link), so callers handle both clients alike.

Plain TCP and Unix sockets, with AUTH and SELECT from the URL; a URL it does not take (TLS)
falls back to redis-py (`connect`).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Sequence
from typing import Any, Protocol

import hiredis
import redis.asyncio as aioredis
from redis.asyncio.connection import SSLConnection, parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = ["Pipelined", "connect"]

Command = Sequence[bytes | str | int | float]


class Pipelined(Protocol):
    """Commands sent together, their replies in order (an error reply raises)."""

    async def call(self, commands: Sequence[Command]) -> list[Any]: ...

    async def aclose(self) -> None: ...


def connect(url: str, *, timeout_s: float) -> Pipelined:
    """A lean connection for `url` (opened on first use), or redis-py's for a URL it does not
    take. `timeout_s` bounds each call beyond any blocking time its commands ask for."""
    options = parse_url(url)
    if options.get("connection_class") is SSLConnection:
        return _RedisPy(url, timeout_s)
    return _Lean(dict(options), timeout_s)


class _Call:
    __slots__ = ("count", "future", "replies")

    def __init__(self, count: int, future: asyncio.Future[list[Any]]) -> None:
        self.count = count
        self.future = future
        self.replies: list[Any] = []


class _Protocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.reader = hiredis.Reader(replyError=ResponseError)
        self.calls: collections.deque[_Call] = collections.deque()
        self.transport: asyncio.Transport | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

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
                if not call.future.done():
                    call.future.set_result(call.replies)

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(RedisConnectionError(f"connection to Redis lost: {exc or 'closed'}"))

    def _fail(self, error: Exception) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()
        while self.calls:
            call = self.calls.popleft()
            if not call.future.done():
                call.future.set_exception(error)


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

    async def _send(self, protocol: _Protocol, commands: Sequence[Command]) -> list[Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[Any]] = loop.create_future()
        protocol.calls.append(_Call(len(commands), future))
        assert protocol.transport is not None
        protocol.transport.write(_pack(commands))
        timer = loop.call_later(self.timeout_s + _blocking_s(commands), _expire, protocol, future)
        try:
            replies = await future
        finally:
            timer.cancel()
        for reply in replies:
            if isinstance(reply, ResponseError):
                raise reply
        return replies

    async def aclose(self) -> None:
        protocol = self.protocol
        self.protocol = None
        if protocol is not None and protocol.transport is not None:
            protocol.closed = True
            protocol.transport.close()


def _expire(protocol: _Protocol, future: asyncio.Future[list[Any]]) -> None:
    """A call unanswered past its time: the link is given up (the replies in order behind it
    could not be told apart from its own), and the next call reconnects."""
    if not future.done():
        protocol._fail(RedisTimeoutError("Redis did not answer in time"))


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

    async def aclose(self) -> None:
        await self.redis.aclose()
