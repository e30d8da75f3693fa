"""Mock servers on ephemeral ports for these tests, reached over real sockets with httpx.

Starting a server costs a few tenths of a second, so each distinct configuration is started
once per session and reset (`POST /admin/reset`: fresh cluster, counters and fault RNG)
before every test that asks for it. The `mock` fixture hands out `Mock` objects: a URL, an
httpx client and small helpers for the requests the tests send.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from runner.cluster import ClusterConfig
from runner.mockserver import FaultConfig, MockServerConfig, MockServerHandle, start_mock_server

MODEL = "mock-model"
# Every test here can be run against the multi-process mock (N HTTP fronts, one state owner):
# AIPERF_TEST_MOCK_PROCESSES=2 pytest tests/runner/mockserver. test_processes.py always does.
PROCESSES = int(os.environ.get("AIPERF_TEST_MOCK_PROCESSES", "1"))


def words(count: int, tag: str = "w") -> str:
    """`count` distinct one-token words."""
    return " ".join(f"{tag}{i}" for i in range(count))


def chat_body(content: str, *, stream: bool = True, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": content}],
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    body.update(extra)
    return body


def sse_events(raw: bytes) -> list[bytes]:
    """The `data:` payloads of an SSE body, checking the framing exactly: every event is
    `data: <payload>\\n\\n` and nothing else sits between them."""
    assert raw.endswith(b"\n\n"), raw[-80:]
    parts = raw.split(b"\n\n")
    assert parts[-1] == b""
    payloads = []
    for part in parts[:-1]:
        assert part.startswith(b"data: "), part[:80]
        assert b"\n" not in part, part[:80]
        payloads.append(part[len(b"data: ") :])
    return payloads


def json_chunks(raw: bytes) -> list[dict[str, Any]]:
    """The JSON chunks of a finished stream (the trailing [DONE] checked and dropped)."""
    payloads = sse_events(raw)
    assert payloads[-1] == b"[DONE]"
    return [json.loads(p) for p in payloads[:-1]]


class Mock:
    """One running mock server, reset, with a client bound to it."""

    def __init__(self, handle: MockServerHandle, api_key: str | None) -> None:
        self.url = handle.url
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(base_url=handle.url, headers=headers, timeout=10.0)
        self.admin("/admin/reset")

    def chat(self, body: dict[str, Any], **kwargs: Any) -> httpx.Response:
        return self.client.post("/v1/chat/completions", json=body, **kwargs)

    def stream_raw(
        self, body: dict[str, Any], path: str = "/v1/chat/completions", **kwargs: Any
    ) -> tuple[httpx.Response, bytes]:
        """POST with stream=True semantics; the status and the raw body bytes as sent."""
        with self.client.stream("POST", path, json=body, **kwargs) as response:
            raw = b"".join(response.iter_raw())
        return response, raw

    def stats(self) -> dict[str, Any]:
        response = self.client.get("/stats")
        assert response.status_code == 200
        stats: dict[str, Any] = response.json()
        return stats

    def admin(self, path: str) -> dict[str, Any]:
        response = self.client.post(path)
        assert response.status_code == 200, response.text
        result: dict[str, Any] = response.json()
        return result

    def close(self) -> None:
        self.client.close()


MockFactory = Callable[..., Mock]


@pytest.fixture(scope="session")
def _running() -> Iterator[dict[tuple[MockServerConfig, int], MockServerHandle]]:
    running: dict[tuple[MockServerConfig, int], MockServerHandle] = {}
    yield running
    # Stopped side by side: each stop waits out uvicorn's 0.1 s ticks and shutdown pause.
    stoppers = [threading.Thread(target=handle.stop) for handle in running.values()]
    for stopper in stoppers:
        stopper.start()
    for stopper in stoppers:
        stopper.join()


@pytest.fixture
def mock(
    _running: dict[tuple[MockServerConfig, int], MockServerHandle],
) -> Iterator[MockFactory]:
    """`mock(workers=4, time_scale=0.0, faults=FaultConfig(...), ...)` → a reset Mock.

    Keyword arguments: ClusterConfig fields, plus `faults`, `api_key`, `model` and
    `processes` (HTTP front processes; default PROCESSES).
    """
    opened: list[Mock] = []

    def factory(
        *,
        faults: FaultConfig | None = None,
        api_key: str | None = None,
        model: str = MODEL,
        processes: int | None = None,
        **cluster: Any,
    ) -> Mock:
        cluster.setdefault("workers", 4)
        cluster.setdefault("time_scale", 0.0)
        config = MockServerConfig(
            model=model,
            api_key=api_key,
            faults=faults if faults is not None else FaultConfig(),
            cluster=ClusterConfig(**cluster),
        )
        key = (config, PROCESSES if processes is None else processes)
        handle = _running.get(key)
        if handle is None:
            handle = _running[key] = start_mock_server(config, processes=key[1])
        server = Mock(handle, api_key)
        opened.append(server)
        return server

    yield factory
    for server in opened:
        server.close()
