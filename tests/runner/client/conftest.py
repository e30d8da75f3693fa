"""A scriptable HTTP/1.1 server on 127.0.0.1 for client tests: exact bytes, real sockets.

Each test writes a handler `async (request, reply) -> None` that answers with whatever bytes
it likes (split writes, CRLF, comments, abrupt closes, stalls). The `wire` fixture hands out
the server factory and small builders for OpenAI-shaped answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]  # names lowercased
    body: bytes
    connection: int  # which accepted connection carried it (1, 2, ...)

    def json(self) -> Any:
        return json.loads(self.body)


class Reply:
    """The connection a request came in on, for the handler to write raw bytes to."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self.closed = False

    async def send(self, *pieces: bytes, pause_s: float = 0.0) -> None:
        """Write pieces in order; a pause between them makes the client see separate reads."""
        for index, piece in enumerate(pieces):
            if index and pause_s:
                await asyncio.sleep(pause_s)
            self._writer.write(piece)
            await self._writer.drain()

    def close(self) -> None:
        """Hang up (after the bytes already written)."""
        self.closed = True
        self._writer.close()

    def abort(self) -> None:
        """Reset the connection at once, dropping unsent bytes."""
        self.closed = True
        self._writer.transport.abort()


Handler = Callable[[Received, Reply], Awaitable[None]]


@dataclass
class Server:
    url: str
    requests: list[Received] = field(default_factory=list)
    connections: int = 0
    open_connections: int = 0
    peak_connections: int = 0


class Wire:
    """Server factory plus builders for the bytes an OpenAI-compatible server sends."""

    DONE = b"data: [DONE]\n\n"

    @contextlib.asynccontextmanager
    async def serve(
        self, handler: Handler, *, tls: ssl.SSLContext | None = None
    ) -> AsyncIterator[Server]:
        state = Server(url="")
        tasks: set[asyncio.Task[None]] = set()

        async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            tasks.add(task)
            state.connections += 1
            state.open_connections += 1
            state.peak_connections = max(state.peak_connections, state.open_connections)
            number = state.connections
            reply = Reply(writer)
            try:
                while not reply.closed:
                    try:
                        head = await reader.readuntil(b"\r\n\r\n")
                    except (asyncio.IncompleteReadError, ConnectionError):
                        break
                    lines = head.decode("latin-1").split("\r\n")
                    method, path, _ = lines[0].split(" ", 2)
                    headers = {}
                    for line in lines[1:]:
                        if line:
                            name, _, value = line.partition(":")
                            headers[name.strip().lower()] = value.strip()
                    body = await reader.readexactly(int(headers.get("content-length", "0")))
                    request = Received(method, path, headers, body, number)
                    state.requests.append(request)
                    await handler(request, reply)
            except (ConnectionError, asyncio.CancelledError):
                pass
            finally:
                state.open_connections -= 1
                if not reply.closed:
                    writer.close()
                tasks.discard(task)

        server = await asyncio.start_server(on_connection, "127.0.0.1", 0, ssl=tls)
        port = server.sockets[0].getsockname()[1]
        state.url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
        try:
            yield state
        finally:
            server.close()
            for task in list(tasks):
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- response heads and bodies --
    @staticmethod
    def head(
        status: int = 200,
        *,
        content_type: str = "text/event-stream",
        length: int | None = None,
        headers: dict[str, str] | None = None,
        reason: str = "OK",
    ) -> bytes:
        lines = [f"HTTP/1.1 {status} {reason}", f"Content-Type: {content_type}"]
        if length is None:
            lines.append("Transfer-Encoding: chunked")
        else:
            lines.append(f"Content-Length: {length}")
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    @staticmethod
    def chunk(data: bytes) -> bytes:
        """One chunk of a chunked body."""
        return b"%x\r\n%s\r\n" % (len(data), data)

    LAST_CHUNK = b"0\r\n\r\n"

    def stream(self, *events: bytes, headers: dict[str, str] | None = None) -> bytes:
        """A whole chunked SSE response, one event per chunk."""
        return (
            self.head(headers=headers)
            + b"".join(self.chunk(event) for event in events)
            + self.LAST_CHUNK
        )

    def json_response(
        self, status: int, obj: Any, *, headers: dict[str, str] | None = None, reason: str = "OK"
    ) -> bytes:
        body = json.dumps(obj).encode()
        return (
            self.head(
                status,
                content_type="application/json",
                length=len(body),
                headers=headers,
                reason=reason,
            )
            + body
        )

    # -- OpenAI events --
    @staticmethod
    def event(obj: Any, *, newline: bytes = b"\n") -> bytes:
        return b"data: " + json.dumps(obj).encode() + newline + newline

    def delta(
        self,
        content: str | None = None,
        *,
        reasoning: str | None = None,
        tool_args: str | None = None,
        finish: str | None = None,
        nvext: dict[str, Any] | None = None,
        newline: bytes = b"\n",
    ) -> bytes:
        delta: dict[str, Any] = {}
        if content is not None:
            delta["content"] = content
        if reasoning is not None:
            delta["reasoning_content"] = reasoning
        if tool_args is not None:
            delta["tool_calls"] = [{"index": 0, "function": {"arguments": tool_args}}]
        obj: dict[str, Any] = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            "usage": None,
        }
        if nvext is not None:
            obj["nvext"] = nvext
        return self.event(obj, newline=newline)

    def usage(self, prompt: int, completion: int, cached: int | None = None) -> bytes:
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        if cached is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        return self.event({"id": "chatcmpl-1", "choices": [], "usage": usage})

    def tokens(self, *words: str, finish: str = "stop") -> list[bytes]:
        """Content events for `words`, the last one carrying finish_reason."""
        events = [self.delta(word) for word in words[:-1]]
        events.append(self.delta(words[-1], finish=finish))
        return events


@pytest.fixture
def wire() -> Wire:
    return Wire()
