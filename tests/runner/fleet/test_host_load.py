"""A client-worker host's heartbeat carries its own event loop's lag (issue 27 item 5): the
in-process client's probe (runner/wallclock/load.py) runs on the host's loop, and each beat
says how late that loop woke up since the beat before, so the run's snapshots can name a host
whose loop, not the server, made its requests late (aiperf_web/reports/cards/saturation.py)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import redis.asyncio as aioredis

from runner.fleet import RunKeys
from runner.fleet.host import HostReport, _heartbeat, _State
from runner.fleet.wire import HEARTBEAT_S
from tests.runner.fleet.conftest import REDIS_URL

BLOCK_S = 0.5  # the host's loop held this long by a synchronous call


async def _beats_around_a_stall() -> list[dict[str, object]]:
    keys = RunKeys(uuid.uuid4().hex[:12])
    r = aioredis.from_url(REDIS_URL)
    await r.set(keys.prefix + "alive", b"1", ex=30)
    state = _State()
    beat_task = asyncio.create_task(
        _heartbeat(r, keys, 0, state, HostReport(worker=0), "test-host:1")
    )
    beats: list[dict[str, object]] = []

    async def collect(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            raw = await r.get(keys.heartbeat(0))
            if raw is not None:
                beat = json.loads(raw)
                if not beats or beats[-1]["t"] != beat["t"]:
                    beats.append(beat)
            await asyncio.sleep(0.02)

    try:
        await collect(2 * HEARTBEAT_S)
        time.sleep(BLOCK_S)  # a stall: stream parsing, a large body, a blocking call
        await collect(3 * HEARTBEAT_S)
    finally:
        state.closing.set()
        await asyncio.wait_for(beat_task, 10)
        await r.delete(keys.prefix + "alive", keys.heartbeat(0))
        await r.aclose()
    return beats


def test_a_hosts_heartbeat_carries_its_event_loops_lag() -> None:
    beats = asyncio.run(_beats_around_a_stall())
    assert len(beats) >= 3, beats
    # The first beat comes before the probe has woken once: nothing measured, not zero.
    assert beats[0]["loop_lag_ms"] is None and beats[0]["loop_lag_mean_ms"] is None
    lags = [b["loop_lag_ms"] for b in beats[1:]]
    assert all(isinstance(v, int | float) and v >= 0 for v in lags), lags
    # The probe wakes every 0.1 s: held 0.5 s, one wake-up came at least 0.4 s late, and a
    # beat after the stall reports it.
    stalled = [v for v in lags if isinstance(v, int | float) and v >= 1000 * (BLOCK_S - 0.1)]
    assert stalled, lags
    assert all(isinstance(b["cpu_s"], float) and b["host"] == "test-host:1" for b in beats)
