"""The mock inference server as one plain ASGI callable over the simulated cluster.

Owns the HTTP surface (routes, auth, statuses, headers) and the wall clock: each request is
submitted at `now_s = monotonic() - t0` and answered at the plan's times. It must not decide
routing, caching or latency (the cluster does) nor hand-build wire bytes (`render.py` does).

No framework: a plain ASGI callable costs least per request, and the mock must never be the
bottleneck of the client it measures.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, NamedTuple

from runner.cluster import Cluster, ClusterRequest, Placement, Rejection
from runner.cluster.affinity import NVEXT_FIELDS_16, unknown_nvext_field_16
from runner.dynamo import PARENT_SESSION_HEADER, SESSION_HEADER
from runner.mockserver.config import MockServerConfig
from runner.mockserver.faults import FaultDraw, FaultInjector
from runner.mockserver.parse import ApiError, Call, DynamoError, parse_call
from runner.mockserver.render import Answer, error_event, usage_json, worker_nvext
from runner.mockserver.stats import ServerCounters, StatsBody, render_prometheus

__all__ = ["Decision", "DeliberateDisconnect", "MockApp"]

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]

# A request body larger than this is refused (413) before it is parsed.
MAX_BODY_BYTES = 64 * 1024 * 1024

_JSON = (b"content-type", b"application/json")
_SSE_HEADERS: Headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
_CHAT_PATH = "/v1/chat/completions"
_COMPLETIONS_PATH = "/v1/completions"

# ASGI gives header names lowercased, as bytes.
_SESSION_HEADER = SESSION_HEADER.lower().encode("ascii")
_PARENT_SESSION_HEADER = PARENT_SESSION_HEADER.lower().encode("ascii")


class DeliberateDisconnect(Exception):
    """Raised to make the ASGI server drop the connection mid-answer (a disconnect fault).

    ASGI has no "close the socket" message; every server closes the transport when the app
    raises after the response started. `server.py` keeps these out of the error log.
    """


class Decision(NamedTuple):
    """What the cluster state decided for one parsed request: its fault, and its placement.

    `placement` is None when an injected error answers first (the cluster never saw it; then
    `request_id` is "" and `start` 0). `start` is the monotonic time of submit.
    """

    fault: FaultDraw
    request_id: str
    start: float
    placement: Placement | Rejection | None


class _Flight:
    """A timed answer in progress: flags set from outside, read when the answer next wakes."""

    __slots__ = ("gone", "lost")

    def __init__(self) -> None:
        self.gone = False  # the client disconnected
        self.lost = False  # its worker was taken down


class MockApp:
    """ASGI 3 application: `await app(scope, receive, send)`. One per served cluster.

    Not thread-safe: every call must come from one event loop (the server's).
    """

    def __init__(self, config: MockServerConfig | None = None) -> None:
        self.config = config = config if config is not None else MockServerConfig()
        self._auth: bytes | None = config.api_key.encode() if config.api_key else None
        self._block_size = config.cluster.block_size_tokens
        self._stall_s = config.faults.stall_s
        self._retry_after = str(config.faults.retry_after_s).encode()
        # Released Dynamo (generation 1.6) refuses unknown nvext keys and answers what its
        # frontend refuses in its own error shape (docs/dynamo-observed.md §a).
        self._dynamo_16 = not config.cluster.dynamo_version.session_control
        self._nvext_fields = frozenset(NVEXT_FIELDS_16) if self._dynamo_16 else None
        self._seq = 0  # response ids stay unique across resets
        self._started_s = time.monotonic()
        self.reset()

    def reset(self) -> None:
        """A fresh cluster, fault RNG and counters (`POST /admin/reset`). Answers in flight
        finish against the cluster and counters they started with."""
        self._cluster = Cluster(self.config.cluster)
        self._faults = FaultInjector(self.config.faults)
        self._counters = ServerCounters()
        self._flights: dict[str, _Flight] = {}
        self._t0 = t0 = time.monotonic()
        cluster = self._cluster

        def cancel(request_id: str, now: float) -> None:
            cluster.cancel(request_id, now - t0)

        # What a _Job calls to free its batch slot: bound to the cluster current at submit.
        self._cancel: Callable[[str, float], None] = cancel

    def now_s(self) -> float:
        """The cluster's clock: seconds since the last reset."""
        return time.monotonic() - self._t0

    def stats(self) -> StatsBody:
        return StatsBody(
            model=self.config.model,
            uptime_s=round(time.monotonic() - self._started_s, 3),
            process_cpu_s=round(time.process_time(), 3),
            server=self._counters.snapshot(),
            cluster=self._cluster.stats(self.now_s()),
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "lifespan":
            await _lifespan(receive, send)
        # websocket: not served; returning without accepting makes the server refuse it

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        method: str = scope["method"]
        try:
            if path in (_CHAT_PATH, _COMPLETIONS_PATH):
                _allow(method, "POST")
                await self._complete(scope, receive, send, chat=path == _CHAT_PATH)
            elif path == "/v1/models":
                _allow(method, "GET")
                self._check_key(scope)
                await _send_json(send, 200, self._models())
            elif path == "/health":
                _allow(method, "GET")
                await self._health(send)
            elif path == "/metrics":
                _allow(method, "GET")
                text = render_prometheus(await self._stats_body()).encode()
                await _send(send, 200, text, [(b"content-type", b"text/plain; version=0.0.4")])
            elif path == "/stats":
                _allow(method, "GET")
                await _send_json(send, 200, json.dumps(await self._stats_body()).encode())
            elif path.startswith("/admin/"):
                _allow(method, "POST")
                self._check_key(scope)
                await _send_json(send, 200, await self._admin_async(path))
            else:
                raise ApiError(404, f"no route {path}", code="not_found")
        except _MethodNotAllowed as exc:
            await _send_json(send, 405, exc.body(), [(b"allow", exc.allow.encode())])
        except ApiError as exc:
            await _send_json(send, exc.status, exc.body())

    # -- completions -------------------------------------------------------------------

    async def _complete(self, scope: Scope, receive: Receive, send: Send, *, chat: bool) -> None:
        counters = self._counters
        session = parent = auth = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                auth = value
            elif name == _SESSION_HEADER:
                # surrogateescape: every header byte stays one unit, so the cluster measures
                # the id's 256-byte limit in the bytes that were sent.
                session = value.decode("utf-8", "surrogateescape")
            elif name == _PARENT_SESSION_HEADER:
                parent = value.decode("utf-8", "surrogateescape")
        config = self.config
        try:
            if self._auth is not None:
                _check_bearer(auth, self._auth)
            body = await _read_body(receive)
            call = parse_call(
                body,
                chat=chat,
                model=config.model,
                block_size_tokens=self._block_size,
                default_max_tokens=config.default_max_tokens,
                nvext_fields=self._nvext_fields,
                unknown_nvext_field=unknown_nvext_field_16,
            )
        except ApiError as exc:
            counters.answered(exc.status)
            raise
        fault, request_id, start, placement = await self._decide(call, session, parent)
        if placement is None:
            counters.faults[fault.kind] += 1  # type: ignore[index]
            await self._injected_error(send, fault)
            return
        if isinstance(placement, Rejection):
            counters.answered(placement.status)
            raise _rejection_error(placement, dynamo=self._dynamo_16)

        if fault.kind is not None:
            counters.faults[fault.kind] += 1
        counters.prompt_tokens += call.prompt_tokens
        counters.cached_tokens += placement.cached_tokens
        counters.completion_tokens += call.output_tokens
        nvext = (
            worker_nvext(placement.worker_id, placement.dp_rank) if call.want_worker_id else None
        )
        answer = Answer(
            chat=chat,
            response_id=("chatcmpl-" if chat else "cmpl-") + request_id,
            created=int(time.time()),
            model=config.model,
            include_usage=call.include_usage,
            nvext=nvext,
        )
        if call.stream and fault.kind is None and placement.ttft_s <= 0 and placement.itl_s <= 0:
            # Zero latency: the whole stream is due now, so it goes out as one body with a
            # Content-Length (two writes: head, body) instead of one chunked write per token.
            counters.answered(200)
            n = call.output_tokens
            usage = usage_json(call.prompt_tokens, n, placement.cached_tokens)
            body = (
                answer.head() + answer.token_events(0, n) + answer.tail(call.finish_reason, usage)
            )
            headers = [
                *_SSE_HEADERS,
                (b"x-worker-id", b"%d" % placement.worker_id),
                (b"content-length", b"%d" % len(body)),
            ]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        job = _Job(self, request_id, call, placement, fault, start, answer)
        if call.stream:
            await self._stream(send, receive, job)
        else:
            await self._unary(send, receive, job)

    async def _decide(self, call: Call, session: str | None, parent: str | None) -> Decision:
        """The fault draw, then the cluster's placement: the state step of a request.

        Here the state is this app's own; `runner.mockserver.multi` asks the one process
        that owns it. Synchronous work under an `async def` so both look alike to callers.
        """
        return self.decide(call, session, parent, None)

    def decide(
        self, call: Call, session: str | None, parent: str | None, start: float | None
    ) -> Decision:
        """`_decide`'s work; `start` None means now (a front process passes its own)."""
        fault = self._faults.draw(call.output_tokens)
        if fault.kind is not None and fault.kind not in ("disconnect", "stall"):
            return Decision(fault, "", 0.0, None)
        self._seq += 1
        request_id = f"{self._seq:x}"
        if start is None:
            start = time.monotonic()
        placement = self._cluster.submit(
            ClusterRequest(
                request_id=request_id,
                block_keys=call.block_keys,
                prompt_tokens=call.prompt_tokens,
                output_tokens=call.output_tokens,
                session_control=call.session_control,
                session_header=session,
                parent_session_header=parent,
            ),
            start - self._t0,
        )
        return Decision(fault, request_id, start, placement)

    async def _stream(self, send: Send, receive: Receive, job: _Job) -> None:
        """A timed stream: the head now, tokens at the plan's times, late ones coalesced."""
        call, answer, counters = job.call, job.answer, job.counters
        n = call.output_tokens
        usage = usage_json(call.prompt_tokens, n, job.placement.cached_tokens)
        ttft_s, itl_s = job.placement.ttft_s, job.placement.itl_s
        kind = job.fault.kind
        counters.answered(200)

        headers = [*_SSE_HEADERS, job.worker_header]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        stall_at = job.fault.at_token if kind == "stall" else n
        drop_at = job.fault.at_token if kind == "disconnect" else n
        stall_s = self._stall_s
        flight = job.start_flight(receive)
        try:
            first_due = job.start + ttft_s
            sent = 0
            pending = answer.head()
            monotonic, sleep = time.monotonic, asyncio.sleep
            while True:
                due = first_due + sent * itl_s + (stall_s if sent >= stall_at else 0.0)
                now = monotonic()
                if due > now:
                    await sleep(due - now)
                    now = monotonic()
                if flight.gone:
                    counters.client_disconnects += 1
                    job.cancel(now)
                    return
                if flight.lost:
                    counters.streams_broken += 1
                    counters.worker_down_failures += 1
                    error = error_event(f"worker {job.placement.worker_id} went down", 503)
                    await send({"type": "http.response.body", "body": pending + error})
                    return
                if sent == drop_at:
                    if pending:
                        await send(
                            {"type": "http.response.body", "body": pending, "more_body": True}
                        )
                    counters.streams_broken += 1
                    job.cancel(now)
                    raise DeliberateDisconnect
                # Tokens due by now, never across the stall or the drop point.
                limit = min(stall_at if sent < stall_at else n, drop_at)
                if itl_s > 0:
                    # Late by a gap or more: the tokens that piled up go out as one chunk.
                    upto = min(limit, sent + 1 + int((now - due) / itl_s))
                    counters.coalesced_tokens += upto - sent - 1
                    chunk = pending + answer.token_event(sent, upto)
                else:
                    upto = limit  # all due at one instant: one event per token, one write
                    chunk = pending + answer.token_events(sent, upto)
                sent, pending = upto, b""
                if sent == n:
                    chunk += answer.tail(call.finish_reason, usage)
                    await send({"type": "http.response.body", "body": chunk})
                    return
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        finally:
            job.end_flight()

    async def _unary(self, send: Send, receive: Receive, job: _Job) -> None:
        call, placement, counters = job.call, job.placement, job.counters
        usage = usage_json(call.prompt_tokens, call.output_tokens, placement.cached_tokens)
        body = job.answer.whole(call.output_tokens, call.finish_reason, usage)
        # Due with its last token; durations from submit, so a reset meanwhile changes nothing.
        due = job.start + placement.ttft_s + max(0, call.output_tokens - 1) * placement.itl_s
        kind = job.fault.kind
        if kind == "stall":
            due += self._stall_s
        if due > time.monotonic() or kind == "disconnect":
            flight = job.start_flight(receive)
            try:
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                now = time.monotonic()
                if flight.gone:
                    counters.client_disconnects += 1
                    job.cancel(now)
                    return
                if flight.lost:
                    counters.worker_down_failures += 1
                    counters.answered(503)
                    message = f"worker {placement.worker_id} went down"
                    error = ApiError(503, message, type="server_error", code="worker_down")
                    await _send_json(send, 503, error.body())
                    return
                if kind == "disconnect":
                    # The head and half the body, then the connection drops.
                    counters.answered(200)
                    counters.streams_broken += 1
                    headers = [_JSON, job.worker_header, (b"content-length", b"%d" % len(body))]
                    await send({"type": "http.response.start", "status": 200, "headers": headers})
                    half = body[: len(body) // 2]
                    await send({"type": "http.response.body", "body": half, "more_body": True})
                    raise DeliberateDisconnect
            finally:
                job.end_flight()
        counters.answered(200)
        await _send(send, 200, body, [_JSON, job.worker_header])

    async def _injected_error(self, send: Send, fault: FaultDraw) -> None:
        counters = self._counters
        if fault.kind == "rate_limit":
            counters.answered(429)
            error = ApiError(429, "injected fault: rate limit reached", code="rate_limit_exceeded")
            await _send_json(send, 429, error.body(), [(b"retry-after", self._retry_after)])
        elif fault.kind == "overload":
            counters.answered(503)
            error = ApiError(503, "injected fault: server overloaded", code="server_is_overloaded")
            await _send_json(send, 503, error.body())
        else:
            counters.answered(500)
            error = ApiError(500, "injected fault: internal server error", code="internal_error")
            await _send_json(send, 500, error.body())

    # -- other routes ------------------------------------------------------------------

    def _check_key(self, scope: Scope) -> None:
        if self._auth is None:
            return
        auth = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                auth = value
        _check_bearer(auth, self._auth)

    def _models(self) -> bytes:
        model = {
            "id": self.config.model,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "aiperf-web-mock",
        }
        return json.dumps({"object": "list", "data": [model]}).encode()

    async def _stats_body(self) -> StatsBody:
        return self.stats()

    async def _admin_async(self, path: str) -> bytes:
        return self.admin(path)

    async def _workers_up(self) -> tuple[int, int]:
        return self.workers_up()

    def workers_up(self) -> tuple[int, int]:
        """(workers up, workers)."""
        cluster = self._cluster
        workers = cluster.config.workers
        return sum(1 for i in range(workers) if cluster.worker_is_up(i)), workers

    def lose(self, request_ids: Iterable[str]) -> None:
        """Answers in flight whose worker went down: they fail at their next wake."""
        for request_id in request_ids:
            flight = self._flights.get(request_id)
            if flight is not None:
                flight.lost = True

    async def _health(self, send: Send) -> None:
        up, workers = await self._workers_up()
        status = "healthy" if up else "unhealthy"
        body = json.dumps({"status": status, "workers_up": up, "workers": workers}).encode()
        await _send_json(send, 200 if up else 503, body)

    def admin(self, path: str) -> bytes:
        """An `/admin/...` route's answer body (ApiError 404 for an unknown route)."""
        if path == "/admin/reset":
            self.reset()
            return b'{"reset":true}'
        parts = path.split("/")  # ["", "admin", "workers", "{i}", "down"|"up"]
        if len(parts) == 5 and parts[2] == "workers" and parts[4] in ("down", "up"):
            try:
                worker_id = int(parts[3])
            except ValueError:
                worker_id = -1
            cluster = self._cluster
            if not 0 <= worker_id < cluster.config.workers:
                raise ApiError(
                    404,
                    f"no worker {parts[3]!r}: workers are 0..{cluster.config.workers - 1}",
                    code="not_found",
                )
            if parts[4] == "up":
                cluster.worker_up(worker_id, self.now_s())
                return json.dumps({"worker_id": worker_id, "up": True}).encode()
            failed = cluster.worker_down(worker_id, self.now_s())
            self.lose(failed)
            return json.dumps(
                {"worker_id": worker_id, "up": False, "requests_failed": len(failed)}
            ).encode()
        raise ApiError(404, f"no admin route {path}", code="not_found")


class _Job:
    """One served request: what was asked, the cluster's plan, and where it is accounted.

    Holds the cluster, clock origin, counters and in-flight table current at submit, so an
    answer still running across `POST /admin/reset` settles with the state it started in.
    """

    __slots__ = (
        "_cancel",
        "_watch",
        "answer",
        "call",
        "counters",
        "fault",
        "flight",
        "flights",
        "placement",
        "request_id",
        "start",
        "worker_header",
    )

    def __init__(
        self,
        app: MockApp,
        request_id: str,
        call: Call,
        placement: Placement,
        fault: FaultDraw,
        start: float,
        answer: Answer,
    ) -> None:
        self.request_id = request_id
        self.call = call
        self.placement = placement
        self.fault = fault
        self.start = start  # monotonic time of submit
        self.answer = answer
        self.worker_header = (b"x-worker-id", b"%d" % placement.worker_id)
        self._cancel = app._cancel
        self.counters = app._counters
        self.flights = app._flights
        self.flight = _Flight()
        self._watch: asyncio.Task[None] | None = None

    def start_flight(self, receive: Receive) -> _Flight:
        """Register for worker-down and watch for the client leaving. The watch is one task
        per timed answer: ASGI reports a disconnect only through `receive()`, which blocks
        until then. Zero-latency answers never need it."""
        self.flights[self.request_id] = self.flight
        self.counters.in_flight += 1
        self._watch = asyncio.ensure_future(_watch_disconnect(receive, self.flight))
        return self.flight

    def end_flight(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        self.flights.pop(self.request_id, None)
        self.counters.in_flight -= 1

    def cancel(self, now: float) -> None:
        """The answer ends early: free its batch slot in the cluster now."""
        self._cancel(self.request_id, now)


async def _watch_disconnect(receive: Receive, flight: _Flight) -> None:
    message = await receive()
    if message["type"] == "http.disconnect":
        flight.gone = True


async def _read_body(receive: Receive) -> bytes:
    message = await receive()
    body: bytes = message.get("body", b"")
    if not message.get("more_body"):
        return body  # the usual case: the whole body in one message
    parts = [body]
    size = len(body)
    while message.get("more_body"):
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ApiError(400, "the client went away while sending the body")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise ApiError(413, f"the request body is over {MAX_BODY_BYTES} bytes")
        parts.append(chunk)
    return b"".join(parts)


def _check_bearer(auth: bytes | None, key: bytes) -> None:
    scheme, _, token = (auth or b"").partition(b" ")
    # compare_digest: the time taken does not tell how much of a guessed key was right.
    if scheme.lower() != b"bearer" or not hmac.compare_digest(token.strip(), key):
        raise ApiError(
            401,
            "Incorrect or missing API key: send `Authorization: Bearer <key>`.",
            code="invalid_api_key",
        )


class _MethodNotAllowed(ApiError):
    def __init__(self, method: str, allow: str) -> None:
        super().__init__(405, f"method {method} is not allowed here; use {allow}")
        self.allow = allow


def _allow(method: str, allowed: str) -> None:
    if method != allowed:
        raise _MethodNotAllowed(method, allowed)


def _rejection_error(rejection: Rejection, *, dynamo: bool) -> ApiError:
    if dynamo:
        return DynamoError(rejection.status, rejection.message)
    if rejection.status == 503:
        return ApiError(503, rejection.message, type="server_error", code="no_workers")
    return ApiError(rejection.status, rejection.message)


async def _send(
    send: Send, status: int, body: bytes, headers: Iterable[tuple[bytes, bytes]]
) -> None:
    headers = [*headers, (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _send_json(
    send: Send, status: int, body: bytes, headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    await _send(send, status, body, [_JSON, *headers])


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
