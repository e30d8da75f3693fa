"""The HTTP client for OpenAI-compatible inference endpoints.

    InferenceClient.send(request) -> ResponseResult    one record per request, never raises
    preflight(url, model=...) -> EndpointInfo          or raises EndpointError (BadInput)

Layers, each usable alone: `sse` (event-stream parser) and `h1` (HTTP/1.1 framing) are
protocol cores without I/O; `openai` builds bodies and reads answers; `transport` is the
socket pool under httpx; `http` ties them into the client.
"""

from runner.client.errors import EndpointError
from runner.client.http import ErrorCategory, InferenceClient, ResponseResult, Timeouts, api_url
from runner.client.openai import (
    ChatRequest,
    CompletionRequest,
    EncodedRequest,
    InferenceRequest,
    JsonSafeText,
    merge_body,
)
from runner.client.preflight import EndpointInfo, preflight
from runner.client.sse import SSEEvent, SSEParser
from runner.client.transport import PooledTransport

__all__ = [
    "ChatRequest",
    "CompletionRequest",
    "EncodedRequest",
    "EndpointError",
    "EndpointInfo",
    "ErrorCategory",
    "InferenceClient",
    "InferenceRequest",
    "JsonSafeText",
    "PooledTransport",
    "ResponseResult",
    "SSEEvent",
    "SSEParser",
    "Timeouts",
    "api_url",
    "merge_body",
    "preflight",
]
