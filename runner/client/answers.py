"""The OpenAI-compatible wire format, inbound: what an answer means, no I/O.

Owns what a streamed chunk or a whole response body says (tokens, reasoning, tool calls,
finish reason, usage, cached tokens, Dynamo's `nvext.worker_id`, error payloads), with a
template fast path for plain content chunks. It never opens sockets or reads clocks: times
are handed in by `http.py`, which owns the exchange.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from runner.client.sse import SSEEvent

__all__ = ["ResponseAccumulator", "error_message", "parse_worker_id"]


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


# A JSON string body that needs no decoding has no quote, backslash or control character: its
# bytes are its value. (Searching for a bad byte is twice as fast as matching good ones.)
_UNPLAIN_BYTE = re.compile(rb'[\x00-\x1f"\\]').search
_UNPLAIN_CHAR = re.compile(r'[\x00-\x1f"\\]').search
# Stands in for the content while a template is checked. It has an escape, so it can only
# parse as the inside of a string: see `ResponseAccumulator._learn`.
_PROBE_LITERAL = '"\\u0001"'
_PROBE_VALUE = "\x01"
# Template-learning attempts per stream: bounds the cost for a stream whose chunks never repeat.
_LEARN_ATTEMPTS = 4


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

    Streams are best fed a read at a time (`on_events`): most chunks of a stream differ only
    in their content string, so after decoding one such chunk the accumulator keeps its bytes
    before and after the content as a template, and a later chunk that is the same bytes
    around a new escape-free content counts without any JSON decoding. Anything else (an
    escape, another key or value, a finish reason, usage, an error) takes the full decoder.
    """

    __slots__ = (
        "_capture",
        "_learn_attempts",
        "_prefix",
        "_streamed",
        "_suffix",
        "_template_worker",
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
        # The chunk template (see the class docstring): None until one is learned.
        self._prefix: bytes | None = None  # the chunk's bytes up to its content's opening quote
        self._suffix = b""  # from the content's closing quote to the end
        self._capture: list[str] | None = None  # `_text` when the template's content is kept
        self._template_worker: str | None = None  # the worker id the template's chunk names
        self._learn_attempts = _LEARN_ATTEMPTS

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

    def on_events(self, events: Sequence[bytes | SSEEvent], t: float) -> None:
        """The events of one read, received at `t`, as `SSEParser.feed_raw` returns them.

        The same as `on_event` for each in turn; a bytes item is the data of a one-line
        `message` event. The hot path: most chunks of most streams end in `continue` below.
        """
        times = self.chunk_times
        prefix = self._prefix
        suffix = self._suffix
        start = 0 if prefix is None else len(prefix)
        shortest = start + len(suffix)  # a template match also needs a non-empty content
        capture = self._capture
        for item in events:
            if self.error is not None or self.done:
                return
            if isinstance(item, bytes):
                if (
                    prefix is not None
                    and len(item) > shortest
                    and item.startswith(prefix)
                    and item.endswith(suffix)
                ):
                    content = item[start : len(item) - len(suffix)]
                    if _UNPLAIN_BYTE(content) is None:
                        # `on_event` would do exactly this for the chunk: see `_learn`.
                        times.append(t)
                        if capture is not None:
                            capture.append(content.decode("utf-8", "replace"))
                        if self._template_worker is not None:
                            self.worker_id = self._template_worker
                        continue
                data = item.decode("utf-8", "replace")
                obj = self._on_message(data, t)
                if obj is not None and self._learn_attempts > 0:  # a chunk, and no error
                    self._learn(data, obj)
                    prefix = self._prefix
                    suffix = self._suffix
                    start = 0 if prefix is None else len(prefix)
                    shortest = start + len(suffix)
                    capture = self._capture
            else:
                self.on_event(item, t)

    def on_event(self, event: SSEEvent, t: float) -> None:
        if self.error is not None or self.done:
            return
        data, name, _ = event
        if name == "message":
            self._on_message(data, t)
            return
        self._streamed = True
        if name == "error":
            try:
                message = error_message(_decode(data))
            except ValueError:
                message = None
            self.error = f"error event in stream: {message or _short(data)}"
        # other named events (Dynamo annotations) are not chunks

    def _on_message(self, data: str, t: float) -> Any:
        """One `message` event's data; returns the chunk it decoded to, else None."""
        # Called for every chunk the template does not cover, so it is one flat function.
        self._streamed = True
        if data == "[DONE]":
            self.done = True
            return None
        try:
            obj = _decode(data)
        except ValueError:
            self.error = f"unparseable JSON in stream: {_short(data)}"
            return None
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
                    return None
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
            return None
        return obj

    def _learn(self, data: str, obj: Any) -> None:
        """Keep `data`, just counted by `_on_message`, as the template if it qualifies.

        It must be one choice with a non-empty content (or completions `text`) and no
        finish reason or usage: then `_on_message` does the same for any other such content,
        namely count a token chunk, keep the text if it keeps choice 0's, and set the worker
        id if `nvext` names one. The content must appear as a plain string literal, and is
        found by swapping it for an escaped probe that must parse back as the same chunk with
        the probe for content. The probe's escape is legal only inside a string, so its
        opening quote opens a string, it is one string token, and the bytes around it lex the
        same for any content with no quote, backslash or control character: those bytes are
        the template, and a chunk that matches them parses to this one with its own content.
        """
        if type(obj) is not dict:
            return
        choices = obj.get("choices")
        if type(choices) is not list or len(choices) != 1:
            return
        choice = choices[0]
        if type(choice) is not dict or choice.get("finish_reason") or obj.get("usage"):
            return
        delta = choice.get("delta")
        if delta is None:
            holder, key = choice, "text"
        elif type(delta) is dict:
            holder, key = delta, "content"
        else:
            return
        content = holder.get(key)
        # Non-empty: an empty content is not a token, and reasoning or tool calls may be.
        if type(content) is not str or not content or _UNPLAIN_CHAR(content) is not None:
            return
        self._learn_attempts -= 1
        literal = f'"{content}"'
        at = data.rfind(literal)
        if at < 0:  # written with escapes after all
            return
        probed = {**holder, key: _PROBE_VALUE}
        if delta is not None:
            probed = {**choice, "delta": probed}
        expected = {**obj, "choices": [probed]}
        try:
            if _decode(data[:at] + _PROBE_LITERAL + data[at + len(literal) :]) != expected:
                return
        except ValueError:
            return
        nvext = obj.get("nvext")
        self._prefix = data[: at + 1].encode("utf-8")
        self._suffix = data[at + len(literal) - 1 :].encode("utf-8")
        keep = self._text is not None and choice.get("index", 0) == 0
        self._capture = self._text if keep else None
        self._template_worker = parse_worker_id(nvext.get("worker_id")) if nvext else None

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
