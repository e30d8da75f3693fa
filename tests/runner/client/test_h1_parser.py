"""The HTTP/1.1 response parser: framings, interim responses, errors, and any split."""

from __future__ import annotations

import random

import pytest

from runner.client.h1 import ProtocolError, ResponseParser, encode_request_head


def parse(*pieces: bytes, eof: bool = False, no_body: bool = False) -> tuple[ResponseParser, bytes]:
    parser = ResponseParser(no_body=no_body)
    body = b"".join(parser.feed(piece) for piece in pieces)
    if eof:
        parser.feed_eof()
    return parser, body


def random_splits(data: bytes, rng: random.Random) -> list[bytes]:
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(1, 10))))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


def test_it_reads_a_content_length_body() -> None:
    parser, body = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Worker-Id: 3\r\n\r\nhello")
    assert (parser.status, parser.reason, body) == (200, b"OK", b"hello")
    assert parser.complete and parser.keep_alive
    assert (b"X-Worker-Id", b"3") in parser.headers


def test_it_decodes_chunks_with_extensions_and_trailers() -> None:
    wire = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n"
    )
    parser, body = parse(wire)
    assert body == b"hello 0123456789"
    assert parser.complete


def test_any_split_of_a_chunked_response_gives_the_same_body() -> None:
    wire = (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        b'f\r\ndata: {"a":1}\n\n\r\n'
        b"10\r\ndata: [DONE]\r\n\r\n\r\n"
        b"0\r\n\r\n"
    )
    rng = random.Random(7)
    for _ in range(1000):
        parser, body = parse(*random_splits(wire, rng))
        assert body == b'data: {"a":1}\n\ndata: [DONE]\r\n\r\n'
        assert parser.complete and parser.status == 200


def test_any_split_of_a_content_length_response_gives_the_same_body() -> None:
    wire = b"HTTP/1.1 200 OK\r\nContent-Length: 26\r\n\r\nabcdefghijklmnopqrstuvwxyz"
    rng = random.Random(8)
    for _ in range(500):
        parser, body = parse(*random_splits(wire, rng))
        assert body == b"abcdefghijklmnopqrstuvwxyz" and parser.complete


def test_bytes_after_the_message_are_kept_apart_and_spoil_keep_alive_reuse() -> None:
    parser, body = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA")
    assert body == b"ok" and parser.trailing == b"EXTRA"


def test_a_body_without_framing_runs_until_the_server_closes() -> None:
    parser, body = parse(b"HTTP/1.1 200 OK\r\n\r\nsome", b" more", eof=True)
    assert body == b"some more" and parser.complete and not parser.keep_alive


def test_connection_close_and_http_1_0_disable_keep_alive() -> None:
    closing, _ = parse(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
    old, _ = parse(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
    old_kept, _ = parse(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n")
    assert (closing.keep_alive, old.keep_alive, old_kept.keep_alive) == (False, False, True)


def test_no_body_follows_204_304_or_a_head_request() -> None:
    for wire, no_body in [
        (b"HTTP/1.1 204 No Content\r\n\r\n", False),
        (b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", False),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", True),
    ]:
        parser, body = parse(wire, no_body=no_body)
        assert parser.complete and body == b""


def test_bare_lf_heads_are_tolerated() -> None:
    parser, body = parse(b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok")
    assert (parser.status, body) == (200, b"ok")


@pytest.mark.parametrize(
    "wire",
    [
        b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
        b"HTTP/1.1 abc OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n",
    ],
)
def test_malformed_responses_raise_protocol_errors(wire: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse(wire)


def test_a_close_mid_body_or_mid_head_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="middle of the response body"):
        parse(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", eof=True)
    with pytest.raises(ProtocolError, match="middle of the response head"):
        parse(b"HTTP/1.1 200 OK\r\nContent-Le", eof=True)


def test_request_heads_refuse_header_injection() -> None:
    head = encode_request_head(b"POST", b"/v1/x", [(b"Host", b"h"), (b"A", b"b")])
    assert head == b"POST /v1/x HTTP/1.1\r\nHost: h\r\nA: b\r\n\r\n"
    with pytest.raises(ProtocolError):
        encode_request_head(b"GET", b"/", [(b"X-Evil", b"a\r\nInjected: 1")])
