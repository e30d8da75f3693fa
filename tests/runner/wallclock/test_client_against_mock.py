"""Our HTTP client against the built-in mock, over real sockets: every injected fault kind is
classified as the kind of failure it imitates, and the counts match the mock's own books."""

from __future__ import annotations

import asyncio
from collections import Counter

import httpx

from runner.client import ChatRequest, InferenceClient, Timeouts
from runner.cluster import ClusterConfig
from runner.mockserver import FaultConfig, MockServerConfig, start_mock_server
from runner.trace import count_tokens


def test_every_fault_kind_is_classified_and_counts_match_the_servers_books():
    faults = FaultConfig(
        error_rate=0.1,
        rate_limit_rate=0.1,
        overload_rate=0.1,
        disconnect_rate=0.1,
        stall_rate=0.05,
        stall_s=1.0,
        seed=5,
    )
    config = MockServerConfig(cluster=ClusterConfig(workers=4, time_scale=0.0), faults=faults)
    request = ChatRequest(
        model="mock-model",
        messages=[{"role": "user", "content": "a b c"}],
        max_tokens=8,
        ignore_eos=True,
    )

    async def run(url: str) -> Counter[str]:
        # A stalled answer pauses 1 s; the read timeout gives up after 0.3 s.
        async with InferenceClient(url, concurrency=16, timeouts=Timeouts(read_s=0.3)) as client:
            results = await asyncio.gather(*(client.send(request) for _ in range(300)))
        return Counter(str(r.error) if r.error else "ok" for r in results)

    with start_mock_server(config, process=True) as server:
        seen = asyncio.run(run(server.url))
        injected = httpx.get(f"{server.url}/stats").json()["server"]["faults_injected"]
    assert seen["http_5xx"] == injected["error"] + injected["overload"] > 0
    assert seen["http_429"] == injected["rate_limit"] > 0
    assert seen["stream_broken"] == injected["disconnect"] > 0
    assert seen["timeout"] == injected["stall"] > 0
    assert seen["ok"] == 300 - sum(injected.values())


def test_usage_cached_tokens_and_worker_ids_come_back_from_the_mock():
    config = MockServerConfig(cluster=ClusterConfig(workers=4, time_scale=0.0))
    prompt = " ".join(f"w{i}" for i in range(300))
    control = {"nvext": {"session_control": {"session_id": "s", "action": "bind", "timeout": 60}}}
    request = ChatRequest(
        model="mock-model",
        messages=[{"role": "user", "content": prompt}],
        max_tokens=5,
        ignore_eos=True,
        want_worker_id=True,
        extra_body=control,
    )

    async def run(url: str):
        async with InferenceClient(url, concurrency=2) as client:
            return [await client.send(request) for _ in range(3)]

    with start_mock_server(config) as server:
        first, second, third = asyncio.run(run(server.url))
    assert first.ok and first.prompt_tokens == count_tokens(prompt) == 300
    assert first.output_tokens == 5 and len(first.chunk_times_s) == 5
    assert first.cached_tokens == 0 and second.cached_tokens == third.cached_tokens == 256
    assert first.served_by is not None and first.served_by == second.served_by == third.served_by
