"""Runs sharing a pool of host processes take it in turn (runner/fleet/line.py), and a run
waits while other runs' hosts keep the pool busy (FleetSender.start with `start_hosts`).
Real Redis, real host processes."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import uuid
from collections.abc import Callable

import pytest
import redis

from runner.bench.fleet import _bench_processes, _on_fleet_loop, _reap, small_trace
from runner.errors import Stopped
from runner.fleet import FleetError, FleetSender, RunKeys
from runner.fleet.line import LINE, FleetLine
from runner.replay.engine import EngineConfig
from runner.replay.scheduler import ReplayConfig
from runner.wallclock import LiveConfig
from tests.runner.fleet.conftest import REDIS_URL


def _alive(client: redis.Redis, run: str) -> None:
    client.set(RunKeys(run).prefix + "alive", b"1", ex=60)


def test_runs_take_the_host_pool_in_the_order_they_asked_and_skip_a_dead_one() -> None:
    client = redis.Redis.from_url(REDIS_URL)
    client.delete(LINE)
    first, dead, last = (uuid.uuid4().hex[:12] for _ in range(3))
    for run in (first, last):
        _alive(client, run)  # `dead` never refreshed its alive key: its orchestrator is gone
    turns: list[str] = []

    async def scenario() -> None:
        import redis.asyncio as aioredis

        r = aioredis.from_url(REDIS_URL)
        lines = {run: FleetLine(r, RunKeys(run)) for run in (first, dead, last)}

        async def keep_alive() -> None:
            return None

        async def take(run: str) -> None:
            await lines[run].wait_turn(keep_alive)
            turns.append(run)

        await lines[first].wait_turn(keep_alive)  # alone in line: its turn at once
        await r.rpush(LINE, dead)
        behind = asyncio.create_task(take(last))
        await asyncio.sleep(0.6)
        assert turns == []  # `first` still assembling its hosts
        await lines[first].leave()
        await asyncio.wait_for(behind, 5)  # `dead` was dropped, not waited for
        await lines[last].leave()
        await r.aclose()

    _on_fleet_loop(scenario())
    assert turns == [last]
    assert client.lrange(LINE, 0, -1) == []


def _sender(run: str) -> FleetSender:
    config = LiveConfig(
        endpoint="http://127.0.0.1:9",
        model="m",
        replay=ReplayConfig(timing="closed", concurrency=2, max_requests=4, seed=1),
        engine=EngineConfig(client_workers=1),
    )
    return FleetSender([small_trace(4)], config, redis_url=REDIS_URL, run=run)


def _start_later(
    sender: FleetSender, delay_s: float, procs: list[subprocess.Popen[bytes]]
) -> Callable[[], None]:
    """A pool that takes `delay_s` to start the run's host once asked (given the run's key,
    as a pool's hosts are)."""
    run, secret = sender.keys.run, sender.secret

    def start() -> None:
        threading.Timer(
            delay_s,
            lambda: procs.extend(_bench_processes("echo", REDIS_URL, run, 1, secret=secret)),
        ).start()

    return start


def test_a_run_waits_for_hosts_while_the_pool_serves_other_runs_and_not_otherwise() -> None:
    client = redis.Redis.from_url(REDIS_URL)
    client.delete(LINE)
    # Another run's host is beating: the pool is busy, the start timeout does not run.
    other = RunKeys(uuid.uuid4().hex[:12])
    client.set(other.heartbeat(0), b"{}", ex=30)
    run = uuid.uuid4().hex[:12]
    procs: list[subprocess.Popen[bytes]] = []
    waits: list[str] = []
    sender = _sender(run)

    async def start_and_close(
        s: FleetSender, timeout_s: float, start_hosts: Callable[[], None]
    ) -> None:
        try:
            await s.start(timeout_s=timeout_s, start_hosts=start_hosts, on_wait=waits.append)
        finally:
            await s.aclose()

    try:
        # Hosts come 3 s after asked, past a 1 s start timeout: the run still gets them.
        _on_fleet_loop(start_and_close(sender, 1.0, _start_later(sender, 3.0, procs)))
        assert sender.heartbeats.keys() == {0}
        assert any("busy with 1 other run" in line for line in waits), waits
        # The pool idle (no other run's host beating): the same wait fails at the timeout.
        client.delete(other.heartbeat(0))
        lonely = _sender(uuid.uuid4().hex[:12])
        with pytest.raises(FleetError, match="did not start within 1 s"):
            _on_fleet_loop(start_and_close(lonely, 1.0, _start_later(lonely, 3.0, procs)))
    finally:
        for proc in procs:
            proc.kill()
        _reap(procs)
    assert client.lrange(LINE, 0, -1) == []  # each left the line, started or not


def test_a_stop_ends_the_wait_for_hosts_between_redis_commands() -> None:
    # Cancelling the wait mid-command could leave redis-py's connection hanging (a cancelled
    # run that waited for a busy pool did not end); the stop is looked at between commands.
    client = redis.Redis.from_url(REDIS_URL)
    other = RunKeys(uuid.uuid4().hex[:12])
    client.set(other.heartbeat(0), b"{}", ex=30)  # the pool is busy: no timeout would end it
    sender = _sender(uuid.uuid4().hex[:12])

    async def wait_then_stop() -> float:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(0.5, stop.set)
        started = asyncio.get_running_loop().time()
        try:
            with pytest.raises(Stopped, match="waiting for client-worker hosts"):
                await sender.start(timeout_s=1.0, start_hosts=lambda: None, stop=stop)
            return asyncio.get_running_loop().time() - started
        finally:
            await sender.aclose()

    try:
        assert _on_fleet_loop(wait_then_stop()) < 3.0
    finally:
        client.delete(other.heartbeat(0))
    assert client.lrange(LINE, 0, -1) == []
