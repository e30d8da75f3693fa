"""InferenceClient over real sockets against a scripted server: records and error categories."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import ssl
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from runner.client import (
    ChatRequest,
    CompletionRequest,
    ErrorCategory,
    InferenceClient,
    PooledTransport,
    ResponseResult,
    Timeouts,
    api_url,
)

if TYPE_CHECKING:  # the fixture's types, for annotations only
    from .conftest import Received, Reply, Wire

CHAT = ChatRequest(model="m", messages=[{"role": "user", "content": "hi"}], max_tokens=8)
FAST = Timeouts(connect_s=2.0, read_s=2.0)

TransportFactory = Callable[[int], httpx.AsyncBaseTransport | None]
TRANSPORTS: dict[str, TransportFactory] = {
    "pooled": lambda n: None,  # the client's default, PooledTransport
    "httpx": lambda n: httpx.AsyncHTTPTransport(
        limits=httpx.Limits(max_connections=n, max_keepalive_connections=n)
    ),
}


async def send_one(
    url: str,
    request: ChatRequest | CompletionRequest = CHAT,
    *,
    timeouts: Timeouts = FAST,
    transport: httpx.AsyncBaseTransport | None = None,
    capture_text: bool = False,
) -> ResponseResult:
    async with InferenceClient(
        url, concurrency=4, timeouts=timeouts, transport=transport, capture_text=capture_text
    ) as client:
        return await client.send(request)


# -- successful answers --


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_streamed_answer_records_timing_usage_cached_tokens_and_worker(
    wire: Wire, transport: str
) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        await reply.send(
            wire.head(),
            wire.chunk(wire.delta("", nvext={"worker_id": {"decode_worker_id": 12}})),
            *(wire.chunk(event) for event in wire.tokens("a", "b", "c", finish="length")),
            wire.chunk(wire.usage(100, 3, cached=64)),
            wire.chunk(wire.DONE) + wire.LAST_CHUNK,
            pause_s=0.01,
        )

    async def main() -> ResponseResult:
        async with wire.serve(handler) as server:
            record = await send_one(server.url, transport=TRANSPORTS[transport](4))
            sent = server.requests[0]
            assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
            assert sent.json()["stream_options"] == {"include_usage": True}
            assert sent.headers["accept-encoding"] == "identity"
            return record

    record = asyncio.run(main())
    assert record.ok and record.status == 200 and record.error_detail is None
    assert record.first_token_s == record.chunk_times_s[0]
    assert record.start_s < record.chunk_times_s[0] < record.end_s
    assert len(record.chunk_times_s) == 3  # the empty role chunk is not a token
    assert list(record.chunk_times_s) == sorted(record.chunk_times_s)
    assert (record.output_tokens, record.prompt_tokens, record.cached_tokens) == (3, 100, 64)
    assert (record.served_by, record.finish_reason) == ("12", "length")
    assert record.ttft_s is not None and 0 < record.ttft_s < record.latency_s


def test_events_split_across_reads_with_crlf_comments_and_event_lines_are_all_read(
    wire: Wire,
) -> None:
    body = (
        b": keep-alive\r\n\r\n"
        + b"event: annotation\r\ndata: worker 3\r\n\r\n"
        + wire.delta("a", newline=b"\r\n")
        + wire.delta("b")
        + b"retry: 100\nid: 1\n"
        + wire.delta("c", finish="stop")
        + wire.usage(5, 3)
        + b"data: [DONE]\r\n\r\n"
    )
    # Cut the body at awkward places: inside "data:", inside JSON, between CR and LF.
    cuts = [3, 20, body.index(b"\r\n\r\n", 30) + 1, body.index(b'"content"') + 4, len(body) - 3]
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]

    async def handler(request: Received, reply: Reply) -> None:
        await reply.send(
            wire.head(), *(wire.chunk(p) for p in pieces), wire.LAST_CHUNK, pause_s=0.01
        )

    async def main() -> ResponseResult:
        async with wire.serve(handler) as server:
            return await send_one(server.url, capture_text=True)

    record = asyncio.run(main())
    assert record.ok, record.error_detail
    assert (record.text, record.output_tokens, len(record.chunk_times_s)) == ("abc", 3, 3)


def test_a_content_length_stream_ending_without_a_blank_line_is_complete(wire: Wire) -> None:
    body = wire.delta("a", finish="stop") + b"data: [DONE]"

    async def handler(request: Received, reply: Reply) -> None:
        await reply.send(wire.head(length=len(body)) + body)

    async def main() -> ResponseResult:
        async with wire.serve(handler) as server:
            return await send_one(server.url)

    record = asyncio.run(main())
    assert record.ok and record.output_tokens == 1


def test_without_usage_output_tokens_are_counted_chunks_and_cached_tokens_unknown(
    wire: Wire,
) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        await reply.send(wire.stream(*wire.tokens("a", "b"), wire.DONE))

    async def main() -> ResponseResult:
        async with wire.serve(handler) as server:
            return await send_one(server.url)

    record = asyncio.run(main())
    assert record.ok and record.output_tokens == 2
    assert record.prompt_tokens is None and record.cached_tokens is None
    assert record.served_by is None


def test_the_x_worker_id_header_names_the_worker_unless_the_body_does(wire: Wire) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        nvext = {"worker_id": 9} if request.json().get("nvext") else None
        first = wire.delta("a", nvext=nvext)
        await reply.send(
            wire.stream(first, wire.delta("b", finish="stop"), headers={"X-Worker-Id": "w-2"})
        )

    async def main() -> tuple[ResponseResult, ResponseResult]:
        async with wire.serve(handler) as server:
            plain = await send_one(server.url)
            asked = await send_one(
                server.url, ChatRequest(model="m", messages=[], want_worker_id=True)
            )
            assert server.requests[1].json()["nvext"] == {"extra_fields": ["worker_id"]}
            return plain, asked

    plain, asked = asyncio.run(main())
    assert (plain.served_by, asked.served_by) == ("w-2", "9")


def test_a_finish_reason_without_done_completes_the_stream(wire: Wire) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        await reply.send(wire.stream(*wire.tokens("a", "b")))

    async def main() -> ResponseResult:
        async with wire.serve(handler) as server:
            return await send_one(server.url)

    assert asyncio.run(main()).ok


def test_a_json_answer_to_a_streaming_request_is_read_as_a_whole_body(wire: Wire) -> None:
    answer = {
        "choices": [{"index": 0, "message": {"content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 4, "completion_tokens": 1},
    }

    async def handler(request: Received, reply: Reply) -> None:
        await reply.send(wire.json_response(200, answer))

    async def main() -> tuple[ResponseResult, ResponseResult]:
        async with wire.serve(handler) as server:
            streamed = await send_one(server.url)
            whole = await send_one(
                server.url, CompletionRequest(model="m", prompt="p", stream=False)
            )
            assert server.requests[1].path == "/v1/completions"
            assert "stream_options" not in server.requests[1].json()
            return streamed, whole

    for record in asyncio.run(main()):
        assert record.ok and record.output_tokens == 1 and record.prompt_tokens == 4
        assert record.first_token_s == record.chunk_times_s[0]


def test_a_connection_lost_after_done_does_not_fail_the_request(wire: Wire) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        await reply.send(wire.head(), wire.chunk(wire.delta("a", finish="stop") + wire.DONE))
        reply.abort()

    async def main() -> ResponseResult:
        async with wire.serve(handler) as server:
            return await send_one(server.url)

    assert asyncio.run(main()).ok


# -- broken streams and bad payloads --


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_connection_dropped_mid_stream_is_stream_broken(wire: Wire, transport: str) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        await reply.send(wire.head(), wire.chunk(wire.delta("a")), wire.chunk(wire.delta("b")))
        await asyncio.sleep(0.05)
        reply.abort()

    async def main() -> ResponseResult:
        async with wire.serve(handler) as server:
            return await send_one(server.url, transport=TRANSPORTS[transport](4))

    record = asyncio.run(main())
    assert record.error is ErrorCategory.STREAM_BROKEN and record.status == 200
    assert len(record.chunk_times_s) == 2
    assert "mid-stream" in (record.error_detail or "")


def test_a_stream_ending_cleanly_without_done_or_finish_is_stream_broken(wire: Wire) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        await reply.send(wire.stream(wire.delta("a"), wire.delta("b")))

    async def main() -> ResponseResult:
        async with wire.serve(handler) as server:
            return await send_one(server.url)

    record = asyncio.run(main())
    assert record.error is ErrorCategory.STREAM_BROKEN
    assert "without [DONE] or finish_reason after 2 token chunks" in (record.error_detail or "")


def test_an_empty_stream_is_stream_broken(wire: Wire) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        await reply.send(wire.stream())

    async def main() -> ResponseResult:
        async with wire.serve(handler) as server:
            return await send_one(server.url)

    assert asyncio.run(main()).error is ErrorCategory.STREAM_BROKEN


def test_a_fresh_connection_closed_without_an_answer_is_stream_broken(wire: Wire) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        reply.close()

    async def main() -> ResponseResult:
        async with wire.serve(handler) as server:
            record = await send_one(server.url)
            assert len(server.requests) == 1  # not retried: it was not a reused connection
            return record

    record = asyncio.run(main())
    assert record.error is ErrorCategory.STREAM_BROKEN and record.status is None
    assert "before the response" in (record.error_detail or "")


@pytest.mark.parametrize(
    ("event", "words"),
    [
        (b'data: {"error": {"message": "engine died", "code": 500}}\n\n', "engine died"),
        (b"data: {not json\n\n", "unparseable JSON"),
        (b'event: error\ndata: {"message": "overloaded"}\n\n', "overloaded"),
    ],
)
def test_error_payloads_and_garbage_mid_stream_are_bad_payload(
    wire: Wire, event: bytes, words: str
) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        await reply.send(wire.stream(wire.delta("a"), event, wire.DONE))

    async def main() -> ResponseResult:
        async with wire.serve(handler) as server:
            return await send_one(server.url)

    record = asyncio.run(main())
    assert record.error is ErrorCategory.BAD_PAYLOAD and record.status == 200
    assert words in (record.error_detail or "") and len(record.chunk_times_s) == 1


def test_an_html_page_is_bad_payload_naming_what_came_back(wire: Wire) -> None:
    page = b"<html><body>Welcome to nginx!</body></html>"

    async def handler(request: Received, reply: Reply) -> None:
        await reply.send(wire.head(content_type="text/html", length=len(page)) + page)

    async def main() -> ResponseResult:
        async with wire.serve(handler) as server:
            return await send_one(server.url)

    record = asyncio.run(main())
    assert record.error is ErrorCategory.BAD_PAYLOAD
    assert "not an OpenAI answer (text/html)" in (record.error_detail or "")
    assert "Welcome to nginx" in (record.error_detail or "")


def test_a_non_openai_json_body_is_bad_payload(wire: Wire) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        await reply.send(wire.json_response(200, {"status": "ok"}))

    async def main() -> ResponseResult:
        async with wire.serve(handler) as server:
            return await send_one(server.url)

    record = asyncio.run(main())
    assert record.error is ErrorCategory.BAD_PAYLOAD and "choices" in (record.error_detail or "")


# -- HTTP statuses --


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_429_is_its_own_category_and_keeps_retry_after(wire: Wire, transport: str) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        error = {"error": {"message": "rate limited", "type": "RateLimitError"}}
        await reply.send(wire.json_response(429, error, headers={"Retry-After": "2"}))

    async def main() -> ResponseResult:
        async with wire.serve(handler) as server:
            return await send_one(server.url, transport=TRANSPORTS[transport](4))

    record = asyncio.run(main())
    assert record.error is ErrorCategory.HTTP_429 and record.status == 429
    assert record.error_detail == "HTTP 429: rate limited (retry after 2 s)"


@pytest.mark.parametrize(
    ("status", "category"),
    [
        (400, ErrorCategory.HTTP_4XX),
        (401, ErrorCategory.HTTP_4XX),
        (404, ErrorCategory.HTTP_4XX),
        (500, ErrorCategory.HTTP_5XX),
        (503, ErrorCategory.HTTP_5XX),
    ],
)
def test_error_statuses_are_classified_with_the_servers_message(
    wire: Wire, status: int, category: ErrorCategory
) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        await reply.send(wire.json_response(status, {"error": {"message": f"said {status}"}}))

    async def main() -> ResponseResult:
        async with wire.serve(handler) as server:
            return await send_one(server.url)

    record = asyncio.run(main())
    assert (record.error, record.status) == (category, status)
    assert record.error_detail == f"HTTP {status}: said {status}"


def test_a_plain_text_error_body_becomes_the_detail(wire: Wire) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        text = b"upstream connect error\n"
        await reply.send(wire.head(502, content_type="text/plain", length=len(text)) + text)

    async def main() -> ResponseResult:
        async with wire.serve(handler) as server:
            return await send_one(server.url)

    record = asyncio.run(main())
    assert record.error is ErrorCategory.HTTP_5XX
    assert record.error_detail == "HTTP 502: upstream connect error"


def test_a_redirect_is_not_followed(wire: Wire) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        await reply.send(
            wire.head(301, length=0, headers={"Location": "https://elsewhere/v1"}, reason="Moved")
        )

    async def main() -> ResponseResult:
        async with wire.serve(handler) as server:
            return await send_one(server.url)

    record = asyncio.run(main())
    assert record.error is ErrorCategory.BAD_PAYLOAD
    assert "redirect to https://elsewhere/v1" in (record.error_detail or "")


# -- connecting and timeouts --


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_refused_connection_is_connect(transport: str) -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    record = asyncio.run(send_one(url, transport=TRANSPORTS[transport](4)))
    assert record.error is ErrorCategory.CONNECT and record.status is None
    assert record.first_token_s is None and record.chunk_times_s == ()


def test_a_connect_timeout_is_connect() -> None:
    class Unreachable(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            assert request.extensions["timeout"]["connect"] == 2.0
            raise httpx.ConnectTimeout("no connection within 2.0 s")

    record = asyncio.run(send_one("http://10.0.0.1:9", transport=Unreachable()))
    assert record.error is ErrorCategory.CONNECT and "2.0 s" in (record.error_detail or "")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_no_response_within_the_read_timeout_is_timeout(wire: Wire, transport: str) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        await asyncio.sleep(5)

    async def main() -> ResponseResult:
        async with wire.serve(handler) as server:
            return await send_one(
                server.url,
                timeouts=Timeouts(read_s=0.2),
                transport=TRANSPORTS[transport](4),
            )

    record = asyncio.run(main())
    assert record.error is ErrorCategory.TIMEOUT and record.status is None
    assert 0.15 < record.latency_s < 1.0
    assert (record.error_detail or "").startswith("no response")


def test_a_stall_mid_stream_is_timeout_keeping_the_chunks_so_far(wire: Wire) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        await reply.send(wire.head(), wire.chunk(wire.delta("a")))
        await asyncio.sleep(5)

    async def main() -> ResponseResult:
        async with wire.serve(handler) as server:
            return await send_one(server.url, timeouts=Timeouts(read_s=0.2))

    record = asyncio.run(main())
    assert record.error is ErrorCategory.TIMEOUT and record.status == 200
    assert len(record.chunk_times_s) == 1
    assert "stalled after 1 token chunks" in (record.error_detail or "")


def test_the_total_timeout_bounds_a_slow_drip_of_tokens(wire: Wire) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        await reply.send(
            wire.head(), *(wire.chunk(wire.delta("x")) for _ in range(40)), pause_s=0.05
        )

    async def main() -> ResponseResult:
        async with wire.serve(handler) as server:
            return await send_one(server.url, timeouts=Timeouts(read_s=1.0, total_s=0.3))

    record = asyncio.run(main())
    assert record.error is ErrorCategory.TIMEOUT
    assert record.error_detail == "no complete answer within 0.3 s"
    assert 1 <= len(record.chunk_times_s) < 40 and record.latency_s < 1.0


def test_waiting_for_a_connection_longer_than_the_pool_timeout_is_timeout(wire: Wire) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        await asyncio.sleep(0.4)
        await reply.send(wire.stream(wire.delta("a", finish="stop")))

    async def main() -> list[ResponseResult]:
        async with (
            wire.serve(handler) as server,
            InferenceClient(
                server.url, concurrency=1, timeouts=Timeouts(read_s=2.0, pool_s=0.1)
            ) as client,
        ):
            return list(await asyncio.gather(client.send(CHAT), client.send(CHAT)))

    first, second = asyncio.run(main())
    assert first.ok
    assert second.error is ErrorCategory.TIMEOUT
    assert "no free connection" in (second.error_detail or "")


# -- cancellation, API keys, headers --


def test_a_cancelled_request_is_recorded_then_the_cancellation_propagates(wire: Wire) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        if request.json()["max_tokens"] == 1:
            await reply.send(wire.stream(wire.delta("z", finish="stop")))
            return
        await reply.send(wire.head(), wire.chunk(wire.delta("a")), wire.chunk(wire.delta("b")))
        await asyncio.sleep(5)

    records: list[ResponseResult] = []

    async def main() -> ResponseResult:
        async with (
            wire.serve(handler) as server,
            InferenceClient(server.url, concurrency=1, timeouts=FAST) as client,
        ):
            task = asyncio.create_task(client.send(CHAT, on_result=records.append))
            while len(server.requests) < 1:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # The half-read connection was dropped, not pooled: the next request is clean.
            return await client.send(ChatRequest(model="m", messages=[], max_tokens=1))

    later = asyncio.run(main())
    assert later.ok
    assert len(records) == 1
    (record,) = records
    assert record.error is ErrorCategory.CANCELLED and record.status == 200
    assert len(record.chunk_times_s) == 2
    assert record.error_detail == "cancelled by the caller"


def test_on_result_receives_every_record_exactly_once(wire: Wire) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        if request.json()["max_tokens"] == 1:
            await reply.send(wire.json_response(500, {"error": "boom"}))
        else:
            await reply.send(wire.stream(wire.delta("a", finish="stop")))

    records: list[ResponseResult] = []

    async def main() -> list[ResponseResult]:
        async with (
            wire.serve(handler) as server,
            InferenceClient(server.url, concurrency=2, timeouts=FAST) as client,
        ):
            failing = ChatRequest(model="m", messages=[], max_tokens=1)
            return [
                await client.send(CHAT, on_result=records.append),
                await client.send(failing, on_result=records.append),
            ]

    returned = asyncio.run(main())
    assert records == returned
    assert [r.error for r in records] == [None, ErrorCategory.HTTP_5XX]


def test_the_api_key_is_sent_but_never_shown_in_repr_or_error_text(wire: Wire) -> None:
    key = "sk-test-SECRET-1234567890"

    async def handler(request: Received, reply: Reply) -> None:
        # A careless server echoing the key back in its error message.
        given = request.headers["authorization"]
        await reply.send(wire.json_response(401, {"error": {"message": f"bad token {given}"}}))

    async def main() -> tuple[ResponseResult, str]:
        async with (
            wire.serve(handler) as server,
            InferenceClient(server.url, concurrency=1, api_key=key, timeouts=FAST) as client,
        ):
            record = await client.send(CHAT)
            assert server.requests[0].headers["authorization"] == f"Bearer {key}"
            return record, repr(client) + str(client)

    record, shown = asyncio.run(main())
    assert record.error is ErrorCategory.HTTP_4XX and record.status == 401
    assert key not in shown and "api_key=<set>" in shown
    assert key not in repr(record) and key not in (record.error_detail or "")
    assert record.error_detail == "HTTP 401: bad token Bearer ***"


def test_extra_and_per_request_headers_are_sent_and_override_defaults(wire: Wire) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        await reply.send(wire.stream(wire.delta("a", finish="stop")))

    async def main() -> list[Received]:
        async with (
            wire.serve(handler) as server,
            InferenceClient(
                server.url, concurrency=1, headers={"X-Team": "perf"}, timeouts=FAST
            ) as client,
        ):
            await client.send(CHAT, headers={"X-Session-ID": "s-1", "User-Agent": "custom"})
            await client.send(CHAT)
            return server.requests

    with_session, plain = asyncio.run(main())
    assert with_session.headers["x-team"] == plain.headers["x-team"] == "perf"
    assert with_session.headers["x-session-id"] == "s-1"
    assert with_session.headers["user-agent"] == "custom"
    assert "x-session-id" not in plain.headers and plain.headers["user-agent"] != "custom"


def test_a_header_with_a_line_break_is_refused_before_sending(wire: Wire) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        await reply.send(wire.stream(wire.delta("a", finish="stop")))

    async def main() -> tuple[ResponseResult, int]:
        async with (
            wire.serve(handler) as server,
            InferenceClient(server.url, concurrency=1, timeouts=FAST) as client,
        ):
            record = await client.send(CHAT, headers={"X-Session-ID": "a\r\nX-Injected: 1"})
            return record, len(server.requests)

    record, requests = asyncio.run(main())
    assert record.error is ErrorCategory.BAD_PAYLOAD and requests == 0
    assert "request not sent" in (record.error_detail or "")


# -- large bodies (socket flow control) --


def test_an_eight_megabyte_prompt_and_a_large_answer_go_through(wire: Wire) -> None:
    prompt = "token " * (8 * 1024 * 1024 // 6)
    answer = "word " * 400_000  # ~2 MB, more than one socket buffer

    async def handler(request: Received, reply: Reply) -> None:
        assert len(request.body) > 8_000_000
        body = {"choices": [{"index": 0, "message": {"content": answer}, "finish_reason": "stop"}]}
        await reply.send(wire.json_response(200, body))

    async def main() -> ResponseResult:
        async with wire.serve(handler) as server:
            request = ChatRequest(
                model="m", messages=[{"role": "user", "content": prompt}], stream=False
            )
            return await send_one(server.url, request, capture_text=True)

    record = asyncio.run(main())
    assert record.ok, record.error_detail
    assert record.text == answer


def test_a_lagging_reader_pauses_the_socket_until_it_catches_up() -> None:
    from runner.client.transport import _Connection

    class Socket(asyncio.Transport):
        def __init__(self) -> None:
            super().__init__()
            self._reading = True

        def is_reading(self) -> bool:
            return self._reading

        def pause_reading(self) -> None:
            self._reading = False

        def resume_reading(self) -> None:
            self._reading = True

        def is_closing(self) -> bool:
            return False

    async def main() -> None:
        conn = _Connection(asyncio.get_running_loop())
        sock = Socket()
        conn.connection_made(sock)
        conn.data_received(b"x" * 200_000)
        assert sock.is_reading()
        conn.data_received(b"y" * 200_000)  # 400 KB unread: past the high-water mark
        assert not sock.is_reading()
        assert len(await conn.read(1.0)) == 400_000
        assert sock.is_reading()

    asyncio.run(main())


# -- pooling and concurrency --


def test_connections_are_reused_and_never_exceed_the_concurrency(wire: Wire) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        await asyncio.sleep(0.02)
        await reply.send(wire.stream(wire.delta("a", finish="stop"), wire.DONE))

    async def main() -> tuple[list[ResponseResult], int, int]:
        async with (
            wire.serve(handler) as server,
            InferenceClient(server.url, concurrency=4, timeouts=FAST) as client,
        ):
            records = await asyncio.gather(*(client.send(CHAT) for _ in range(20)))
            return list(records), server.connections, server.peak_connections

    records, connections, peak = asyncio.run(main())
    assert all(r.ok for r in records)
    assert connections == 4 and peak <= 4


def test_a_keep_alive_connection_closed_by_the_server_is_retried_on_a_fresh_one(
    wire: Wire,
) -> None:
    on_first_connection: list[Received] = []

    async def handler(request: Received, reply: Reply) -> None:
        if request.connection == 1:
            on_first_connection.append(request)
            if len(on_first_connection) == 2:
                reply.close()  # the server dropped the idle connection just as we reused it
                return
        await reply.send(wire.stream(wire.delta("a", finish="stop")))

    async def main() -> tuple[ResponseResult, ResponseResult, int, int]:
        async with (
            wire.serve(handler) as server,
            InferenceClient(server.url, concurrency=1, timeouts=FAST) as client,
        ):
            first = await client.send(CHAT)
            second = await client.send(CHAT)
            return first, second, len(server.requests), server.connections

    first, second, requests, connections = asyncio.run(main())
    assert first.ok and second.ok
    assert (requests, connections) == (3, 2)


def test_two_hundred_concurrent_streams_on_one_client_all_succeed(wire: Wire) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        events = [*wire.tokens("a", "b", "c", "d"), wire.usage(10, 4, cached=0), wire.DONE]
        await reply.send(wire.stream(*events, headers={"X-Worker-Id": "w"}))

    async def main() -> tuple[list[ResponseResult], int]:
        async with (
            wire.serve(handler) as server,
            InferenceClient(server.url, concurrency=200, timeouts=Timeouts(read_s=5.0)) as client,
        ):
            records = await asyncio.gather(*(client.send(CHAT) for _ in range(200)))
            second_round = await asyncio.gather(*(client.send(CHAT) for _ in range(200)))
            return [*records, *second_round], server.peak_connections

    records, peak = asyncio.run(main())
    assert len(records) == 400 and all(r.ok for r in records), {r.error_detail for r in records}
    assert all(r.output_tokens == 4 and r.cached_tokens == 0 for r in records)
    assert peak <= 200


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_https_endpoints_are_served_over_tls_with_the_given_trust(
    wire: Wire, tmp_path: Path
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    command = "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
    command += " -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1"
    subprocess.run(
        [*command.split(), "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True
    )
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    trust = ssl.create_default_context(cafile=str(cert))

    async def handler(request: Received, reply: Reply) -> None:
        await reply.send(wire.stream(wire.delta("a", finish="stop"), wire.DONE))

    async def main() -> tuple[ResponseResult, ResponseResult]:
        async with wire.serve(handler, tls=server_tls) as server:
            assert server.url.startswith("https://")
            trusted = await send_one(
                server.url, transport=PooledTransport(max_connections=1, verify=trust)
            )
            untrusted = await send_one(server.url)  # system CAs do not know this certificate
            return trusted, untrusted

    trusted, untrusted = asyncio.run(main())
    assert trusted.ok
    assert untrusted.error is ErrorCategory.CONNECT
    assert "CERTIFICATE_VERIFY_FAILED" in (untrusted.error_detail or "")


# -- URLs --


@pytest.mark.parametrize(
    "base",
    [
        "http://h:8000",
        "http://h:8000/",
        "http://h:8000/v1",
        "http://h:8000/v1/",
        "http://h:8000/v1/chat/completions",
        "http://h:8000/v1/completions",
    ],
)
def test_api_urls_accept_the_root_the_v1_base_or_a_full_endpoint(base: str) -> None:
    assert str(api_url(base, "/v1/chat/completions")) == "http://h:8000/v1/chat/completions"


def test_a_gateway_prefix_before_v1_is_kept() -> None:
    url = api_url("https://gw.example/team-a/v1", "/v1/completions")
    assert str(url) == "https://gw.example/team-a/v1/completions"


@pytest.mark.parametrize("base", ["localhost:8000", "ftp://h/v1", "not a url"])
def test_a_malformed_base_url_is_refused_at_construction(base: str) -> None:
    with pytest.raises(ValueError, match="http://host:port"):
        InferenceClient(base, concurrency=1)


def test_the_pooled_transport_refuses_a_zero_pool() -> None:
    with pytest.raises(ValueError):
        PooledTransport(max_connections=0)


def test_records_serialize_their_category_as_plain_text(wire: Wire) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        await reply.send(wire.json_response(503, {"error": "busy"}))

    async def main() -> ResponseResult:
        async with wire.serve(handler) as server:
            return await send_one(server.url)

    record = asyncio.run(main())
    assert json.dumps({"error": record.error}) == '{"error": "http_5xx"}'
