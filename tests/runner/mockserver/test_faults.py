"""Injected faults: each kind is seen by the client the way a real failure would be, and
counted in /stats so a client's error classification can be matched to the server's."""

from __future__ import annotations

import time

import httpx
import pytest

from runner.mockserver import FaultConfig
from tests.runner.mockserver.conftest import MockFactory, chat_body, json_chunks


@pytest.mark.parametrize(
    ("faults", "status", "code"),
    [
        (FaultConfig(error_rate=1.0), 500, "internal_error"),
        (FaultConfig(rate_limit_rate=1.0, retry_after_s=7), 429, "rate_limit_exceeded"),
        (FaultConfig(overload_rate=1.0), 503, "server_is_overloaded"),
    ],
)
def test_error_faults_answer_with_their_status_and_are_counted(
    mock: MockFactory, faults: FaultConfig, status: int, code: str
) -> None:
    server = mock(faults=faults)
    responses = [server.chat(chat_body("hi", max_tokens=4)) for _ in range(3)]

    assert [r.status_code for r in responses] == [status] * 3
    error = responses[0].json()["error"]
    assert error["code"] == code
    assert set(error) == {"message", "type", "param", "code"}
    if status == 429:
        assert responses[0].headers["retry-after"] == "7"
    stats = server.stats()
    kind = {500: "error", 429: "rate_limit", 503: "overload"}[status]
    assert stats["server"]["faults_injected"][kind] == 3
    assert stats["server"]["requests"] == {str(status): 3}
    assert stats["cluster"]["totals"]["requests"] == 0  # the cluster never saw them


def test_disconnect_drops_a_stream_after_some_tokens_without_finish_or_done(
    mock: MockFactory,
) -> None:
    server = mock(faults=FaultConfig(disconnect_rate=1.0))
    for _ in range(3):
        received = b""
        body = chat_body("hi", max_tokens=10)
        with (
            pytest.raises(httpx.RemoteProtocolError),
            server.client.stream("POST", "/v1/chat/completions", json=body) as response,
        ):
            assert response.status_code == 200
            for piece in response.iter_raw():
                received += piece
        assert b"[DONE]" not in received
        assert b'"finish_reason":"length"' not in received
        assert received.count(b'"content":"') >= 2  # the role chunk and at least one token

    server_stats = server.stats()["server"]
    assert server_stats["faults_injected"]["disconnect"] == 3
    assert server_stats["streams_broken"] == 3
    assert server_stats["requests"] == {"200": 3}


def test_disconnect_cuts_a_timed_stream_and_frees_its_slot(mock: MockFactory) -> None:
    server = mock(time_scale=1.0, faults=FaultConfig(disconnect_rate=1.0))
    with pytest.raises(httpx.RemoteProtocolError):
        server.stream_raw(chat_body("hi", max_tokens=20))

    assert server.stats()["cluster"]["totals"]["running"] == 0


def test_disconnect_cuts_a_non_streaming_body_short(mock: MockFactory) -> None:
    server = mock(faults=FaultConfig(disconnect_rate=1.0))
    with pytest.raises(httpx.RemoteProtocolError):
        server.chat(chat_body("hi", stream=False, max_tokens=10))
    assert server.stats()["server"]["faults_injected"]["disconnect"] == 1


def test_stall_pauses_a_stream_mid_way_then_it_completes(mock: MockFactory) -> None:
    server = mock(faults=FaultConfig(stall_rate=1.0, stall_s=0.3))
    arrivals: list[tuple[float, bytes]] = []
    started = time.perf_counter()
    with server.client.stream(
        "POST", "/v1/chat/completions", json=chat_body("hi", max_tokens=8)
    ) as response:
        for piece in response.iter_raw():
            arrivals.append((time.perf_counter() - started, piece))

    raw = b"".join(piece for _, piece in arrivals)
    chunks = json_chunks(raw)
    assert chunks[-1]["usage"]["completion_tokens"] == 8
    assert arrivals[-1][0] >= 0.3
    assert b'"content":"the"' in arrivals[0][1]  # tokens came before the pause
    assert server.stats()["server"]["faults_injected"]["stall"] == 1


def test_mixed_fault_counts_match_what_the_client_saw(mock: MockFactory) -> None:
    faults = FaultConfig(
        error_rate=0.15, rate_limit_rate=0.15, overload_rate=0.15, disconnect_rate=0.15, seed=3
    )
    server = mock(faults=faults)
    seen = {"error": 0, "rate_limit": 0, "overload": 0, "disconnect": 0, "ok": 0}
    for _ in range(60):
        try:
            response, raw = server.stream_raw(chat_body("hi", max_tokens=4))
        except httpx.RemoteProtocolError:
            seen["disconnect"] += 1
            continue
        kind = {500: "error", 429: "rate_limit", 503: "overload", 200: "ok"}[response.status_code]
        seen[kind] += 1
        if kind == "ok":
            assert raw.endswith(b"data: [DONE]\n\n")

    injected = server.stats()["server"]["faults_injected"]
    assert {kind: injected[kind] for kind in ("error", "rate_limit", "overload", "disconnect")} == {
        kind: seen[kind] for kind in ("error", "rate_limit", "overload", "disconnect")
    }
    assert all(seen[kind] > 0 for kind in seen)


def test_the_same_seed_injects_the_same_faults_after_a_reset(mock: MockFactory) -> None:
    server = mock(faults=FaultConfig(error_rate=0.5, seed=11))
    first = [server.chat(chat_body("hi", stream=False)).status_code for _ in range(20)]
    server.admin("/admin/reset")
    second = [server.chat(chat_body("hi", stream=False)).status_code for _ in range(20)]

    assert first == second
    assert set(first) == {200, 500}
