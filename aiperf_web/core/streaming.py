"""Streamed downloads that stay streamed under both servers: Django's ASGI handler drains a
synchronous iterator into memory before sending it, so under ASGI the chunks are pulled one at
a time from a worker thread instead (the same thread for the whole download: the database
cursor lives there)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, StreamingHttpResponse

_END = b""


async def _pull(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    next_chunk = sync_to_async(lambda: next(chunks, _END), thread_sensitive=True)
    while True:
        chunk = await next_chunk()
        if chunk is _END:
            return
        yield chunk


def stream_response(
    request: HttpRequest, chunks: Iterator[bytes], *, content_type: str, filename: str
) -> StreamingHttpResponse:
    content = _pull(chunks) if isinstance(request, ASGIRequest) else chunks
    response = StreamingHttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
