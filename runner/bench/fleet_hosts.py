"""Stand-in hosts for the fleet benchmark: what the trip through Redis costs on its own.

- `echo`: the real host (`run_host`: streams, consumer group, batching, heartbeats) with a
  client that answers every request at once, so the orchestrator, the hosts and Redis share
  the cores with no HTTP exchange beside them;
- `floor`: the least a credit's trip can cost on this machine now: one stream read, one push
  back, nothing else (no engine, no request building, no host bookkeeping), on the same loop
  and Redis client. Measured in the same run, it says how much of the figure is ours.

    python -m runner.bench.fleet_hosts echo|floor --redis URL --run KEY --worker N

An echo host builds every request it is sent, as a real host does (the run's key, which opens
the workload, in its environment: SECRET_ENV), and answers without sending it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, cast

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from runner.bench.instant import instant_success
from runner.client import EncodedRequest, ResponseResult
from runner.fleet.host import SECRET_ENV, run_host
from runner.fleet.loop import fleet_loop
from runner.fleet.wire import GROUP, RunKeys

__all__ = ["EchoClient", "floor_round_trips"]


class EchoClient:
    """Answers each request with a one-token success stamped now."""

    async def send(
        self,
        request: EncodedRequest,
        *,
        headers: Mapping[str, str] | None = None,
        on_result: Callable[[ResponseResult], None] | None = None,
    ) -> Any:
        result = instant_success()
        if on_result is not None:
            on_result(result)
        return result

    async def aclose(self) -> None:
        return None


async def _floor_host(redis_url: str, keys: RunKeys) -> None:
    """Read a batch, push its stamps back, acknowledge: until an entry says stop."""
    r = aioredis.from_url(redis_url)
    stream = keys.credits(0)
    with contextlib.suppress(ResponseError):
        await r.xgroup_create(stream, GROUP, id="0", mkstream=True)
    await r.set(keys.heartbeat(0), b"{}", ex=60)  # ready: the open loop may start
    try:
        while True:
            reply = await r.xreadgroup(GROUP, "floor", {stream: ">"}, count=512, block=100)
            if not reply:
                continue
            entries = cast(list[tuple[bytes, dict[bytes, bytes]]], cast(Any, reply)[0][1])
            ids = [entry_id for entry_id, _ in entries]
            stamps = [fields[b"t"] for _, fields in entries if b"t" in fields]
            pipe = r.pipeline(transaction=False)
            if stamps:
                pipe.rpush(keys.returns, *stamps)
            pipe.xack(stream, GROUP, *ids)
            pipe.xdel(stream, *ids)
            await pipe.execute()
            if len(stamps) < len(entries):
                return
    finally:
        await r.aclose()


async def floor_round_trips(
    redis_url: str, keys: RunKeys, *, rate_per_s: float, duration_s: float
) -> list[float]:
    """Open loop at `rate_per_s` against a running floor host: every tick's due entries in one
    pipelined append, results popped in batches. Returns each entry's round trip, seconds."""
    r = aioredis.from_url(redis_url)
    stream = keys.credits(0)
    while not await r.exists(keys.heartbeat(0)):  # the host is still starting
        await asyncio.sleep(0.05)
    trips: list[float] = []
    expected = 0

    async def pop() -> None:
        while len(trips) < expected or expected == 0:
            reply = await r.blmpop(0.05, 1, keys.returns, direction="LEFT", count=1024)
            if reply:
                now = time.perf_counter()
                trips.extend(now - float(raw) for raw in cast(list[bytes], reply[1]))

    popper = asyncio.create_task(pop())
    t0 = time.perf_counter()
    sent = 0
    while (now := time.perf_counter()) - t0 < duration_s:
        due = int((now - t0) * rate_per_s) + 1 - sent
        if due > 0:
            pipe = r.pipeline(transaction=False)
            for _ in range(due):
                pipe.xadd(stream, {b"t": repr(time.perf_counter()).encode()})
            await pipe.execute()
            sent += due
        await asyncio.sleep(max(0.001, t0 + sent / rate_per_s - time.perf_counter()))
    expected = sent
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(popper, 10.0)
    await r.xadd(stream, {b"stop": b"1"})
    await r.delete(keys.returns, keys.heartbeat(0))
    await r.expire(stream, 60)  # the host reads its stop from it first: not deleted at once
    await r.aclose()
    return trips


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m runner.bench.fleet_hosts")
    parser.add_argument("kind", choices=["echo", "floor"])
    parser.add_argument("--redis", required=True)
    parser.add_argument("--run", required=True)
    parser.add_argument("--worker", type=int, default=0)
    args = parser.parse_args()
    serve: Coroutine[Any, Any, object]
    if args.kind == "echo":
        serve = run_host(
            args.redis,
            args.run,
            args.worker,
            secret=os.environ.get(SECRET_ENV, ""),
            client_for=lambda _: EchoClient(),
        )
    else:
        serve = _floor_host(args.redis, RunKeys(args.run))
    with asyncio.Runner(loop_factory=fleet_loop) as loop_runner:
        loop_runner.run(serve)


if __name__ == "__main__":
    main()
