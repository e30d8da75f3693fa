"""The inference client: one shared httpx.AsyncClient, one `ResponseResult` per request.

Owns the exchange with an OpenAI-compatible endpoint: URLs, headers and the API key,
timeouts, reading the answer off the wire with a timestamp per read, and sorting every outcome
into one error category. It never retries, sleeps or decides what to send next (the replay
engine does), and never logs or returns the API key: error text is scrubbed of it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from runner.client.answers import ResponseAccumulator, error_message
from runner.client.openai import InferenceRequest, encode_body
from runner.client.sse import SSEParser
from runner.client.transport import PooledTransport
from runner.errors import ErrorCategory

__all__ = [
    "ErrorCategory",
    "InferenceClient",
    "ResponseResult",
    "Timeouts",
    "api_url",
]

# How much of an error body we read to find its message; the rest is not worth the wait.
_ERROR_BODY_LIMIT = 16 * 1024
_DETAIL_LIMIT = 300


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeouts:
    """Seconds; None waits forever. `read_s` bounds every wait for bytes: the first byte
    (queueing plus prefill on the server) and any stall mid-stream."""

    connect_s: float | None = 10.0
    read_s: float | None = 300.0
    total_s: float | None = None  # the whole request, first byte of the request to last
    pool_s: float | None = None  # waiting for a free connection when all are busy


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponseResult:
    """The record of one request. Times are seconds on the client's clock (`clock`)."""

    start_s: float
    end_s: float
    first_token_s: float | None  # first chunk with content, reasoning or tool-call tokens
    # Arrival of every token chunk (one clock read per socket read: a read's chunks share it).
    chunk_times_s: tuple[float, ...]
    output_tokens: int | None  # usage.completion_tokens, else counted chunks; None if unknown
    prompt_tokens: int | None
    cached_tokens: int | None  # usage.prompt_tokens_details.cached_tokens; None if not reported
    served_by: str | None  # inference worker: nvext.worker_id, else the x-worker-id header
    status: int | None  # HTTP status; None when no response head arrived
    error: ErrorCategory | None  # None on success
    error_detail: str | None = None  # one short line, never the API key
    finish_reason: str | None = None
    text: str | None = None  # the generated content, only when the client captures text

    @classmethod
    def failure(
        cls, start_s: float, error: ErrorCategory, detail: str, *, end_s: float | None = None
    ) -> ResponseResult:
        """A request that got no answer: no head, no chunk, no token; it ended now unless
        `end_s` says when."""
        return cls(
            start_s=start_s,
            end_s=time.perf_counter() if end_s is None else end_s,
            first_token_s=None,
            chunk_times_s=(),
            output_tokens=0,
            prompt_tokens=None,
            cached_tokens=None,
            served_by=None,
            status=None,
            error=error,
            error_detail=detail,
        )

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def ttft_s(self) -> float | None:
        return None if self.first_token_s is None else self.first_token_s - self.start_s

    @property
    def latency_s(self) -> float:
        return self.end_s - self.start_s


def api_url(base_url: str, path: str) -> httpx.URL:
    """`path` (e.g. "/v1/chat/completions") under an endpoint's base URL.

    Accepts the server root, the `/v1` base most tools print, or a full endpoint URL:
    `http://h:8000`, `http://h:8000/v1/`, `http://h:8000/v1/chat/completions` all lead to
    `http://h:8000/v1/chat/completions`. A prefix before `/v1` (a gateway route) is kept.
    """
    url = httpx.URL(base_url)
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(f"endpoint URL must look like http://host:port, got {base_url!r}")
    prefix = url.path.rstrip("/")
    for suffix in ("/v1/chat/completions", "/v1/completions", "/v1/models", "/v1"):
        if prefix.endswith(suffix):
            prefix = prefix[: -len(suffix)]
            break
    return url.copy_with(path=prefix + path)


class _Exchange:
    """What the wire said about one request so far, kept when an exception cuts it short."""

    __slots__ = ("received", "served_header", "snippet", "status")

    def __init__(self) -> None:
        self.status: int | None = None
        self.served_header: str | None = None
        self.received = 0  # body bytes
        self.snippet = b""  # the first body bytes, to describe a non-OpenAI answer


class InferenceClient:
    """Sends OpenAI-compatible requests to one endpoint over a pool sized to `concurrency`.

    `send` never raises for endpoint trouble: every outcome is a `ResponseResult` with an
    error category. It re-raises `asyncio.CancelledError` when the calling task is
    cancelled, as asyncio requires; the record of the cancelled request (category
    `cancelled`, with whatever arrived before) goes to the `on_result` callback first. Pass
    `on_result` wherever requests may be cancelled, e.g. at the end of a run, and treat it as
    the one place records arrive: it gets every record, exactly once.
    """

    def __init__(
        self,
        base_url: str,
        *,
        concurrency: int,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeouts: Timeouts = Timeouts(),
        clock: Callable[[], float] = time.perf_counter,
        capture_text: bool = False,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self._base_url = base_url
        self._api_key = api_key or None
        self._concurrency = concurrency
        self._timeouts = timeouts
        self._clock = clock
        self._capture_text = capture_text
        self._urls: dict[str, httpx.URL] = {}
        api_url(base_url, "/v1/models")  # fail now on a malformed URL, not per request
        default_headers = {
            "accept": "application/json, text/event-stream",
            # We read raw bytes (aiter_raw), so a compressed answer would be unreadable.
            "accept-encoding": "identity",
            "content-type": "application/json",
            "user-agent": "aiperf-web-runner",
        }
        default_headers.update({name.lower(): value for name, value in (headers or {}).items()})
        if self._api_key is not None:
            default_headers["authorization"] = f"Bearer {self._api_key}"
        self._headers = default_headers
        self._header_list = list(default_headers.items())
        timeout = httpx.Timeout(
            connect=timeouts.connect_s,
            read=timeouts.read_s,
            write=timeouts.read_s,
            pool=timeouts.pool_s,
        )
        self._timeout_ext = timeout.as_dict()
        # Every connection may stay open: at steady state all `concurrency` are in use.
        self._transport = transport or PooledTransport(max_connections=concurrency)
        # The one shared client owns the pool. `send` hands requests straight to its
        # transport: the client's per-request layers (cookie jar, auth flow, redirect loop,
        # event hooks, logging) cost ~250 µs a request here and a benchmark needs none.
        self._http = httpx.AsyncClient(
            headers=default_headers,
            timeout=timeout,
            transport=self._transport,
            follow_redirects=False,
            trust_env=False,  # benchmark traffic goes straight to the endpoint, no env proxies
        )

    def __repr__(self) -> str:
        key = "<set>" if self._api_key else None
        return (
            f"InferenceClient(base_url={self._base_url!r}, concurrency={self._concurrency}, "
            f"api_key={key})"
        )

    async def __aenter__(self) -> InferenceClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def url(self, path: str) -> httpx.URL:
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = api_url(self._base_url, path)
        return url

    def redact(self, text: str) -> str:
        """`text` as one short line with the API key blanked out."""
        key = self._api_key
        if key and key in text:
            text = text.replace(key, "***")
        text = " ".join(text.split())
        return text if len(text) <= _DETAIL_LIMIT else text[: _DETAIL_LIMIT - 1] + "…"

    async def get(self, path: str) -> httpx.Response:
        """A plain GET under the API root (e.g. "/v1/models"), body read. Raises httpx errors."""
        return await self._http.get(self.url(path))

    async def post_json(self, path: str, body: Mapping[str, Any]) -> httpx.Response:
        """A plain JSON POST under the API root, whole body read (a probe that must see the
        server's full answer). Raises httpx errors."""
        return await self._http.post(self.url(path), content=encode_body(body))

    async def send(
        self,
        request: InferenceRequest,
        *,
        headers: Mapping[str, str] | None = None,
        on_result: Callable[[ResponseResult], None] | None = None,
    ) -> ResponseResult:
        clock = self._clock
        acc = ResponseAccumulator(capture_text=self._capture_text)
        exchange = _Exchange()
        error: ErrorCategory | None = None
        detail: str | None = None
        total_s = self._timeouts.total_s
        start = clock()
        try:
            if total_s is None:
                error, detail = await self._exchange(request, headers, acc, exchange)
            else:
                async with asyncio.timeout(total_s):
                    error, detail = await self._exchange(request, headers, acc, exchange)
        except asyncio.CancelledError:
            # asyncio.timeout turns its own cancellation into TimeoutError, so this one
            # came from outside: record it, then let it propagate.
            record = self._record(
                start, acc, exchange, ErrorCategory.CANCELLED, "cancelled by the caller"
            )
            if on_result is not None:
                on_result(record)
            raise
        except TimeoutError:
            error, detail = ErrorCategory.TIMEOUT, f"no complete answer within {total_s} s"
        except httpx.HTTPError as exc:
            error, detail = self._classify(exc, acc, exchange)
        record = self._record(start, acc, exchange, error, detail)
        if on_result is not None:
            on_result(record)
        return record

    def _record(
        self,
        start: float,
        acc: ResponseAccumulator,
        exchange: _Exchange,
        error: ErrorCategory | None,
        detail: str | None,
    ) -> ResponseResult:
        return ResponseResult(
            start_s=start,
            end_s=self._clock(),
            first_token_s=acc.first_token_s,
            chunk_times_s=tuple(acc.chunk_times),
            output_tokens=acc.output_tokens,
            prompt_tokens=acc.prompt_tokens,
            cached_tokens=acc.cached_tokens,
            served_by=acc.worker_id or exchange.served_header,
            status=exchange.status,
            error=error,
            error_detail=None if detail is None else self.redact(detail),
            finish_reason=acc.finish_reason,
            text=acc.text,
        )

    async def _exchange(
        self,
        request: InferenceRequest,
        headers: Mapping[str, str] | None,
        acc: ResponseAccumulator,
        exchange: _Exchange,
    ) -> tuple[ErrorCategory | None, str | None]:
        if headers:
            merged = dict(self._headers)
            merged.update({name.lower(): value for name, value in headers.items()})
            header_list = list(merged.items())
        else:
            header_list = self._header_list
        outgoing = httpx.Request(
            "POST",
            self.url(request.path),
            headers=header_list,
            content=request.encoded(),
            extensions={"timeout": self._timeout_ext},
        )
        response = await self._transport.handle_async_request(outgoing)
        try:
            status = exchange.status = response.status_code
            exchange.served_header = response.headers.get("x-worker-id")
            if not 200 <= status < 300:
                return await self._http_error(response)
            content_type = response.headers.get("content-type", "")
            if "event-stream" in content_type or (request.stream and "json" not in content_type):
                await self._read_stream(response, acc, exchange)
            else:
                await self._read_body(response, acc, exchange)
        finally:
            await response.aclose()
        if acc.error is not None:
            return ErrorCategory.BAD_PAYLOAD, acc.error
        if acc.finished:
            return None, None
        if not acc.recognized:
            if exchange.received:
                snippet = exchange.snippet.decode("utf-8", "replace")
                return (
                    ErrorCategory.BAD_PAYLOAD,
                    f"not an OpenAI answer ({content_type or 'no content type'}): {snippet}",
                )
            return ErrorCategory.STREAM_BROKEN, "the answer ended before any event"
        return (
            ErrorCategory.STREAM_BROKEN,
            f"stream ended without [DONE] or finish_reason after "
            f"{len(acc.chunk_times)} token chunks",
        )

    async def _read_stream(
        self, response: httpx.Response, acc: ResponseAccumulator, exchange: _Exchange
    ) -> None:
        # One clock read per socket read: events that arrived together share their time, and
        # the accumulator takes them in one call (its fast path wants the raw event bytes).
        clock = self._clock
        parser = SSEParser()
        feed = parser.feed_raw
        on_events = acc.on_events
        async for raw in response.aiter_raw():
            t = clock()
            if not exchange.received:
                exchange.snippet = raw[:120]
            exchange.received += len(raw)
            events = feed(raw)
            if events:
                on_events(events, t)
            if acc.error is not None:
                return  # closing the response drops the connection; errors are rare
        # Keep reading past [DONE] until the body ends, so the connection can be reused.
        for event in parser.flush():
            acc.on_event(event, clock())

    async def _read_body(
        self, response: httpx.Response, acc: ResponseAccumulator, exchange: _Exchange
    ) -> None:
        parts = [raw async for raw in response.aiter_raw()]
        body = b"".join(parts)
        exchange.received = len(body)
        exchange.snippet = body[:120]
        if body:
            acc.on_body(body, self._clock())

    async def _http_error(self, response: httpx.Response) -> tuple[ErrorCategory, str]:
        status = response.status_code
        parts: list[bytes] = []
        size = 0
        try:
            async for raw in response.aiter_raw():
                parts.append(raw)
                size += len(raw)
                if size >= _ERROR_BODY_LIMIT:
                    break
        except httpx.HTTPError:
            pass  # the status says enough; a half-read body only loses the message
        body = b"".join(parts)[:_ERROR_BODY_LIMIT]
        try:
            message = error_message(json.loads(body))
        except ValueError:
            message = None
        if message is None:
            message = body.decode("utf-8", "replace").strip() or response.reason_phrase
        detail = f"HTTP {status}: {message}"
        if status == 429:
            retry_after = response.headers.get("retry-after")
            if retry_after:
                detail += f" (retry after {retry_after} s)"
            return ErrorCategory.HTTP_429, detail
        if 400 <= status < 500:
            return ErrorCategory.HTTP_4XX, detail
        if status >= 500:
            return ErrorCategory.HTTP_5XX, detail
        # 1xx/3xx: redirects are not followed, a benchmark must hit the endpoint it names.
        location = response.headers.get("location")
        if location:
            detail += f" (redirect to {location}: use that URL)"
        return ErrorCategory.BAD_PAYLOAD, detail

    def _classify(
        self, exc: httpx.HTTPError, acc: ResponseAccumulator, exchange: _Exchange
    ) -> tuple[ErrorCategory | None, str | None]:
        if isinstance(exc, httpx.ConnectTimeout | httpx.ConnectError | httpx.UnsupportedProtocol):
            return ErrorCategory.CONNECT, str(exc) or type(exc).__name__
        if isinstance(exc, httpx.LocalProtocolError):
            # Our side refused to send it (e.g. a line break in a header value).
            return ErrorCategory.BAD_PAYLOAD, f"request not sent: {exc}"
        if isinstance(exc, httpx.TimeoutException):
            if exchange.status is None:
                return ErrorCategory.TIMEOUT, f"no response: {exc}"
            return (
                ErrorCategory.TIMEOUT,
                f"stalled after {len(acc.chunk_times)} token chunks: {exc}",
            )
        if acc.done and acc.error is None:
            return None, None  # [DONE] arrived; losing the connection after it costs nothing
        where = "before the response" if exchange.status is None else "mid-stream"
        return ErrorCategory.STREAM_BROKEN, f"connection lost {where}: {exc}"
