"""Runs sharing one pool of host processes (the service's hosts queue) take it in turn.

A run starts its hosts only when it is first in the fleet's line, and leaves the line once
they all answer: so the pool's processes go to one whole run at a time, in the order runs
asked. Without the line, two runs whose host tasks interleave in the queue could each hold
part of what they need and wait for the rest forever. The runs queue decides who asks first
(fair order between teams); the line keeps that order through the host pool.

An orchestrator that dies in line leaves its entry behind; the run behind it drops an entry
whose run's `alive` key is gone (it expires a minute after its orchestrator's last refresh).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Final

import redis.asyncio as aioredis

from runner.errors import Stopped
from runner.fleet.wire import RunKeys

__all__ = ["LINE", "FleetLine", "busy_hosts", "pause"]

LINE: Final = "aiperf:fleet:line"  # run keys waiting to start their hosts, first in line first
_LOOK_S = 0.2  # how often a run in line looks whether its turn came
_WORD_EVERY_S = 15.0  # a run in line says so this often
_KEEP_ALIVE_S = 5.0  # and refreshes its keys this often


class FleetLine:
    def __init__(self, redis: aioredis.Redis, keys: RunKeys) -> None:
        self.redis = redis
        self.keys = keys
        self.me = keys.run

    async def wait_turn(
        self,
        keep_alive: Callable[[], Awaitable[None]],
        on_wait: Callable[[str], None] | None = None,
        stop: asyncio.Event | None = None,
    ) -> None:
        """Join the line and return when this run is first in it; raise Stopped when `stop`
        is set first."""
        await self.redis.rpush(LINE, self.me)
        next_word = next_alive = time.monotonic()
        while True:
            queued = [_text(run) for run in await self.redis.lrange(LINE, 0, -1)]
            if self.me not in queued:  # dropped as dead by another run (a long stall here)
                await self.redis.rpush(LINE, self.me)
                continue
            ahead = queued[: queued.index(self.me)]
            if not ahead:
                return
            await self._drop_dead(ahead)
            now = time.monotonic()
            if now >= next_alive:
                await keep_alive()
                next_alive = now + _KEEP_ALIVE_S
            if on_wait is not None and now >= next_word:
                on_wait(f"waiting for its turn at the host pool: {len(ahead)} run(s) ahead")
                next_word = now + _WORD_EVERY_S
            await pause(_LOOK_S, stop)

    async def _drop_dead(self, ahead: list[str]) -> None:
        alive = await self.redis.exists(*[RunKeys(run).prefix + "alive" for run in ahead])
        if alive == len(ahead):
            return
        for run in ahead:
            if not await self.redis.exists(RunKeys(run).prefix + "alive"):
                await self.redis.lrem(LINE, 0, run)

    async def leave(self) -> None:
        await self.redis.lrem(LINE, 0, self.me)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def pause(seconds: float, stop: asyncio.Event | None) -> None:
    """Sleep, or raise Stopped as soon as `stop` is set. Waits are left this way, between
    Redis commands: cancelling redis-py's asyncio client mid-command can leave its connection
    waiting forever (a cancelled run then hung while it waited for hosts)."""
    if stop is None:
        await asyncio.sleep(seconds)
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
    if stop.is_set():
        raise Stopped("while waiting for client-worker hosts")


async def busy_hosts(redis: aioredis.Redis, keys: RunKeys) -> tuple[int, int]:
    """(runs, client workers) of other runs whose hosts are beating now."""
    runs: set[bytes] = set()
    workers = 0
    mine = keys.prefix.encode()
    async for key in redis.scan_iter(match=RunKeys("*").prefix + "hb:*", count=1000):
        if not key.startswith(mine):
            runs.add(key.rsplit(b":hb:", 1)[0])
            workers += 1
    return len(runs), workers
