"""A lean HTTP/1.1 keep-alive transport for httpx, for many concurrent streams in one process.

Owns sockets, the per-origin connection pool (O(1) checkout, LIFO reuse, bounded size, FIFO
waiters) and the read/connect/pool timeouts httpx hands it; parsing is `h1.py`. It raises
only httpx exceptions so callers cannot tell it from httpx's own transport. Why it exists:
httpcore's pool rescans every connection on every request (quadratic at concurrency 256) and
h11 costs ~15 µs per chunk of an SSE stream here; see `bench.py`. No HTTP/2, proxies or
content decoding: benchmark traffic goes straight to the endpoint, uncompressed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator
from typing import cast

import httpx

from runner.client.h1 import ProtocolError, ResponseParser, encode_request_head

__all__ = ["PooledTransport"]

# Pause reading a socket whose buffered, unread bytes exceed this (flow control).
_HIGH_WATER = 256 * 1024
# Attempts for one request when a reused keep-alive connection turns out to be closed by the
# server (it raced our write); a fresh connection failing is reported at once.
_ATTEMPTS = 3


def _expire(waiter: asyncio.Future[bool]) -> None:
    if not waiter.done():
        waiter.set_result(False)


class _Connection(asyncio.Protocol):
    """One socket. Buffers what arrives; a single reader awaits it with a timeout."""

    __slots__ = (
        "_buffered",
        "_chunks",
        "_drain",
        "_error",
        "_loop",
        "_paused",
        "_waiter",
        "eof",
        "idle_since",
        "received",
        "transport",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.transport: asyncio.Transport | None = None
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._paused = False
        self._waiter: asyncio.Future[bool] | None = None
        self._drain: asyncio.Future[None] | None = None
        self._error: BaseException | None = None
        self.eof = False
        self.received = False  # a byte of the current response arrived: retrying is unsafe
        self.idle_since = 0.0

    # -- asyncio.Protocol callbacks --
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Not an isinstance check: uvloop's transports implement the interface without
        # subclassing asyncio.Transport.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._chunks.append(data)
        self._buffered += len(data)
        if self._buffered > _HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(True)

    def eof_received(self) -> bool:
        self._set_eof(None)
        return False  # let the transport close itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._set_eof(exc)
        drain = self._drain
        if drain is not None and not drain.done():
            drain.set_result(None)

    def pause_writing(self) -> None:
        if self._drain is None or self._drain.done():
            self._drain = self._loop.create_future()

    def resume_writing(self) -> None:
        drain = self._drain
        if drain is not None and not drain.done():
            drain.set_result(None)

    def _set_eof(self, exc: BaseException | None) -> None:
        self.eof = True
        if exc is not None and self._error is None:
            self._error = exc
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(True)

    # -- used by the transport --
    @property
    def usable(self) -> bool:
        # Bytes arriving on an idle connection are not ours to read: don't reuse it.
        return (
            not self.eof
            and not self._chunks
            and self.transport is not None
            and not self.transport.is_closing()
        )

    async def write(self, data: bytes, timeout: float | None) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            raise httpx.WriteError("connection closed before the request was sent")
        transport.write(data)
        drain = self._drain
        if drain is not None and not drain.done():
            # The kernel buffer is full (a very large prompt): wait until it drains.
            try:
                async with asyncio.timeout(timeout):
                    await drain
            except TimeoutError:
                raise httpx.WriteTimeout(f"request not sent within {timeout} s") from None

    async def read(self, timeout: float | None) -> bytes:
        """Next bytes from the socket; b"" at a clean end of stream."""
        chunks = self._chunks
        if not chunks:
            if self.eof:
                if self._error is not None:
                    raise httpx.ReadError(f"connection lost: {self._error}")
                return b""
            waiter: asyncio.Future[bool] = self._loop.create_future()
            self._waiter = waiter
            timer = self._loop.call_later(timeout, _expire, waiter) if timeout is not None else None
            try:
                arrived = await waiter
            finally:
                self._waiter = None
                if timer is not None:
                    timer.cancel()
            if not arrived:
                raise httpx.ReadTimeout(f"no data from the server for {timeout} s")
            if not chunks:
                return await self.read(timeout)  # woken by end of stream
        self.received = True
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
        self._buffered = 0
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return data

    def close(self) -> None:
        self.eof = True
        if self.transport is not None:
            self.transport.close()


class _Pool:
    """Connections to one origin: at most `max_connections` open, idle ones reused LIFO."""

    __slots__ = (
        "_closed",
        "_host",
        "_idle",
        "_keepalive_expiry_s",
        "_max",
        "_open",
        "_port",
        "_ssl",
        "_waiters",
    )

    def __init__(
        self,
        host: str,
        port: int,
        ssl_context: ssl.SSLContext | None,
        *,
        max_connections: int,
        keepalive_expiry_s: float,
    ) -> None:
        self._host = host
        self._port = port
        self._ssl = ssl_context
        self._max = max_connections
        self._keepalive_expiry_s = keepalive_expiry_s
        self._idle: list[_Connection] = []
        self._open = 0  # open or opening connections, idle ones included
        # A waiter gets a connection, or None meaning "a slot is yours: open a connection".
        self._waiters: deque[asyncio.Future[_Connection | None]] = deque()
        self._closed = False

    async def acquire(
        self, connect_s: float | None, pool_s: float | None
    ) -> tuple[_Connection, bool]:
        """A connection and whether it is a reused keep-alive one."""
        idle = self._idle
        if idle:
            # Servers close idle connections after a few seconds (uvicorn: 5 s); reusing
            # one that old risks racing its close, so drop it and open a fresh one.
            stale_before = time.monotonic() - self._keepalive_expiry_s
            while idle:
                conn = idle.pop()
                if conn.usable and conn.idle_since >= stale_before:
                    return conn, True
                conn.close()
                self._open -= 1
        if self._open < self._max:
            self._open += 1
            return await self._connect(connect_s), False
        waiter: asyncio.Future[_Connection | None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            if pool_s is None:
                got = await waiter
            else:
                async with asyncio.timeout(pool_s):
                    got = await waiter
        except BaseException as exc:
            self._abandon(waiter)
            if isinstance(exc, TimeoutError):
                raise httpx.PoolTimeout(f"no free connection within {pool_s} s") from None
            raise
        if got is not None:
            return got, True
        return await self._connect(connect_s), False

    def _abandon(self, waiter: asyncio.Future[_Connection | None]) -> None:
        # We may have been handed a connection (or a slot) just as we were cancelled.
        if waiter.done() and not waiter.cancelled():
            got = waiter.result()
            if got is None:
                self._free_slot()
            else:
                self.release(got)
        else:
            waiter.cancel()
            with contextlib.suppress(ValueError):
                self._waiters.remove(waiter)

    async def _connect(self, timeout: float | None) -> _Connection:
        loop = asyncio.get_running_loop()
        conn = _Connection(loop)
        try:
            async with asyncio.timeout(timeout):
                await loop.create_connection(
                    lambda: conn,
                    self._host,
                    self._port,
                    ssl=self._ssl,
                    server_hostname=self._host if self._ssl is not None else None,
                )
        except BaseException as exc:
            self._free_slot()
            where = f"{self._host}:{self._port}"
            if isinstance(exc, TimeoutError):
                raise httpx.ConnectTimeout(f"no connection to {where} within {timeout} s") from None
            if isinstance(exc, OSError):
                reason = exc.strerror or str(exc) or type(exc).__name__
                raise httpx.ConnectError(f"cannot connect to {where}: {reason}") from None
            raise
        return conn

    def release(self, conn: _Connection) -> None:
        """Give back a connection whose response was read to the end."""
        if self._closed or not conn.usable:
            self.discard(conn)
            return
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return
        conn.idle_since = time.monotonic()
        self._idle.append(conn)

    def discard(self, conn: _Connection) -> None:
        """Close a connection that cannot be reused and free its slot."""
        conn.close()
        self._free_slot()

    def _free_slot(self) -> None:
        waiters = self._waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes to this waiter
                return
        self._open -= 1

    def close(self) -> None:
        self._closed = True
        for conn in self._idle:
            conn.close()
        self._open -= len(self._idle)
        self._idle.clear()


class _ResponseStream(httpx.AsyncByteStream):
    """The body of one response, read straight off its connection."""

    __slots__ = ("_conn", "_done", "_first", "_parser", "_pool", "_read_s")

    def __init__(
        self,
        conn: _Connection,
        pool: _Pool,
        parser: ResponseParser,
        first: bytes,
        read_s: float | None,
    ) -> None:
        self._conn = conn
        self._pool = pool
        self._parser = parser
        self._first = first
        self._read_s = read_s
        self._done = False
        if parser.complete:
            self._finish()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        first = self._first
        if first:
            self._first = b""
            yield first
        if self._done:  # the whole body came with the head, or the stream was closed
            return
        parser = self._parser
        conn = self._conn
        try:
            while True:
                data = await conn.read(self._read_s)
                if not data:
                    parser.feed_eof()  # raises unless the body is close-delimited
                    self._finish()
                    return
                body = parser.feed(data)
                complete = parser.complete
                if complete:
                    # Hand the connection back before the consumer sees the last bytes,
                    # so a consumer that stops here does not strand it.
                    self._finish()
                if body:
                    yield body
                if complete:
                    return
        except ProtocolError as exc:
            self._abort()
            raise httpx.RemoteProtocolError(str(exc)) from None
        except BaseException:
            self._abort()
            raise

    def _finish(self) -> None:
        if self._done:
            return
        self._done = True
        parser = self._parser
        if parser.keep_alive and not parser.trailing:
            self._pool.release(self._conn)
        else:
            self._pool.discard(self._conn)

    def _abort(self) -> None:
        if not self._done:
            self._done = True
            self._pool.discard(self._conn)

    async def aclose(self) -> None:
        self._abort()  # a body not read to the end leaves the connection unusable


class PooledTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over asyncio sockets with keep-alive pools sized to the caller's concurrency.

    `max_connections` bounds open connections per origin; requests beyond it wait (up to the
    pool timeout) for one to come back. Timeouts come from the request, as httpx sets them:
    `connect`, `read` (for every read: first byte and any stall), `write` and `pool`.
    """

    def __init__(
        self,
        *,
        max_connections: int,
        keepalive_expiry_s: float = 5.0,
        verify: bool | ssl.SSLContext = True,
    ) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        self._max_connections = max_connections
        self._keepalive_expiry_s = keepalive_expiry_s
        self._verify = verify
        self._ssl: ssl.SSLContext | None = None
        self._pools: dict[tuple[str, str, int], _Pool] = {}

    def _pool_for(self, url: httpx.URL) -> _Pool:
        scheme = url.scheme
        key = (scheme, url.host, url.port or (443 if scheme == "https" else 80))
        pool = self._pools.get(key)
        if pool is None:
            if scheme not in ("http", "https"):
                raise httpx.UnsupportedProtocol(f"unsupported URL scheme {scheme!r}")
            context = None
            if scheme == "https":
                if self._ssl is None:
                    verify = self._verify
                    self._ssl = (
                        verify
                        if isinstance(verify, ssl.SSLContext)
                        else httpx.create_ssl_context(verify=verify)
                    )
                context = self._ssl
            pool = self._pools[key] = _Pool(
                key[1],
                key[2],
                context,
                max_connections=self._max_connections,
                keepalive_expiry_s=self._keepalive_expiry_s,
            )
        return pool

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        pool = self._pool_for(request.url)
        timeouts = request.extensions.get("timeout", {})
        connect_s = timeouts.get("connect")
        read_s = timeouts.get("read")
        write_s = timeouts.get("write")
        pool_s = timeouts.get("pool")
        try:
            body = request.content
        except httpx.RequestNotRead:
            body = await request.aread()
        if body and "transfer-encoding" in request.headers:
            # httpx chose chunked framing for a streamed body; send it as one chunk.
            body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
        method = request.method.encode("ascii")
        try:
            head = encode_request_head(method, request.url.raw_path, request.headers.raw)
        except ProtocolError as exc:
            raise httpx.LocalProtocolError(str(exc)) from None
        payload = head + body if body else head

        for attempt in range(_ATTEMPTS):
            conn, reused = await pool.acquire(connect_s, pool_s)
            parser = ResponseParser(no_body=method == b"HEAD")
            conn.received = False
            try:
                await conn.write(payload, write_s)
                first = b""
                while not parser.head_complete:
                    data = await conn.read(read_s)
                    if not data:
                        parser.feed_eof()  # always raises here: the head is incomplete
                    first = parser.feed(data)
            except (ProtocolError, httpx.WriteError, httpx.ReadError) as exc:
                pool.discard(conn)
                if reused and not conn.received and attempt + 1 < _ATTEMPTS:
                    continue  # the server closed this idle connection as we wrote: retry
                if isinstance(exc, ProtocolError):
                    raise httpx.RemoteProtocolError(str(exc)) from None
                raise
            except BaseException:
                pool.discard(conn)
                raise
            return httpx.Response(
                parser.status,
                headers=parser.headers,
                stream=_ResponseStream(conn, pool, parser, first, read_s),
                extensions={"http_version": parser.http_version, "reason_phrase": parser.reason},
            )
        raise AssertionError("unreachable")  # the last attempt returns or raises

    async def aclose(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()
