"""The SSE parser: edge cases of the event-stream format, and any split of the bytes."""

from __future__ import annotations

import random

from runner.client.sse import SSEEvent, SSEParser


def parse(*pieces: bytes) -> list[SSEEvent]:
    parser = SSEParser()
    events: list[SSEEvent] = []
    for piece in pieces:
        events += parser.feed(piece)
    return events + parser.flush()


def test_it_yields_one_event_per_blank_line_terminated_data_line() -> None:
    assert parse(b'data: {"a":1}\n\ndata: [DONE]\n\n') == [
        SSEEvent('{"a":1}'),
        SSEEvent("[DONE]"),
    ]


def test_it_ignores_comment_and_keep_alive_lines() -> None:
    stream = b": ping\n\ndata: x\n: mid-event comment\n\n:\n\n"
    assert parse(stream) == [SSEEvent("x")]


def test_it_keeps_the_event_name_for_one_event_only() -> None:
    stream = b"event: worker\ndata: 7\n\ndata: plain\n\n"
    assert parse(stream) == [SSEEvent("7", "worker"), SSEEvent("plain", "message")]


def test_an_event_name_without_data_is_not_dispatched() -> None:
    assert parse(b"event: ping\n\ndata: x\n\n") == [SSEEvent("x")]


def test_it_tracks_the_last_event_id_and_retry() -> None:
    parser = SSEParser()
    events = parser.feed(b"id: 41\nretry: 1500\ndata: a\n\ndata: b\n\nid\ndata: c\n\n")
    assert [(e.data, e.id) for e in events] == [("a", "41"), ("b", "41"), ("c", "")]
    assert parser.retry_ms == 1500
    assert parser.last_event_id == ""


def test_it_ignores_a_non_numeric_retry_and_an_id_with_nul() -> None:
    parser = SSEParser()
    parser.feed(b"retry: soon\nid: a\x00b\ndata: x\n\n")
    assert parser.retry_ms is None
    assert parser.last_event_id is None


def test_it_accepts_crlf_and_lone_cr_line_endings() -> None:
    crlf = b"data: a\r\n\r\ndata: b\r\n\r\n"
    cr = b"data: a\r\rdata: b\r\r"
    assert parse(crlf) == parse(cr) == [SSEEvent("a"), SSEEvent("b")]


def test_a_crlf_split_between_reads_is_one_line_ending() -> None:
    assert parse(b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n") == [SSEEvent("a"), SSEEvent("b")]


def test_multi_line_data_is_joined_with_newlines() -> None:
    assert parse(b"data: one\ndata:two\ndata\ndata:  three\n\n") == [SSEEvent("one\ntwo\n\n three")]


def test_only_one_space_after_the_colon_is_stripped() -> None:
    assert parse(b"data:  x \n\n") == [SSEEvent(" x ")]


def test_unknown_fields_are_ignored() -> None:
    assert parse(b"foo: bar\ndata: x\nbaz\n\n") == [SSEEvent("x")]


def test_flush_dispatches_a_final_event_without_its_blank_line() -> None:
    assert parse(b"data: a\n\ndata: [DONE]") == [SSEEvent("a"), SSEEvent("[DONE]")]
    assert parse(b"data: a\n\ndata: [DONE]\n") == [SSEEvent("a"), SSEEvent("[DONE]")]


def test_flush_on_an_empty_or_finished_stream_yields_nothing() -> None:
    assert parse() == []
    assert parse(b"data: a\n\n") == [SSEEvent("a")]


def test_a_leading_byte_order_mark_is_skipped_even_when_split() -> None:
    assert parse(b"\xef\xbb", b"\xbfdata: a\n\n") == [SSEEvent("a")]
    assert parse(b"\xef\xbb\xbfdata: a\n\n") == [SSEEvent("a")]


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    assert parse(b"data: \xff\n\n") == [SSEEvent("\ufffd")]


def test_a_multibyte_character_split_across_reads_survives() -> None:
    data = 'data: {"content":"héllo ✓"}\n\n'.encode()
    cut = data.index("✓".encode()) + 1
    assert parse(data[:cut], data[cut:]) == [SSEEvent('{"content":"héllo ✓"}')]


# A stream with every feature at once, for the split property below.
_MIXED = (
    b"\xef\xbb\xbf: keep-alive\r\n\r\n"
    b"retry: 3000\n"
    b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n'
    b"event: annotation\r\ndata: worker 3\r\n\r\n"
    b"id: 7\rdata: line one\rdata: line two\r\r"
    b": comment\n"
    b"data:no-space\n\n"
    b'data: {"error":{"message":"boom"}}\r\n\r\n'
    b"\n\n\n"
    b"data: [DONE]"
)


def test_any_split_of_a_stream_yields_the_same_events_as_the_whole() -> None:
    expected = parse(_MIXED)
    assert [e.data for e in expected] == [
        '{"choices":[{"delta":{"content":"a"}}]}',
        "worker 3",
        "line one\nline two",
        "no-space",
        '{"error":{"message":"boom"}}',
        "[DONE]",
    ]
    assert expected[1].event == "annotation"
    rng = random.Random(20261129)
    for _ in range(2000):
        cuts = sorted(rng.sample(range(1, len(_MIXED)), rng.randint(1, 12)))
        pieces = [_MIXED[a:b] for a, b in zip([0, *cuts], [*cuts, len(_MIXED)], strict=True)]
        assert parse(*pieces) == expected, pieces


def test_byte_by_byte_feeding_yields_the_same_events() -> None:
    assert parse(*(bytes([b]) for b in _MIXED)) == parse(_MIXED)
