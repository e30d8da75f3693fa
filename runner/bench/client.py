"""Client throughput benchmark: N requests at concurrency C against one endpoint.

Owns the measurement only (requests/s, TTFT percentiles, this process's CPU seconds); the
`python -m runner bench client` command prints it. Run it against a server that answers at
once (../shared/bench/zero_latency_server.py, or `mock-server --time-scale 0`)
and it measures the client itself.
"""

from __future__ import annotations

import asyncio
import resource
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from runner.client import ChatRequest, InferenceClient, ResponseResult, Timeouts
from runner.metrics import LatencyHistogram

__all__ = ["ClientBenchResult", "bench_client"]

# Common words, about one token each in the usual BPE vocabularies, for prompts of ~isl tokens.
_WORDS = ("the", "and", "to", "of", "a", "in", "is", "that", "it", "for", "on", "with")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientBenchResult:
    requests: int
    concurrency: int
    completed: int  # requests without error
    errors: dict[str, int]  # by error category
    duration_s: float
    req_per_s: float
    ttft_ms_p50: float | None
    ttft_ms_p99: float | None
    latency_ms_p50: float | None
    latency_ms_p99: float | None
    cpu_user_s: float
    cpu_sys_s: float

    @property
    def cpu_s(self) -> float:
        return self.cpu_user_s + self.cpu_sys_s

    def to_json(self) -> dict[str, Any]:
        """The keys `bench client --json` prints (docs/product.md §6), plus detail."""
        return {
            "req_per_s": round(self.req_per_s, 1),
            "ttft_ms": {"p50": _round(self.ttft_ms_p50), "p99": _round(self.ttft_ms_p99)},
            "latency_ms": {"p50": _round(self.latency_ms_p50), "p99": _round(self.latency_ms_p99)},
            "cpu_s": round(self.cpu_s, 2),
            "cpu_user_s": round(self.cpu_user_s, 2),
            "cpu_sys_s": round(self.cpu_sys_s, 2),
            "requests": self.requests,
            "completed": self.completed,
            "errors": self.errors,
            "concurrency": self.concurrency,
            "duration_s": round(self.duration_s, 3),
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


async def bench_client(
    url: str,
    *,
    model: str,
    concurrency: int,
    requests: int,
    isl: int = 100,
    osl: int = 64,
    api_key: str | None = None,
    stream: bool = True,
    rate_per_s: float | None = None,
) -> ClientBenchResult:
    """Closed loop (`concurrency` lanes back to back) or, with `rate_per_s`, open loop: a new
    request every 1/rate seconds, at most `concurrency` in flight. Against a server that
    answers at once, the open-loop TTFT is the client's own overhead at that load."""
    prompt = " ".join(_WORDS[i % len(_WORDS)] for i in range(isl))
    request = ChatRequest(
        model=model,
        messages=[{"role": "user", "content": prompt}],
        max_tokens=osl,
        stream=stream,
        ignore_eos=True,
    )
    records: list[ResponseResult] = []
    remaining = requests

    async with InferenceClient(
        url, concurrency=concurrency, api_key=api_key, timeouts=Timeouts(read_s=60.0)
    ) as client:

        async def lane() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                records.append(await client.send(request))

        async def paced(rate: float) -> None:
            slots = asyncio.Semaphore(concurrency)
            pending: set[asyncio.Task[None]] = set()

            async def one() -> None:
                try:
                    records.append(await client.send(request))
                finally:
                    slots.release()

            for i in range(requests):
                delay = started + i / rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                await slots.acquire()
                task = asyncio.create_task(one())
                pending.add(task)
                task.add_done_callback(pending.discard)
            await asyncio.gather(*pending)

        usage_before = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        if rate_per_s:
            await paced(rate_per_s)
        else:
            await asyncio.gather(*(lane() for _ in range(concurrency)))
        duration_s = time.perf_counter() - started
        usage_after = resource.getrusage(resource.RUSAGE_SELF)

    ttfts = LatencyHistogram()
    latencies = LatencyHistogram()
    for r in records:
        if r.ok:
            latencies.record(r.latency_s * 1000)
            if r.ttft_s is not None:
                ttfts.record(r.ttft_s * 1000)
    errors = Counter(str(r.error) for r in records if r.error is not None)
    return ClientBenchResult(
        requests=requests,
        concurrency=concurrency,
        completed=latencies.count,
        errors=dict(errors),
        duration_s=duration_s,
        req_per_s=len(records) / duration_s if duration_s > 0 else 0.0,
        ttft_ms_p50=ttfts.percentile(50),
        ttft_ms_p99=ttfts.percentile(99),
        latency_ms_p50=latencies.percentile(50),
        latency_ms_p99=latencies.percentile(99),
        cpu_user_s=usage_after.ru_utime - usage_before.ru_utime,
        cpu_sys_s=usage_after.ru_stime - usage_before.ru_stime,
    )
