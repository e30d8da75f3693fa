"""The multi-process mock (`--processes N`): HTTP fronts sharing one port over real sockets,
one process owning the cluster state, so that whichever front a request reaches it sees the
same routing, cache and affinity state, and answers the same as a one-process mock.

Each request below that must be able to land on any front goes on a fresh connection
(`connection: close`): SO_REUSEPORT spreads connections, not requests. Which front answered
is read from `/stats` (each front's request count), never assumed."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from runner.mockserver import MockServerConfig, start_mock_server
from tests.runner.mockserver.conftest import Mock, MockFactory, chat_body, words

_FRESH = {"connection": "close"}
_ROOT = Path(__file__).resolve().parents[3]


def _fronts(server: Mock) -> dict[int, int]:
    """Each front process's completion answers so far, by pid."""
    processes = server.stats()["processes"]
    assert processes[0]["role"] == "state"
    return {p["pid"]: p["requests"] for p in processes if p["role"] == "http"}


def _converse(server: Mock, *, multi: bool) -> list[tuple[str, int, int, int | None]]:
    """Three sessions of four growing turns, interleaved, each request on a new connection:
    (session, turn, worker, cached tokens) per request, plus the front's pid when `multi`."""
    history = {name: "" for name in ("a", "b", "c")}
    seen: list[tuple[str, int, int, int | None]] = []
    before = _fronts(server) if multi else {}
    for turn in range(4):
        for name in history:
            history[name] += " " + words(150, tag=f"{name}{turn}x")
            body = chat_body(history[name], stream=False, max_tokens=4)
            body["nvext"] = {"extra_fields": ["worker_id"]}
            response = server.chat(body, headers={**_FRESH, "x-dynamo-session-id": name})
            assert response.status_code == 200, response.text
            answer = response.json()
            worker = answer["nvext"]["worker_id"]["decode_worker_id"]
            cached = answer["usage"]["prompt_tokens_details"]["cached_tokens"]
            front = None
            if multi:
                after = _fronts(server)
                (front,) = [pid for pid, n in after.items() if n != before.get(pid, 0)]
                before = after
            seen.append((name, worker, cached, front))
    return seen


def test_sessions_see_one_cache_state_whichever_front_answers(mock: MockFactory) -> None:
    # KV routing and header affinity both read state other requests wrote: the answers of a
    # 3-front mock must be those of a 1-process one, request for request.
    cluster: dict[str, Any] = {
        "workers": 4,
        "router": "kv",
        "dynamo_version": "1.6",
        "header_affinity_ttl_s": 60.0,
        "block_size_tokens": 16,
    }
    one = _converse(mock(processes=1, **cluster), multi=False)
    three = _converse(mock(processes=3, **cluster), multi=True)

    assert [row[:3] for row in three] == [row[:3] for row in one]
    fronts = {row[3] for row in three}
    assert len(fronts) >= 2, "12 fresh connections all reached one front: no spreading"
    # Each session's later turns found its earlier turns cached, on its bound worker, also
    # when the turn before was answered by another front.
    crossed = 0
    for name in ("a", "b", "c"):
        rows = [row for row in three if row[0] == name]
        assert len({worker for _, worker, _, _ in rows}) == 1
        assert all(cached > 0 for _, _, cached, _ in rows[1:])
        crossed += sum(1 for prev, row in itertools.pairwise(rows) if prev[3] != row[3])
    assert crossed >= 1, "no session's consecutive turns crossed fronts"


def test_round_robin_is_one_sequence_across_fronts(mock: MockFactory) -> None:
    server = mock(processes=3, workers=3, router="round-robin")
    workers = []
    for i in range(9):
        response = server.chat(chat_body(f"q{i}", stream=False, max_tokens=1), headers=_FRESH)
        workers.append(int(response.headers["x-worker-id"]))
    stats = server.stats()

    assert workers == [0, 1, 2] * 3
    assert stats["server"]["requests"] == {"200": 9}
    assert sum(p["requests"] for p in stats["processes"]) == 9
    assert stats["cluster"]["totals"]["requests"] == 9


def test_a_worker_taken_down_breaks_a_stream_held_by_another_connection(
    mock: MockFactory,
) -> None:
    server = mock(processes=2, workers=1, time_scale=1.0)
    result: dict[str, Any] = {}

    def stream() -> None:
        _response, raw = server.stream_raw(chat_body("hi", max_tokens=300))
        result["raw"] = raw

    reader = threading.Thread(target=stream)
    reader.start()
    deadline = time.monotonic() + 10
    while server.stats()["server"]["in_flight"] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    # A fresh connection: the admin call may reach the other front; the owner tells all.
    answer = httpx.post(server.url + "/admin/workers/0/down", headers=_FRESH, timeout=10).json()
    reader.join(10)

    assert answer["requests_failed"] == 1
    raw: bytes = result["raw"]
    assert b'"error": {"message": "worker 0 went down"' in raw
    assert raw.endswith(b"data: [DONE]\n\n")
    stats = server.stats()
    assert stats["server"]["worker_down_failures"] == 1
    assert stats["server"]["in_flight"] == 0
    assert stats["cluster"]["totals"]["running"] == 0
    assert server.client.get("/health", headers=_FRESH).status_code == 503


def test_stop_leaves_no_front_process() -> None:
    handle = start_mock_server(MockServerConfig(), processes=2)
    try:
        stats = httpx.get(handle.url + "/stats", timeout=10).json()
    finally:
        handle.stop()
    fronts = [p["pid"] for p in stats["processes"] if p["role"] == "http"]

    assert len(fronts) == 2
    assert stats["processes"][0]["pid"] == os.getpid()  # thread mode: the state is here
    for pid in fronts:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    with pytest.raises(httpx.ConnectError):
        httpx.get(handle.url + "/health", timeout=2)


def test_cli_a_front_that_dies_stops_the_whole_server() -> None:
    env = {**os.environ, "PYTHONPATH": str(_ROOT)}
    command = [sys.executable, "-m", "runner", "mock-server", "--port", "0", "--processes", "2"]
    server = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert "2 processes" in line, line
        url = line.split(" at ", 1)[1].split()[0]
        stats = httpx.get(url + "/stats", timeout=10).json()
        fronts = [p["pid"] for p in stats["processes"] if p["role"] == "http"]
        os.kill(fronts[0], signal.SIGKILL)
        code = server.wait(30)
        err = server.stderr.read() if server.stderr else ""
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()

    assert code == 1
    assert f"a mock front process ended ({fronts[0]}: exit -9)" in err
    # The other front stopped with its owner and the port is free.
    deadline = time.monotonic() + 10
    while _alive(fronts[1]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(fronts[1])
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/health", timeout=2)


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for whoever adopted it to reap it counts as ended)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status
