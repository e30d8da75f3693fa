"""The chunk template fast path reads streams exactly as the full JSON decoder does.

Every stream here goes through two readers with the same read boundaries and times: the
reference (`SSEParser.feed` then `ResponseAccumulator.on_event` per event, which always
decodes JSON) and the client's (`feed_raw` then `on_events`, which skips decoding for chunks
matching a learned template). Their accumulators and, over a socket, their ResponseResults
must agree on everything.
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import TYPE_CHECKING, Any

import pytest

import runner.client.answers as answers_module
from runner.client import ChatRequest, InferenceClient, ResponseResult, Timeouts
from runner.client.answers import ResponseAccumulator
from runner.client.sse import SSEParser

if TYPE_CHECKING:
    from .conftest import Received, Reply, Wire

HEAD = b'{"id":"chatcmpl-7","object":"chat.completion.chunk","created":1700000000,"model":"m",'


def chat(content: bytes = b'"x"', finish: bytes = b"null", delta_extra: bytes = b"") -> bytes:
    """A chat chunk's data, byte for byte; `content` is the JSON literal (or b"" for none)."""
    fields = b'"content":' + content if content else b""
    if delta_extra:
        fields = delta_extra + (b"," + fields if fields else b"")
    return (
        HEAD
        + b'"choices":[{"index":0,"delta":{'
        + fields
        + b'},"logprobs":null,"finish_reason":'
        + finish
        + b"}]}"
    )


def plain(*words: str) -> list[bytes]:
    return [chat(json.dumps(word).encode()) for word in words]


ROLE = chat(b'""', delta_extra=b'"role":"assistant"')
USAGE = HEAD + b'"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14}}'
DONE = b"[DONE]"
WORDS = plain("the", " and", " to", " of", " a", " my")

# Each stream is a list of data payloads (bytes) or raw SSE text (str, sent as is).
CORPUS: dict[str, list[bytes | str]] = {
    "plain": [ROLE, *WORDS, chat(b'" end"', b'"length"'), USAGE, DONE],
    "escaped quotes and backslashes": [
        *WORDS[:2],
        chat(b'"say \\"hi\\""'),
        chat(b'"a\\\\b"'),
        chat(b'"line\\nbreak"'),
        chat(b'"\\/slash"'),
        *WORDS[2:],
        DONE,
    ],
    "unicode escapes and raw utf-8": [
        *WORDS[:2],
        chat(b'"caf\\u00e9"'),
        chat('"café ☃"'.encode()),
        chat(b'"\\ud83d\\ude00"'),
        chat('"😀"'.encode()),
        chat(b'"\\u0061"'),
        *WORDS[2:],
        DONE,
    ],
    "invalid utf-8 in content": [
        *WORDS[:2],
        chat(b'"\xff"'),
        chat(b'"ab\xe2\x82"'),
        chat(b'"\xc3"'),
        chat(b'"\xed\xa0\x80x"'),
        *WORDS[2:],
        DONE,
    ],
    "invalid utf-8 elsewhere": [
        chat(b'"a"').replace(b'"m"', b'"m\xff"'),
        chat(b'"b"').replace(b'"m"', b'"m\xff"'),
        chat(b'"c"').replace(b'"m"', b'"m\xff"'),
        DONE,
    ],
    "empty, null and missing content": [
        *WORDS[:2],
        chat(b'""'),
        chat(b"null"),
        chat(b""),
        *WORDS[2:],
        DONE,
    ],
    "reasoning content": [
        ROLE,
        chat(b"null", delta_extra=b'"reasoning_content":"think"'),
        chat(b'""', delta_extra=b'"reasoning_content":"more"'),
        chat(b"", delta_extra=b'"reasoning":"r"'),
        *WORDS,
        chat(b'"x"', delta_extra=b'"reasoning_content":"both"'),
        DONE,
    ],
    "tool calls": [
        ROLE,
        chat(
            b"null",
            delta_extra=b'"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":""}}]',
        ),
        chat(
            b"null", delta_extra=b'"tool_calls":[{"index":0,"function":{"arguments":"{\\"a\\""}}]'
        ),
        chat(b"null", b'"tool_calls"', delta_extra=b'"tool_calls":[]'),
        USAGE,
        DONE,
    ],
    "usage on every chunk": [
        HEAD
        + (
            b'"choices":[{"index":0,"delta":{"content":"w%d"},"finish_reason":null}],'
            b'"usage":{"prompt_tokens":5,"completion_tokens":%d}}'
        )
        % (n, n)
        for n in range(1, 6)
    ]
    + [DONE],
    "null usage on every chunk": [
        HEAD
        + b'"choices":[{"index":0,"delta":{"content":"w%d"},"finish_reason":null}],"usage":null}'
        % (n,)
        for n in range(6)
    ]
    + [DONE],
    "mid-stream error": [*WORDS[:3], b'{"error":{"message":"KV cache exhausted"}}', *WORDS, DONE],
    "error event": [*WORDS[:3], 'event: error\ndata: {"message":"overloaded"}\n\n', *WORDS],
    "finish reasons": [*WORDS[:3], chat(b'"y"', b'"stop"'), *WORDS[3:], DONE],
    "finish on an empty content": [*WORDS, chat(b'""', b'"length"')],
    "empty finish reason": [*WORDS, chat(b'"y"', b'""'), *WORDS],
    "content filter then more": [*WORDS[:2], chat(b'"z"', b'"content_filter"'), *WORDS[2:]],
    "no done, no finish": list(WORDS),
    "completions": [
        b'{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"%s",'
        b'"logprobs":null,"finish_reason":null}]}' % word
        for word in (b"a", b"b", b"c", b"", b"d", b'\\"e\\"', b"f")
    ]
    + [b'{"id":"cmpl-1","choices":[{"index":0,"text":"g","finish_reason":"length"}]}', DONE],
    "completions with a null delta": [
        b'{"choices":[{"index":0,"delta":null,"text":"t%d"}]}' % n for n in range(5)
    ]
    + [DONE],
    "dynamo worker on every chunk": [
        HEAD
        + (
            b'"choices":[{"index":0,"delta":{"content":"w%d"}}],'
            b'"nvext":{"worker_id":{"prefill_worker_id":1,"decode_worker_id":%d}}}'
        )
        % (n, n // 3)
        for n in range(8)
    ]
    + [DONE],
    "worker once then plain": [
        HEAD + b'"choices":[{"index":0,"delta":{"content":"w"}}],"nvext":{"worker_id":7}}',
        HEAD + b'"choices":[{"index":0,"delta":{"content":"v"}}],"nvext":{"worker_id":7}}',
        *WORDS,
        HEAD + b'"choices":[{"index":0,"delta":{"content":"u"}}],"nvext":{"worker_id":7}}',
        HEAD + b'"choices":[],"nvext":{"worker_id":8}}',
        HEAD + b'"choices":[{"index":0,"delta":{"content":"s"}}],"nvext":{"worker_id":7}}',
        DONE,
    ],
    "the content's text again after it": [
        b'{"choices":[{"delta":{"content":"a"}}],"fp":"%s"}' % fp for fp in (b"a", b"b", b"c")
    ]
    + [b'{"choices":[{"delta":{"content":"\\u0061"}}],"fp":"%s"}' % fp for fp in (b"a", b"b")]
    + [DONE],
    "an escaped duplicate content wins": [
        chat(b'"b","content":"\\u0062"'),
        chat(b'"z","content":"\\u0062"'),
        chat(b'"y","content":"\\u0062"'),
        DONE,
    ],
    "shape changes mid-stream": [
        *WORDS[:3],
        *(word.replace(b"chatcmpl-7", b"chatcmpl-8") for word in WORDS),
        *(word.replace(b'"created":1700000000', b'"created":1700000001') for word in WORDS),
        *WORDS,
        DONE,
    ],
    "every chunk different": [
        chat(b'"w"').replace(b"1700000000", str(1700000000 + n).encode()) for n in range(12)
    ]
    + [DONE],
    "duplicate keys": [
        *WORDS[:2],
        chat(b'"a","content":"b"'),
        chat(b'"a"', delta_extra=b'"content":"c"'),
        HEAD + b'"choices":[{"index":0,"delta":{"content":"a"}}],"choices":[]}',
        HEAD + b'"choices":[],"choices":[{"index":0,"delta":{"content":"a"}}]}',
        *WORDS[2:],
        DONE,
    ],
    "content text elsewhere in the chunk": [
        chat(b'"m"'),
        chat(b'"m"'),
        chat(b'"chatcmpl-7"'),
        chat(b'"n"'),
        DONE,
    ],
    "spaced json and leading space": [
        json.dumps({"choices": [{"index": 0, "delta": {"content": w}}]}).encode()
        for w in ("a", "b", " c", "d")
    ]
    + [b'  {"choices": [{"delta": {"content": "e"}}]}', b'{"choices":[{"delta":{"content":"f"}}]} ']
    + [DONE],
    "control characters and garbage": [
        *WORDS[:3],
        chat(b'"tab\there"'),
        *WORDS[3:],
        chat(b'"ok"') + b"}",
        DONE,
    ],
    "prefix garbage": [*WORDS[:3], b"x" + WORDS[3], DONE],
    "suffix garbage": [*WORDS[:3], WORDS[3][:-1] + b",]}", DONE],
    "a quote in content breaks the template open": [
        *WORDS[:3],
        chat(b'"a"').replace(b'"a"', b'"a","finish_reason":"stop","x":"b"'),
        *WORDS[3:],
        DONE,
    ],
    "nan and big numbers": [
        chat(b'"a"').replace(b"1700000000", b"NaN"),
        chat(b'"b"').replace(b"1700000000", b"NaN"),
        chat(b'"c"').replace(b"1700000000", b"1e400"),
        chat(b'"d"').replace(b"1700000000", b"1e400"),
        chat(b'"e"').replace(b"1700000000", b"123456789012345678901234567890"),
        chat(b'"f"').replace(b"1700000000", b"123456789012345678901234567890"),
        DONE,
    ],
    "second choice index": [
        HEAD + b'"choices":[{"index":1,"delta":{"content":"i%d"}}]}' % n for n in range(4)
    ]
    + [DONE],
    "two choices": [
        HEAD
        + b'"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}]}'
        for _ in range(4)
    ]
    + [DONE],
    "wrong types": [*WORDS[:2], HEAD + b'"choices":{"a":1}}', *WORDS],
    "not an object": [*WORDS[:2], b"[1,2,3]"],
    "unknown objects": [b'{"type":"ping"}', b'{"choices":[]}', *WORDS, DONE],
    "sse variety": [
        ": keep-alive\n\n",
        "id: 5\nretry: 100\n",
        *WORDS[:2],
        "event: annotation\ndata: worker 3\n\n",
        'data: {"choices":[{"delta":\ndata: {"content":"multi"}}]}\n\n',
        *WORDS[2:],
        "data:" + WORDS[0].decode() + "\r\n\r\n",
        "data:" + WORDS[1].decode() + "\r\r",
        DONE,
    ],
    "after done": [*WORDS, DONE, *WORDS, b"garbage"],
    "unterminated last event": [*WORDS, "data: [DONE]"],
}


def sse(stream: list[bytes | str]) -> bytes:
    out = bytearray()
    for item in stream:
        out += item.encode() if isinstance(item, str) else b"data: " + item + b"\n\n"
    return bytes(out)


def pieces(wire: bytes, how: str, rng: random.Random | None = None) -> list[bytes]:
    if how == "whole":
        return [wire]
    if how == "events":
        return [part + b"\n\n" for part in wire.split(b"\n\n")]
    if how == "bytes":
        return [wire[i : i + 1] for i in range(len(wire))]
    rng = rng or random.Random(0)
    cuts = sorted(rng.sample(range(1, len(wire)), min(len(wire) - 1, rng.randint(1, 12))))
    return [wire[a:b] for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True)]


def reference(reads: list[bytes], capture_text: bool) -> ResponseAccumulator:
    acc = ResponseAccumulator(capture_text=capture_text)
    parser = SSEParser()
    for t, read in enumerate(reads, start=1):
        for event in parser.feed(read):
            acc.on_event(event, float(t))
    for event in parser.flush():
        acc.on_event(event, 1000.0)
    return acc


def fast(reads: list[bytes], capture_text: bool) -> ResponseAccumulator:
    acc = ResponseAccumulator(capture_text=capture_text)
    parser = SSEParser()
    for t, read in enumerate(reads, start=1):
        acc.on_events(parser.feed_raw(read), float(t))
    for event in parser.flush():
        acc.on_event(event, 1000.0)
    return acc


def outcome(acc: ResponseAccumulator) -> dict[str, Any]:
    return {
        "first_token_s": acc.first_token_s,
        "chunk_times": list(acc.chunk_times),
        "finish_reason": acc.finish_reason,
        "completion_tokens": acc.completion_tokens,
        "prompt_tokens": acc.prompt_tokens,
        "cached_tokens": acc.cached_tokens,
        "worker_id": acc.worker_id,
        "done": acc.done,
        "recognized": acc.recognized,
        "error": acc.error,
        "finished": acc.finished,
        "output_tokens": acc.output_tokens,
        "text": acc.text,
    }


@pytest.mark.parametrize("capture_text", [False, True])
@pytest.mark.parametrize("how", ["whole", "events", "bytes", "random"])
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_the_fast_reader_matches_the_full_decoder(name: str, how: str, capture_text: bool) -> None:
    rng = random.Random(name)
    wire = sse(CORPUS[name])
    for _ in range(3 if how == "random" else 1):
        reads = pieces(wire, how, rng)
        assert outcome(fast(reads, capture_text)) == outcome(reference(reads, capture_text))


def test_random_byte_edits_never_make_the_readers_disagree() -> None:
    # Edits land on template bytes, contents and framing alike: whatever they break or
    # create, the fast path must fall back to the decoder or agree with it.
    rng = random.Random(7)
    base = [ROLE, *WORDS, *plain("é", "😀", "x y"), chat(b'" end"', b'"length"'), USAGE, DONE]
    alphabet = b'"\\{}[],:0123456789abcdefnulrtx \t\xff\xc3\xa9'
    for _ in range(600):
        wire = bytearray(sse(list(base)))
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(wire))
            action = rng.randrange(3)
            if action == 0:
                wire[at] = rng.choice(alphabet)
            elif action == 1:
                del wire[at]
            else:
                wire.insert(at, rng.choice(alphabet))
        reads = pieces(bytes(wire), rng.choice(["whole", "events", "random"]), rng)
        capture_text = rng.random() < 0.5
        assert outcome(fast(reads, capture_text)) == outcome(reference(reads, capture_text))


def test_plain_chunks_after_the_first_are_not_json_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    decode = answers_module._decode

    def counting(text: str) -> Any:
        calls.append(text)
        return decode(text)

    monkeypatch.setattr(answers_module, "_decode", counting)
    words = plain(*(f" w{n}" for n in range(50)))
    reads = pieces(sse([ROLE, *words, chat(b'"!"', b'"stop"'), USAGE, DONE]), "events")
    acc = fast(reads, capture_text=True)
    assert len(acc.chunk_times) == 51
    assert acc.text == "".join(f" w{n}" for n in range(50)) + "!"
    assert acc.finish_reason == "stop" and acc.completion_tokens == 9 and acc.done
    # the role chunk, the first word, its template check, the finish chunk, the usage chunk
    assert len(calls) == 5


def test_a_stream_that_never_repeats_stops_trying_to_learn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    decode = answers_module._decode

    def counting(text: str) -> Any:
        calls.append(text)
        return decode(text)

    monkeypatch.setattr(answers_module, "_decode", counting)
    stream = CORPUS["every chunk different"]
    acc = fast(pieces(sse(stream), "events"), capture_text=False)
    assert len(acc.chunk_times) == 12
    assert len(calls) == 12 + answers_module._LEARN_ATTEMPTS


@pytest.mark.parametrize(
    "name",
    ["plain", "escaped quotes and backslashes", "mid-stream error", "dynamo worker on every chunk"],
)
def test_the_client_records_what_the_full_decoder_reads(wire: Wire, name: str) -> None:
    events = [
        item.encode() if isinstance(item, str) else b"data: " + item + b"\n\n"
        for item in CORPUS[name]
    ]
    answer = wire.stream(*events)

    async def handler(request: Received, reply: Reply) -> None:
        # Odd-sized writes with pauses: reads that split events and carry several.
        await reply.send(*(answer[i : i + 700] for i in range(0, len(answer), 700)), pause_s=0.002)

    async def main() -> ResponseResult:
        async with (
            wire.serve(handler) as server,
            InferenceClient(
                server.url, concurrency=1, timeouts=Timeouts(read_s=2.0), capture_text=True
            ) as client,
        ):
            return await client.send(ChatRequest(model="m", messages=[]))

    result = asyncio.run(main())
    expected = reference([b"".join(events)], capture_text=True)
    assert result.text == expected.text
    assert result.output_tokens == expected.output_tokens
    assert len(result.chunk_times_s) == len(expected.chunk_times)
    assert result.first_token_s == (result.chunk_times_s[0] if result.chunk_times_s else None)
    assert result.finish_reason == expected.finish_reason
    assert result.prompt_tokens == expected.prompt_tokens
    assert result.served_by == expected.worker_id
    assert result.error_detail == expected.error
