"""Capacity benchmark of the mock server: streamed requests/s it sustains, and its CPU cost.

Owns its load generator only: the mock runs in its own process (zero latency unless
`--time-scale`), a lean raw-asyncio HTTP/1.1 load drives it from this one (a keep-alive
connection per concurrent stream, bodies encoded up front), and the server's CPU seconds
come from its `/stats`. Not a test and not imported by the package.

    python -m runner bench mock [--requests N --concurrency C --isl 100 --osl 64 --json]

On a shared machine trust server CPU µs per request first: requests/s also depends on the
load generator and other tenants sharing the cores.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import urllib.request
from typing import Any
from urllib.parse import urlsplit

import uvloop

from runner.cluster import ClusterConfig
from runner.mockserver.config import MockServerConfig
from runner.mockserver.server import start_mock_server

__all__ = ["run_bench"]

_MODEL = "mock-model"
_DISTINCT_BODIES = 1024  # distinct prompts, cycled: encoding bodies is not what we measure


def run_bench(
    *,
    requests: int = 20_000,
    concurrency: int = 256,
    isl: int = 100,
    osl: int = 64,
    time_scale: float = 0.0,
    workers: int = 8,
    url: str | None = None,
) -> dict[str, Any]:
    """Drive `requests` streamed chat completions at `concurrency`; return the figures.

    With `url` None a mock is started in a subprocess (and stopped); otherwise the server
    at `url` is measured (it must serve `/stats`, i.e. be this mock).
    """
    handle = None
    if url is None:
        config = MockServerConfig(
            model=_MODEL, cluster=ClusterConfig(workers=workers, time_scale=time_scale)
        )
        handle = start_mock_server(config, process=True)
        url = handle.url
    try:
        bodies = _bodies(isl, osl)
        before = _server_stats(url)
        client_cpu_before_s = time.process_time()
        wall_s, failures = uvloop.run(_drive(url, bodies, requests, concurrency))
        client_cpu_s = time.process_time() - client_cpu_before_s
        after = _server_stats(url)
        server_cpu_s = after["process_cpu_s"] - before["process_cpu_s"]
        coalesced = after["server"]["coalesced_tokens"] - before["server"]["coalesced_tokens"]
    finally:
        if handle is not None:
            handle.stop()
    done = requests - failures
    return {
        "requests": requests,
        "failures": failures,
        "concurrency": concurrency,
        "isl": isl,
        "osl": osl,
        "time_scale": time_scale,
        "wall_s": round(wall_s, 3),
        "req_per_s": round(done / wall_s, 1),
        "server_cpu_s": round(server_cpu_s, 3),
        "server_cpu_us_per_request": round(server_cpu_s / max(1, done) * 1e6, 1),
        # What one fully used core would sustain at this CPU cost per request.
        "server_capacity_req_per_s": round(done / server_cpu_s, 1) if server_cpu_s else None,
        "client_cpu_s": round(client_cpu_s, 3),
        # Timed runs: the share of tokens the server sent late, coalesced with the one before.
        "coalesced_token_share": round(coalesced / max(1, done * osl), 4),
    }


def _bodies(isl: int, osl: int) -> list[bytes]:
    rng = random.Random(0)
    vocabulary = [f"w{i}" for i in range(4096)]
    bodies = []
    for i in range(_DISTINCT_BODIES):
        words = [f"r{i}", *rng.choices(vocabulary, k=isl - 1)]
        body = {
            "model": _MODEL,
            "messages": [{"role": "user", "content": " ".join(words)}],
            "stream": True,
            "max_tokens": osl,
            "ignore_eos": True,
            "stream_options": {"include_usage": True},
        }
        bodies.append(json.dumps(body).encode())
    return bodies


async def _drive(
    url: str, bodies: list[bytes], requests: int, concurrency: int
) -> tuple[float, int]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    heads = [
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: %s\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n" % (host.encode(), len(body)) + body
        for body in bodies
    ]
    remaining = [requests]
    failures = [0]

    async def lane(index: int) -> None:
        reader, writer = await asyncio.open_connection(host, port)
        n = index
        while remaining[0] > 0:
            remaining[0] -= 1
            writer.write(heads[n % len(heads)])
            n += concurrency
            if not await _read_answer(reader):
                failures[0] += 1
        writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(lane(i) for i in range(concurrency)))
    return time.perf_counter() - started, failures[0]


async def _read_answer(reader: asyncio.StreamReader) -> bool:
    """Read one response (Content-Length or chunked); True if it is a 200 ending in [DONE]."""
    head = await reader.readuntil(b"\r\n\r\n")
    ok = head.startswith(b"HTTP/1.1 200")
    lower = head.lower()
    at = lower.find(b"content-length:")
    if at >= 0:
        length = int(lower[at + 15 : lower.index(b"\r\n", at)])
        body = await reader.readexactly(length)
    else:
        pieces = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            chunk = await reader.readexactly(size + 2)
            if size == 0:
                break
            pieces.append(chunk[:-2])
        body = b"".join(pieces)
    return ok and body.endswith(b"data: [DONE]\n\n")


def _server_stats(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/stats", timeout=30) as response:
        stats: dict[str, Any] = json.load(response)
    return stats
