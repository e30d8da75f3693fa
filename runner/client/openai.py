"""The OpenAI-compatible wire format: request bodies out, answers interpreted in, no I/O.

Owns what a chat-completions or completions body contains and what a streamed chunk or a
whole response body means (tokens, reasoning, tool calls, finish reason, usage, cached
tokens, Dynamo's `nvext.worker_id`, error payloads). It never opens sockets or reads clocks:
times are handed in by `http.py`, which owns the exchange.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from runner.client.sse import SSEEvent

__all__ = [
    "ChatRequest",
    "CompletionRequest",
    "InferenceRequest",
    "ResponseAccumulator",
    "encode_body",
    "error_message",
    "merge_body",
    "parse_worker_id",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatRequest:
    """One `/v1/chat/completions` request. `extra_body` is merged over the built body."""

    path: ClassVar[str] = "/v1/chat/completions"

    model: str
    messages: Sequence[Mapping[str, Any]]
    max_tokens: int | None = None
    stream: bool = True
    include_usage: bool = True  # stream_options.include_usage: the usage chunk before [DONE]
    ignore_eos: bool = False  # vLLM/SGLang/Dynamo: generate exactly max_tokens
    want_worker_id: bool = False  # ask Dynamo for nvext.worker_id (nvext.extra_fields)
    extra_body: Mapping[str, Any] | None = None

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": self.messages}
        return _finish_body(body, self)


@dataclass(frozen=True, slots=True, kw_only=True)
class CompletionRequest:
    """One `/v1/completions` request; `prompt` is text or token ids."""

    path: ClassVar[str] = "/v1/completions"

    model: str
    prompt: str | Sequence[int]
    max_tokens: int | None = None
    stream: bool = True
    include_usage: bool = True
    ignore_eos: bool = False
    want_worker_id: bool = False
    extra_body: Mapping[str, Any] | None = None

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "prompt": self.prompt}
        return _finish_body(body, self)


InferenceRequest = ChatRequest | CompletionRequest


def _finish_body(body: dict[str, Any], request: InferenceRequest) -> dict[str, Any]:
    body["stream"] = request.stream
    if request.max_tokens is not None:
        body["max_tokens"] = request.max_tokens
    if request.stream and request.include_usage:
        body["stream_options"] = {"include_usage": True}
    # Non-standard keys go out only when asked: api.openai.com rejects unknown parameters.
    if request.ignore_eos:
        body["ignore_eos"] = True
    if request.want_worker_id:
        body["nvext"] = {"extra_fields": ["worker_id"]}
    if request.extra_body:
        body = merge_body(body, request.extra_body)
    return body


def merge_body(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """`extra` over `base`, copy-on-write; neither input is modified.

    Where both hold an object under the same key (`nvext`, `stream_options`) the two are
    merged one level deep, `extra` winning, and `extra_fields` lists are united, so a trace's
    own `nvext` keeps its keys when the client adds `session_control` or `extra_fields`.
    """
    merged = dict(base)
    for key, value in extra.items():
        current = merged.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            inner = {**current, **value}
            ours, theirs = current.get("extra_fields"), value.get("extra_fields")
            if isinstance(ours, list | tuple) and isinstance(theirs, list | tuple):
                inner["extra_fields"] = list(dict.fromkeys([*ours, *theirs]))
            merged[key] = inner
        else:
            merged[key] = value
    return merged


def _jsonable(value: object) -> object:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def encode_body(body: Mapping[str, Any]) -> bytes:
    """Compact UTF-8 JSON; read-only mappings and sequences from frozen traces are accepted."""
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False, default=_jsonable)
    return text.encode("utf-8")


# The C scanner behind json.loads, without its wrapper: about 3x faster per small chunk.
_raw_decode = json.JSONDecoder().raw_decode


def _decode(text: str) -> Any:
    try:
        value, end = _raw_decode(text)
    except ValueError:
        return json.loads(text)  # leading whitespace, or a real error with a proper message
    if end != len(text):
        return json.loads(text)  # trailing whitespace is fine; trailing garbage raises
    return value


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_message(obj: object) -> str | None:
    """The message of an error payload in any of the shapes servers use, else None."""
    if not isinstance(obj, dict):
        return None
    error = obj.get("error")
    if isinstance(error, dict):
        message = error.get("message") or error.get("type") or error.get("code")
        return _short(str(message)) if message else _short(json.dumps(error))
    if isinstance(error, str) and error:
        return _short(error)
    if obj.get("object") == "error":  # vLLM's older ErrorResponse
        return _short(str(obj.get("message") or obj))
    return None


def parse_worker_id(value: object) -> str | None:
    """Dynamo's `nvext.worker_id` (an id, or a dict of prefill/decode ids) as a worker key.

    The decode worker wins: it produced the tokens and, in aggregated serving, did the
    prefill too. Data-parallel ranks are not part of the key.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value or None
    if isinstance(value, dict):
        for key in ("decode_worker_id", "prefill_worker_id"):
            found = parse_worker_id(value.get(key))
            if found is not None:
                return found
    return None


class ResponseAccumulator:
    """What one answer said so far, fed event by event (streaming) or whole (non-streaming).

    `error` is set (and further input ignored) on an unparseable event, a non-OpenAI answer
    or an error payload. A token chunk is one carrying content, reasoning or tool-call
    deltas: a tool-call-only answer still streams tokens, so it must still get a TTFT.
    """

    __slots__ = (
        "_streamed",
        "_text",
        "cached_tokens",
        "chunk_times",
        "completion_tokens",
        "done",
        "error",
        "finish_reason",
        "first_token_s",
        "prompt_tokens",
        "recognized",
        "worker_id",
    )

    def __init__(self, *, capture_text: bool = False) -> None:
        self.first_token_s: float | None = None
        self.chunk_times: list[float] = []
        self.finish_reason: str | None = None
        self.completion_tokens: int | None = None
        self.prompt_tokens: int | None = None
        self.cached_tokens: int | None = None
        self.worker_id: str | None = None
        self.done = False  # [DONE] seen, or a whole body read
        self.recognized = False  # at least one OpenAI-shaped chunk or body
        self.error: str | None = None
        self._streamed = False
        self._text: list[str] | None = [] if capture_text else None

    @property
    def finished(self) -> bool:
        """The answer ended properly: [DONE], or a finish_reason from a server that omits it."""
        return self.done or self.finish_reason is not None

    @property
    def output_tokens(self) -> int | None:
        """From usage when reported; else counted token chunks (streaming only)."""
        if self.completion_tokens is not None:
            return self.completion_tokens
        return len(self.chunk_times) if self._streamed else None

    @property
    def text(self) -> str | None:
        return None if self._text is None else "".join(self._text)

    def on_event(self, event: SSEEvent, t: float) -> None:
        # The hot path: called for every chunk of every stream, so it is one flat function.
        if self.error is not None or self.done:
            return
        self._streamed = True
        data, name, _ = event
        if name != "message":
            if name == "error":
                try:
                    message = error_message(_decode(data))
                except ValueError:
                    message = None
                self.error = f"error event in stream: {message or _short(data)}"
            return  # other named events (Dynamo annotations) are not chunks
        if data == "[DONE]":
            self.done = True
            return
        try:
            obj = _decode(data)
        except ValueError:
            self.error = f"unparseable JSON in stream: {_short(data)}"
            return
        try:
            choices = obj.get("choices")
            if choices:
                self.recognized = True
                token = False
                for choice in choices:
                    delta = choice.get("delta")
                    if delta is not None:  # chat completions
                        content = delta.get("content")
                        if not content and (
                            delta.get("reasoning_content")
                            or delta.get("reasoning")
                            or delta.get("tool_calls")
                        ):
                            token = True
                    else:  # completions
                        content = choice.get("text")
                    if content:
                        token = True
                        if self._text is not None and choice.get("index", 0) == 0:
                            self._text.append(content)
                    finish = choice.get("finish_reason")
                    if finish:
                        self.finish_reason = finish
                if token:
                    if self.first_token_s is None:
                        self.first_token_s = t
                    self.chunk_times.append(t)
            elif choices is None:
                message = error_message(obj)
                if message is not None:  # vLLM: data: {"error": {...}} with HTTP 200
                    self.error = f"error in stream: {message}"
                    return
            usage = obj.get("usage")
            if usage:
                self.recognized = True
                self._usage(usage)
            nvext = obj.get("nvext")
            if nvext:
                worker = parse_worker_id(nvext.get("worker_id"))
                if worker is not None:
                    self.worker_id = worker
        except (AttributeError, TypeError):
            what = "is not a JSON object" if type(obj) is not dict else "has unexpected types"
            self.error = f"stream chunk {what}: {_short(data)}"

    def on_body(self, body: bytes, t: float) -> None:
        """A whole non-streaming answer, received at `t`."""
        if self.error is not None:
            return
        try:
            obj = json.loads(body)
        except ValueError:
            self.error = f"answer is not JSON: {_short(body.decode('utf-8', 'replace'))}"
            return
        message = error_message(obj)
        if message is not None:
            self.error = f"error in answer: {message}"
            return
        choices = obj.get("choices") if isinstance(obj, dict) else None
        if not isinstance(choices, list):
            self.error = "answer has no `choices`: not an OpenAI completion"
            return
        try:
            token = False
            for choice in choices:
                message_obj = choice.get("message")
                if message_obj is not None:
                    content = message_obj.get("content")
                    token = token or bool(
                        content
                        or message_obj.get("reasoning_content")
                        or message_obj.get("reasoning")
                        or message_obj.get("tool_calls")
                    )
                else:
                    content = choice.get("text")
                    token = token or bool(content)
                if content and self._text is not None and choice.get("index", 0) == 0:
                    self._text.append(content)
                if choice.get("finish_reason"):
                    self.finish_reason = choice["finish_reason"]
            if token:
                self.first_token_s = t
                self.chunk_times.append(t)
            if obj.get("usage"):
                self._usage(obj["usage"])
            nvext = obj.get("nvext")
            if nvext:
                self.worker_id = parse_worker_id(nvext.get("worker_id"))
        except (AttributeError, TypeError):
            self.error = "malformed answer: unexpected types under `choices`"
            return
        self.recognized = True
        self.done = True

    def _usage(self, usage: Any) -> None:
        if type(usage) is not dict:
            return
        completion = usage.get("completion_tokens")
        if type(completion) is int:
            self.completion_tokens = completion
        prompt = usage.get("prompt_tokens")
        if type(prompt) is int:
            self.prompt_tokens = prompt
        details = usage.get("prompt_tokens_details")
        if type(details) is dict:
            cached = details.get("cached_tokens")
            if type(cached) is int:
                self.cached_tokens = cached
