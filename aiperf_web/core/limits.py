"""What the service takes in, bounded: the text people type, and request bodies.

Text: every stored text a person types has a limit in characters, listed here once
(README, "Limits"). Each is enforced three times from the same number: the form field's
max_length (a form error, and the browser's maxlength), the API schema's maxLength (422 naming
the field; core/schemas.py), and the service every write goes through (`text_within`, Invalid
naming the field and the limit). Lists never carry a run's whole notes: they show the first
NOTES_LIST_CHARS characters and say they were cut.

Bodies: Django's ASGI handler spools the whole body (to /tmp past FILE_UPLOAD_MAX_MEMORY_SIZE)
before any view or setting can look at it, and its upload handlers then copy the file again: a
200 MB upload was taken in full and refused only afterwards. `BodyLimit` wraps the HTTP
application and answers 413 when the announced Content-Length is over the route's cap, and
counts the bytes of a body sent without one (chunked), answering 413 as soon as the count
passes the cap. The trace upload routes take the trace limit plus multipart overhead; every
other route takes DATA_UPLOAD_MAX_MEMORY_SIZE (the JSON cap, which Django also applies to
request.body).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from functools import cache
from typing import Any

from django.conf import settings
from django.urls import reverse

from aiperf_web.core.errors import Invalid
from runner import DEFAULT_MAX_BYTES

# An endpoint's plain and secret headers go into the engine's target: the engine's bounds.
from runner import HEADER_NAME_CHARS as HEADER_NAME_CHARS
from runner import HEADER_VALUE_CHARS as HEADER_VALUE_CHARS
from runner import HEADERS_MAX as HEADERS_MAX

# -- text people type ----------------------------------------------------------------------------

NAME_CHARS = 100  # a team's, an endpoint's, a scenario's, an API token's name
TRACE_NAME_CHARS = 200  # a trace's name (its file name by default)
DESCRIPTION_CHARS = 5_000  # a scenario's description
NOTES_CHARS = 10_000  # a run's notes, whole in the run's detail
NOTES_LIST_CHARS = 200  # a run's notes in lists: cut to this, with notes_truncated
TAG_CHARS = 40  # one tag (core/tags.py: letters, digits and _ . : + -)
TAGS_MAX = 20  # tags on one run or scenario
TAGS_STORED_CHARS = TAGS_MAX * (TAG_CHARS + 1) + 1  # stored as ",a,b,"
BASE_URL_CHARS = 500  # an endpoint's base URL
MODEL_CHARS = 200  # an endpoint's model name
API_KEY_CHARS = 4_096  # an endpoint's API key (a long JWT is 1-2 KB)
WEBHOOK_URL_CHARS = 500  # a team's or a scenario's run-end webhook
WEBHOOK_SECRET_CHARS = 200
SCENARIO_TRACES_MAX = 100  # traces one scenario replays
SEARCH_CHARS = 100  # a search or filter word (not stored: bounded like what it searches)


def text_within(value: str, *, field: str, limit: int) -> str:
    """`value` when it has at most `limit` characters; Invalid naming `field` otherwise."""
    if len(value) > limit:
        raise Invalid.field(
            field, f"at most {limit} characters (this one has {len(value)}): shorten it"
        )
    return value


def limits_context(request: object) -> dict[str, Any]:
    """The limits as templates read them (`{{ limits.NAME_CHARS }}`), for inputs written by
    hand rather than by a form (a context processor, settings.TEMPLATES)."""
    names = (name for name in globals() if name.endswith(("_CHARS", "_MAX")))
    return {"limits": {name: globals()[name] for name in names}}


def headers_within(headers: dict[str, str], *, field: str) -> dict[str, str]:
    """`headers` when their count, names and values are within the engine's bounds; Invalid
    naming `field` (never quoting a name past its bound) otherwise."""
    if len(headers) > HEADERS_MAX:
        raise Invalid.field(field, f"at most {HEADERS_MAX} headers (these are {len(headers)})")
    for name, value in headers.items():
        if len(name) > HEADER_NAME_CHARS:
            raise Invalid.field(
                field,
                f"a header name is at most {HEADER_NAME_CHARS} characters "
                f"({name[:40]!r}... has {len(name)})",
            )
        if len(value) > HEADER_VALUE_CHARS:
            raise Invalid.field(
                field,
                f"a header value is at most {HEADER_VALUE_CHARS} characters "
                f"({name!r} has {len(value)})",
            )
    return headers


# -- request bodies ------------------------------------------------------------------------------

Scope = dict[str, Any]
Message = Mapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# The form fields, part headers and boundaries around an uploaded trace: a few KB in practice.
MULTIPART_OVERHEAD_BYTES = 1024 * 1024
UPLOAD_MAX_BYTES = DEFAULT_MAX_BYTES + MULTIPART_OVERHEAD_BYTES


@cache
def _upload_paths() -> frozenset[str]:
    # The API's trace routes share one path (named after its first operation, the list).
    return frozenset({reverse("api:trace_list"), reverse("scenarios:traces")})


def body_cap(path: str) -> tuple[int, str]:
    """The largest body `path` takes, in bytes, and what to say when one is larger."""
    if path in _upload_paths():
        return UPLOAD_MAX_BYTES, (
            f"a trace file may be at most {DEFAULT_MAX_BYTES / 1e6:.1f} MB "
            f"({DEFAULT_MAX_BYTES} bytes; the whole upload {UPLOAD_MAX_BYTES} bytes with its "
            "form fields): upload a smaller trace, or cut it with `python -m runner trace`"
        )
    cap = int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0)
    return cap, (
        f"a request body may be at most {cap / 1e6:g} MB ({cap} bytes) here: "
        "send less in one request"
    )


class BodyLimit:
    """ASGI middleware: 413 for a body over the route's cap, decided before Django reads it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        cap, advice = body_cap(path)
        length = _content_length(scope)
        if length == -1:
            await _answer(scope, send, 400, "Content-Length is not a whole number of bytes")
            return
        if length is not None and length > cap:
            await _answer(
                scope, send, 413, f"request body of {length} bytes is too large: {advice}"
            )
            return
        counted = _Counted(scope, receive, send, cap, advice)

        async def guarded_send(message: Message) -> None:
            if not counted.refused:  # the 413 already sent is the answer
                await send(message)

        await self.app(scope, counted, guarded_send)


class _Counted:
    """The application's `receive`, counting body bytes. Past the cap it answers 413 itself and
    tells the application the client went away (Django's handler then stops without a
    response: nothing is half-read into a view)."""

    def __init__(self, scope: Scope, receive: Receive, send: Send, cap: int, advice: str) -> None:
        self.scope, self.receive, self.send = scope, receive, send
        self.cap, self.advice = cap, advice
        self.received = 0
        self.refused = False

    async def __call__(self) -> Message:
        if self.refused:
            return {"type": "http.disconnect"}
        message = await self.receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.cap:
                self.refused = True
                await _answer(
                    self.scope,
                    self.send,
                    413,
                    f"request body is over {self.cap} bytes (sent without a Content-Length, "
                    f"counted as it came): {self.advice}",
                )
                return {"type": "http.disconnect"}
        return message


def _content_length(scope: Scope) -> int | None:
    """The announced length; None when absent, -1 when it is not a number."""
    for name, value in scope.get("headers", ()):
        if name.lower() == b"content-length":
            try:
                length = int(value)
            except ValueError:
                return -1
            return length if length >= 0 else -1
    return None


async def _answer(scope: Scope, send: Send, status: int, message: str) -> None:
    """A JSON error under the API (its usual shape), plain text elsewhere; closes the
    connection, since the rest of the body will not be read."""
    if str(scope.get("path", "")).startswith("/api/"):
        body = json.dumps({"detail": message, "errors": [{"field": "body", "message": message}]})
        content_type = b"application/json"
    else:
        body, content_type = message + "\n", b"text/plain; charset=utf-8"
    data = body.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type),
                (b"content-length", str(len(data)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})
