"""The bytes of the mock's answers: SSE chunks, non-streaming bodies, usage, `nvext`.

Owns the OpenAI wire shapes (chat-completion bodies, SSE chunks, the usage chunk) and Dynamo's
response `nvext.worker_id` (where it goes is real 1.6.1's, docs/dynamo-observed.md §b: after
`usage` in a whole body, on every streamed chunk that has `choices`, never on the usage chunk).
Chunks are spliced from per-request byte templates instead of json.dumps per chunk: a 64-token
stream is ~70 chunks, and dumping each was the largest cost of an answer. Pure: it never sends,
sleeps or decides when; `app.py` does.

The generated text is words from a fixed list, one word per token under the token contract
(`runner.trace.tokens`): the first token is "word", every later one " word", so any
concatenation of content deltas splits into exactly the tokens sent.
"""

from __future__ import annotations

import json

__all__ = ["Answer", "answer_text", "error_event", "usage_json", "worker_nvext"]

_WORDS = (
    "the", "model", "answers", "with", "plain", "words", "so", "every", "token", "is",
    "one", "word", "and", "counts", "stay", "exact",
)  # fmt: skip
_SPACED = tuple((" " + word).encode() for word in _WORDS)
# _pieces[i] is token i's text: the first word bare, every later one after a space. Shared
# by every answer; replaced (never modified) when a longer answer needs more.
_pieces: tuple[bytes, ...] = ()


def _pieces_upto(count: int) -> tuple[bytes, ...]:
    """Token texts 0..count-1 at least (callers slice the result)."""
    global _pieces
    pieces = _pieces
    if len(pieces) < count:
        # Built whole and then swapped in, so servers in other threads never see a half-built
        # table; doubling keeps rising lengths O(total).
        size = max(count, 2 * len(pieces), 1024)
        pieces = (_WORDS[0].encode(), *(_SPACED[i % len(_WORDS)] for i in range(1, size)))
        _pieces = pieces
    return pieces


def answer_text(start: int, end: int) -> bytes:
    """The text of tokens start..end-1, as UTF-8 (ASCII, JSON-safe as is)."""
    return b"".join(_pieces_upto(end)[start:end])


def usage_json(prompt_tokens: int, completion_tokens: int, cached_tokens: int) -> bytes:
    return (
        b'{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,'
        % (
            prompt_tokens,
            completion_tokens,
            prompt_tokens + completion_tokens,
        )
        + b'"prompt_tokens_details":{"cached_tokens":%d}}' % cached_tokens
    )


def worker_nvext(worker_id: int, dp_rank: int) -> bytes:
    """Dynamo's `"nvext":{"worker_id":{...}}` member; aggregated serving: prefill = decode.

    The shape is real 1.6.1's; the ids are the mock's worker indices 0..N-1, where a real
    Dynamo names workers by random 64-bit instance ids (clients renumber those)."""
    return (
        b'"nvext":{"worker_id":{"prefill_worker_id":%d,"prefill_dp_rank":%d,'
        b'"decode_worker_id":%d,"decode_dp_rank":%d}}' % (worker_id, dp_rank, worker_id, dp_rank)
    )


def error_event(message: str, status: int) -> bytes:
    """A mid-stream error the way vLLM sends one: `data: {"error": {...}}`, then [DONE]."""
    error = {"message": message, "type": "server_error", "param": None, "code": status}
    return b"data: " + json.dumps({"error": error}).encode() + b"\n\ndata: [DONE]\n\n"


class Answer:
    """One answer's templates; every method returns finished bytes for the wire."""

    __slots__ = (
        "_chat",
        "_chunk_end",
        "_envelope",
        "_include_usage",
        "_nvext",
        "_tail_open",
        "_token_open",
        "_whole_envelope",
    )

    def __init__(
        self,
        *,
        chat: bool,
        response_id: str,
        created: int,
        model: str,
        include_usage: bool,
        nvext: bytes | None,  # worker_nvext(...) when the request asked for it
    ) -> None:
        self._chat = chat
        self._include_usage = include_usage
        self._nvext = nvext
        # Everything before "choices": the same in every chunk of this answer.
        head = b'{"id":"%s","object":"' % response_id.encode()
        rest = b'","created":%d,"model":' % created + json.dumps(model).encode() + b","
        self._envelope = head + (b"chat.completion.chunk" if chat else b"text_completion") + rest
        self._whole_envelope = head + (b"chat.completion" if chat else b"text_completion") + rest
        self._token_open = (
            b"data: "
            + self._envelope
            + (
                b'"choices":[{"index":0,"delta":{"content":"'
                if chat
                else b'"choices":[{"index":0,"text":"'
            )
        )
        close = b'"},' if chat else b'",'
        # What closes a chunk that has choices: usage null when usage comes last, and nvext.
        self._chunk_end = (
            (b',"usage":null' if include_usage else b"")
            + (b"," + nvext if nvext is not None else b"")
            + b"}\n\n"
        )
        self._tail_open = close + b'"logprobs":null,"finish_reason":null}]' + self._chunk_end

    def head(self) -> bytes:
        """What goes before the first token: chat's role chunk; for completions only a chunk
        carrying `nvext` when asked, so that a stream cut short before its first token still
        says which worker served it."""
        if self._chat:
            choice = b'"choices":[{"index":0,"delta":{"role":"assistant","content":""},'
        elif self._nvext is not None:
            choice = b'"choices":[{"index":0,"text":"",'
        else:
            return b""
        return (
            b"data: "
            + self._envelope
            + choice
            + b'"logprobs":null,"finish_reason":null}]'
            + self._chunk_end
        )

    def token_events(self, start: int, end: int) -> bytes:
        """Tokens start..end-1, one SSE event each (one write carries them all)."""
        if start >= end:
            return b""
        joint = self._tail_open + self._token_open
        return self._token_open + joint.join(_pieces_upto(end)[start:end]) + self._tail_open

    def token_event(self, start: int, end: int) -> bytes:
        """Tokens start..end-1 coalesced into one SSE event (a stream running late)."""
        if start >= end:
            return b""
        return self._token_open + answer_text(start, end) + self._tail_open

    def tail(self, finish_reason: str, usage: bytes) -> bytes:
        """The finish chunk, the usage chunk when asked (`"choices": []`), then [DONE]."""
        if self._chat:
            choice = b'"choices":[{"index":0,"delta":{},'
        else:
            choice = b'"choices":[{"index":0,"text":"",'
        finish = (
            b"data: "
            + self._envelope
            + choice
            + b'"logprobs":null,"finish_reason":"%s"}]' % finish_reason.encode()
            + self._chunk_end
        )
        if self._include_usage:
            finish += b"data: " + self._envelope + b'"choices":[],"usage":' + usage + b"}\n\n"
        return finish + b"data: [DONE]\n\n"

    def whole(self, output_tokens: int, finish_reason: str, usage: bytes) -> bytes:
        """The non-streaming body: one JSON object with the whole text and usage."""
        text = answer_text(0, output_tokens)
        if self._chat:
            choice = b'"choices":[{"index":0,"message":{"role":"assistant","content":"%s"},' % text
        else:
            choice = b'"choices":[{"index":0,"text":"%s",' % text
        nvext = b"," + self._nvext if self._nvext is not None else b""
        return (
            self._whole_envelope
            + choice
            + b'"logprobs":null,"finish_reason":"%s"}],' % finish_reason.encode()
            + b'"usage":'
            + usage
            + nvext
            + b"}"
        )
