"""Streaming answers over real sockets: exact SSE framing, usage, token counts, timing."""

from __future__ import annotations

import time
from typing import Any

from runner.trace.tokens import count_message_tokens, count_tokens
from tests.runner.mockserver.conftest import (
    MODEL,
    MockFactory,
    chat_body,
    json_chunks,
    sse_events,
    words,
)


def test_stream_is_role_chunk_one_word_per_token_finish_usage_then_done(mock: MockFactory) -> None:
    server = mock()
    response, raw = server.stream_raw(chat_body(words(100), max_tokens=5, ignore_eos=True))

    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    chunks = json_chunks(raw)
    assert [c["object"] for c in chunks] == ["chat.completion.chunk"] * 8
    assert len({c["id"] for c in chunks}) == 1
    assert all(c["model"] == MODEL for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    contents = [c["choices"][0]["delta"]["content"] for c in chunks[1:6]]
    assert all(count_tokens(text) == 1 for text in contents)
    assert count_tokens("".join(contents)) == 5
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:6])
    assert chunks[6]["choices"][0]["delta"] == {}
    assert chunks[6]["choices"][0]["finish_reason"] == "length"
    # include_usage: every earlier chunk carries "usage": null, the last has no choices.
    assert all(c["usage"] is None for c in chunks[:7])
    assert chunks[7]["choices"] == []
    assert chunks[7]["usage"] == {
        "prompt_tokens": 100,
        "completion_tokens": 5,
        "total_tokens": 105,
        "prompt_tokens_details": {"cached_tokens": 0},
    }


def test_stream_without_include_usage_has_no_usage_chunk_or_field(mock: MockFactory) -> None:
    server = mock()
    body = chat_body(words(10), max_tokens=3)
    del body["stream_options"]
    _, raw = server.stream_raw(body)

    chunks = json_chunks(raw)
    assert len(chunks) == 5  # role, 3 tokens, finish
    assert all("usage" not in c for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_usage_counts_follow_the_shared_token_contract(mock: MockFactory) -> None:
    server = mock()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are\ta  helpful\n\nassistant."},
        {"role": "user", "content": [{"type": "text", "text": "two words"}, {"type": "image"}]},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "user", "content": "  and   three more  "},
    ]
    body = {**chat_body(""), "messages": messages, "max_tokens": 7}
    _, raw = server.stream_raw(body)

    chunks = json_chunks(raw)
    usage = chunks[-1]["usage"]
    assert usage["prompt_tokens"] == count_message_tokens(messages) == 10
    assert usage["completion_tokens"] == 7
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1])
    assert count_tokens(text) == 7


def test_completions_route_streams_text_chunks_with_usage(mock: MockFactory) -> None:
    server = mock()
    prompt = "a prompt of  six\nwords here"
    body = {
        "model": MODEL,
        "prompt": prompt,
        "max_tokens": 4,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    response, raw = server.stream_raw(body, "/v1/completions")

    assert response.status_code == 200
    chunks = json_chunks(raw)
    assert [c["object"] for c in chunks] == ["text_completion"] * 6
    assert count_tokens("".join(c["choices"][0]["text"] for c in chunks[:4])) == 4
    assert chunks[4]["choices"][0]["finish_reason"] == "length"
    assert chunks[5]["usage"]["prompt_tokens"] == count_tokens(prompt) == 6


def test_request_without_max_tokens_gets_the_default_length_and_stop(mock: MockFactory) -> None:
    server = mock()
    _, raw = server.stream_raw(chat_body("hello"))

    chunks = json_chunks(raw)
    assert chunks[-1]["usage"]["completion_tokens"] == 16
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"


def test_timed_stream_spreads_tokens_over_the_planned_time(mock: MockFactory) -> None:
    # time_scale 1: prefill of 100 tokens ≈ 18 ms, then one token per ≥ 5.7 ms.
    server = mock(time_scale=1.0)
    arrivals: list[float] = []
    received = b""
    started = time.perf_counter()
    with server.client.stream(
        "POST", "/v1/chat/completions", json=chat_body(words(100), max_tokens=40)
    ) as response:
        assert response.headers["transfer-encoding"] == "chunked"
        for piece in response.iter_raw():
            arrivals.append(time.perf_counter() - started)
            received += piece

    chunks = json_chunks(received)
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert count_tokens(text) == 40  # late tokens may share a chunk, none is lost
    assert arrivals[-1] >= 0.018 + 39 * 0.0057 * 0.9
    assert len(arrivals) > 5  # it streamed, not one burst at the end


def test_zero_latency_stream_is_one_framed_body(mock: MockFactory) -> None:
    server = mock(time_scale=0.0)
    response, raw = server.stream_raw(chat_body(words(20), max_tokens=64))

    assert int(response.headers["content-length"]) == len(raw)
    payloads = sse_events(raw)
    assert len(payloads) == 1 + 64 + 2 + 1  # role, tokens, finish, usage, [DONE]
