"""The OpenAI-compatible wire format, outbound: request bodies, no I/O.

Owns what a chat-completions or completions body contains (messages or prompt, streaming and
usage options, `extra_body` merged copy-on-write) and its compact encoding. What answers mean
is `answers.py`'s; the exchange itself is `http.py`'s.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = [
    "ChatRequest",
    "CompletionRequest",
    "EncodedRequest",
    "InferenceRequest",
    "JsonSafeText",
    "encode_body",
    "merge_body",
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

    def encoded(self) -> bytes:
        return encode_body(self.body())


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

    def encoded(self) -> bytes:
        return encode_body(self.body())


@dataclass(frozen=True, slots=True)
class EncodedRequest:
    """A request whose body was built and encoded before the send (by the in-process sender's
    builder, or by a client-worker host from the credit it was sent: runner/fleet)."""

    path: str
    content: bytes
    stream: bool = True

    def encoded(self) -> bytes:
        return self.content


InferenceRequest = ChatRequest | CompletionRequest | EncodedRequest


def _finish_body(body: dict[str, Any], request: ChatRequest | CompletionRequest) -> dict[str, Any]:
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


class JsonSafeText(str):
    """Text that JSON-encodes as itself: no quote, backslash or control character (what a
    synthesized prompt is made of: pool words and an instance marker). `encode_body` puts it
    in the body as it is instead of scanning it to escape nothing: a long prompt's encoding
    was most of a request's build (trace_0282's 460 KB prompts: 1.9 ms, against 0.04). Text
    made from it by slicing or joining is plain text again, and escaped as usual."""

    __slots__ = ()


# A message content or prompt that is JsonSafeText goes through json.dumps as a placeholder,
# then the text is spliced into the placeholder's place: one short scan of the encoded body.
# The nonce keeps a body's own text from ever reading as a placeholder.
_SPLICE = "\ue000" + secrets.token_hex(8) + ":"
_SPLICED = re.compile(re.escape(_SPLICE) + r"(\d+)\ue000")


def encode_body(body: Mapping[str, Any]) -> bytes:
    """Compact UTF-8 JSON; read-only mappings and sequences from frozen traces are accepted.
    Message contents and prompts that are JsonSafeText are spliced in as they are."""
    spliced: list[str] = []
    body = _placeheld(body, spliced)
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False, default=_jsonable)
    if spliced:
        text = _SPLICED.sub(lambda match: spliced[int(match[1])], text)
    return text.encode("utf-8")


def _placeheld(body: Mapping[str, Any], spliced: list[str]) -> Mapping[str, Any]:
    """`body` with each JsonSafeText message content (and prompt) swapped for a placeholder,
    the texts in `spliced` in placeholder order; the body itself as it was when there is none
    (copies only what changes)."""

    def hold(text: str) -> str:
        spliced.append(text)
        return f"{_SPLICE}{len(spliced) - 1}\ue000"

    swapped: dict[str, Any] | None = None
    messages = body.get("messages")
    if isinstance(messages, list | tuple):
        held = [
            {**m, "content": hold(m["content"])}
            if isinstance(m, Mapping) and type(m.get("content")) is JsonSafeText
            else m
            for m in messages
        ]
        if spliced:
            swapped = {**body, "messages": held}
    if type(body.get("prompt")) is JsonSafeText:
        swapped = {**(swapped or body), "prompt": hold(body["prompt"])}
    return body if swapped is None else swapped
