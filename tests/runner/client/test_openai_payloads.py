"""Request bodies and the reading of answers, without sockets."""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

import pytest

from runner.client.answers import ResponseAccumulator, parse_worker_id
from runner.client.openai import ChatRequest, CompletionRequest, encode_body, merge_body
from runner.client.sse import SSEEvent

MESSAGES = [{"role": "user", "content": "hi"}]


def chunk(**fields: Any) -> SSEEvent:
    return SSEEvent(json.dumps(fields))


def delta(content: str | None = None, finish: str | None = None, **extra: Any) -> SSEEvent:
    d: dict[str, Any] = dict(extra)
    if content is not None:
        d["content"] = content
    return chunk(choices=[{"index": 0, "delta": d, "finish_reason": finish}])


def feed(*events: SSEEvent, capture_text: bool = False) -> ResponseAccumulator:
    acc = ResponseAccumulator(capture_text=capture_text)
    for t, event in enumerate(events, start=1):
        acc.on_event(event, float(t))
    return acc


# -- request bodies --


def test_a_streaming_chat_body_asks_for_usage() -> None:
    body = ChatRequest(model="m", messages=MESSAGES, max_tokens=64).body()
    assert body == {
        "model": "m",
        "messages": MESSAGES,
        "stream": True,
        "max_tokens": 64,
        "stream_options": {"include_usage": True},
    }


def test_a_non_streaming_body_has_no_stream_options_and_no_unasked_keys() -> None:
    body = CompletionRequest(model="m", prompt="p", stream=False).body()
    assert body == {"model": "m", "prompt": "p", "stream": False}


def test_ignore_eos_and_worker_id_are_sent_only_when_asked() -> None:
    body = ChatRequest(model="m", messages=MESSAGES, ignore_eos=True, want_worker_id=True).body()
    assert body["ignore_eos"] is True
    assert body["nvext"] == {"extra_fields": ["worker_id"]}


def test_extra_body_nvext_merges_with_the_worker_id_request_without_mutation() -> None:
    trace_nvext = {"nvext": {"extra_fields": ["timing"], "agent_hints": {"priority": 1}}}
    affinity = {"session_control": {"session_id": "s", "action": "bind", "timeout": 300}}
    extra = merge_body(trace_nvext, {"nvext": affinity, "temperature": 0})
    body = ChatRequest(model="m", messages=MESSAGES, want_worker_id=True, extra_body=extra).body()
    assert body["nvext"] == {
        "extra_fields": ["worker_id", "timing"],
        "agent_hints": {"priority": 1},
        "session_control": {"session_id": "s", "action": "bind", "timeout": 300},
    }
    assert body["temperature"] == 0
    assert trace_nvext == {"nvext": {"extra_fields": ["timing"], "agent_hints": {"priority": 1}}}


def test_extra_body_can_override_built_keys() -> None:
    body = ChatRequest(model="m", messages=MESSAGES, extra_body={"max_tokens": 5}).body()
    assert body["max_tokens"] == 5


def test_frozen_read_only_messages_encode_as_json() -> None:
    messages = (MappingProxyType({"role": "user", "content": "é"}),)
    encoded = encode_body(ChatRequest(model="m", messages=messages).body())
    assert json.loads(encoded)["messages"] == [{"role": "user", "content": "é"}]
    assert "é".encode() in encoded  # UTF-8, not \\u escapes


def test_token_id_prompts_encode_as_lists() -> None:
    encoded = encode_body(CompletionRequest(model="m", prompt=(1, 2, 3)).body())
    assert json.loads(encoded)["prompt"] == [1, 2, 3]


# -- streamed chunks --


def test_content_chunks_set_first_token_and_chunk_times() -> None:
    acc = feed(
        delta("", role="assistant"),
        delta("a"),
        delta("b", finish="stop"),
        SSEEvent("[DONE]"),
        capture_text=True,
    )
    assert acc.first_token_s == 2.0
    assert acc.chunk_times == [2.0, 3.0]
    assert acc.finish_reason == "stop" and acc.done and acc.finished
    assert acc.output_tokens == 2  # no usage: counted chunks
    assert acc.text == "ab"


def test_reasoning_and_tool_call_deltas_count_as_tokens() -> None:
    acc = feed(
        delta(reasoning_content="hmm"),
        delta(reasoning="also"),
        delta(tool_calls=[{"index": 0, "function": {"arguments": "{}"}}]),
    )
    assert acc.first_token_s == 1.0 and len(acc.chunk_times) == 3


def test_completions_chunks_carry_text() -> None:
    acc = feed(chunk(choices=[{"index": 0, "text": "x", "finish_reason": "length"}]))
    assert acc.chunk_times == [1.0] and acc.finish_reason == "length"


def test_the_usage_chunk_with_no_choices_sets_token_counts_and_cached_tokens() -> None:
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 64,
        "prompt_tokens_details": {"cached_tokens": 96},
    }
    acc = feed(delta("a"), chunk(choices=[], usage=usage), SSEEvent("[DONE]"))
    assert (acc.prompt_tokens, acc.completion_tokens, acc.cached_tokens) == (100, 64, 96)
    assert acc.output_tokens == 64


def test_cached_tokens_stay_unknown_when_not_reported() -> None:
    acc = feed(chunk(choices=[], usage={"prompt_tokens": 3, "prompt_tokens_details": None}))
    assert acc.cached_tokens is None and acc.prompt_tokens == 3


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"prefill_worker_id": 1, "decode_worker_id": 2, "decode_dp_rank": 0}, "2"),
        ({"prefill_worker_id": 5}, "5"),
        (7, "7"),
        ("w-3", "w-3"),
        (None, None),
        (True, None),
        ({}, None),
    ],
)
def test_worker_ids_come_from_dynamo_nvext_in_any_shape(value: Any, expected: str | None) -> None:
    assert parse_worker_id(value) == expected
    acc = feed(chunk(choices=[], nvext={"worker_id": value}))
    assert acc.worker_id == expected


def test_a_mid_stream_error_payload_is_an_error() -> None:
    acc = feed(delta("a"), chunk(error={"message": "KV cache exhausted", "code": 500}))
    assert acc.error == "error in stream: KV cache exhausted"
    acc.on_event(SSEEvent("[DONE]"), 9.0)
    assert not acc.done  # nothing after an error counts


def test_an_error_event_is_an_error() -> None:
    acc = feed(SSEEvent('{"message":"overloaded"}', "error"))
    assert acc.error is not None and "overloaded" in acc.error


def test_other_named_events_are_annotations_not_chunks() -> None:
    acc = feed(SSEEvent("worker_instance_id: 3", "annotation"), delta("a"))
    assert acc.error is None and acc.chunk_times == [2.0]


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ("{not json", "unparseable JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"choices": [{"delta": "oops"}]}', "unexpected types"),
    ],
)
def test_garbage_chunks_are_errors(data: str, words: str) -> None:
    acc = feed(SSEEvent(data))
    assert acc.error is not None and words in acc.error


def test_unknown_json_objects_are_tolerated_but_not_recognized() -> None:
    acc = feed(chunk(type="ping"))
    assert acc.error is None and not acc.recognized


# -- whole bodies --


def test_a_chat_body_gives_usage_text_and_worker() -> None:
    body = {
        "choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
        "nvext": {"worker_id": {"decode_worker_id": 4}},
    }
    acc = ResponseAccumulator(capture_text=True)
    acc.on_body(json.dumps(body).encode(), 5.0)
    assert acc.done and acc.error is None
    assert (acc.first_token_s, acc.chunk_times, acc.text) == (5.0, [5.0], "hi")
    assert (acc.output_tokens, acc.worker_id, acc.finish_reason) == (1, "4", "stop")


def test_a_body_without_usage_has_unknown_output_tokens() -> None:
    acc = ResponseAccumulator()
    acc.on_body(b'{"choices":[{"text":"x","finish_reason":"length"}]}', 1.0)
    assert acc.output_tokens is None and acc.done


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"<html>nope</html>", "not JSON"),
        (b'{"models": []}', "no `choices`"),
        (b'{"error": "model not loaded"}', "model not loaded"),
        (b'{"choices": [7]}', "malformed"),
    ],
)
def test_non_openai_bodies_are_errors(body: bytes, words: str) -> None:
    acc = ResponseAccumulator()
    acc.on_body(body, 1.0)
    assert acc.error is not None and words in acc.error
