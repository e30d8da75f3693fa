"""The client benchmark reports the figures `bench client --json` prints."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from runner.bench.client import ClientBenchResult, bench_client

if TYPE_CHECKING:  # the fixture's types, for annotations only
    from .conftest import Received, Reply, Wire


def test_the_benchmark_counts_requests_errors_and_ttft_percentiles(wire: Wire) -> None:
    async def handler(request: Received, reply: Reply) -> None:
        body = request.json()
        assert body["max_tokens"] == 4 and body["ignore_eos"] is True
        if len(body["messages"][0]["content"].split()) != 10:
            await reply.send(wire.json_response(400, {"error": "bad prompt"}))
            return
        events = [*wire.tokens("a", "b", "c", "d", finish="length"), wire.usage(10, 4)]
        await reply.send(wire.stream(*events, wire.DONE))

    async def main() -> ClientBenchResult:
        async with wire.serve(handler) as server:
            return await bench_client(
                server.url, model="m", concurrency=8, requests=40, isl=10, osl=4
            )

    result = asyncio.run(main())
    figures = result.to_json()
    assert figures["requests"] == figures["completed"] == 40 and figures["errors"] == {}
    assert figures["req_per_s"] > 0 and figures["cpu_s"] >= 0
    assert set(figures["ttft_ms"]) == {"p50", "p99"}
    assert 0 < figures["ttft_ms"]["p50"] <= figures["ttft_ms"]["p99"]
