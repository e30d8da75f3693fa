"""The fleet benchmark's instruments (runner/bench/fleet.py, fleet_hosts.py) measure what they
say: real host processes over real Redis, at a size a test can afford."""

from __future__ import annotations

import time
import uuid

from runner.bench.fleet import _bench_processes, _on_fleet_loop, _reap, _replay, small_trace
from runner.bench.fleet_hosts import floor_round_trips
from runner.fleet import FleetSender, RunKeys
from runner.replay.engine import EngineConfig
from runner.replay.scheduler import ReplayConfig
from runner.wallclock import LiveConfig, replay_live
from tests.runner.fleet.conftest import REDIS_URL


def test_the_floor_times_every_entry_of_its_open_loop() -> None:
    run = uuid.uuid4().hex[:12]
    procs = _bench_processes("floor", REDIS_URL, run, 1)
    try:
        trips = _on_fleet_loop(
            floor_round_trips(REDIS_URL, RunKeys(run), rate_per_s=200.0, duration_s=1.0)
        )
    finally:
        _reap(procs)
    assert 190 <= len(trips) <= 210  # one per due entry, none lost or doubled
    assert all(0 < trip < 5.0 for trip in trips)
    assert all(proc.returncode == 0 for proc in procs)  # the stop entry ended the host


def test_echo_hosts_answer_every_credit_of_the_engine_without_a_server() -> None:
    rate = ReplayConfig(timing="rate", rate_per_s=200.0, concurrency=64, duration_s=1.0, seed=1)
    # Nothing listens on the endpoint: every answer is the echo client's.
    summary, cpu_s, sender = _on_fleet_loop(
        _replay(
            "http://127.0.0.1:9", small_trace(400), rate, redis_url=REDIS_URL, hosts=2, echo=True
        )
    )
    assert sender is not None and summary["errors"] == 0
    assert summary["requests"] == sender.stats.results == len(sender.transits_s) >= 190
    assert all(transit > 0 for transit in sender.transits_s)
    assert cpu_s > 0


def test_hosts_leave_at_once_when_their_run_is_over() -> None:
    # A host's last flush once left its flusher waiting for a wake-up that never came: every
    # host lingered its whole final-flush bound (10 s) after the run's end.
    run = uuid.uuid4().hex[:12]
    config = LiveConfig(
        endpoint="http://127.0.0.1:9",
        model="m",
        replay=ReplayConfig(timing="closed", concurrency=4, max_requests=40, seed=1),
        engine=EngineConfig(client_workers=2),
    )
    sender = FleetSender([small_trace(40)], config, redis_url=REDIS_URL, run=run)
    # The echo hosts build what they are sent: they need the run's key for its workload.
    procs = _bench_processes("echo", REDIS_URL, run, 2, secret=sender.secret)

    async def run_and_close() -> int:
        await sender.start(timeout_s=30)
        return int(
            (await replay_live([small_trace(40)], config, sender=sender)).summary["requests"]
        )

    try:
        assert _on_fleet_loop(run_and_close()) == 40
        told = time.monotonic()
        for proc in procs:
            proc.wait(timeout=8)
        assert time.monotonic() - told < 5.0
    finally:
        _reap(procs)


def test_the_orchestrator_builds_no_request_the_hosts_build_them_all(monkeypatch) -> None:
    """Every request of a fleet run is built in a host process: in the orchestrating process
    the builder refuses to build, and every credit is answered all the same (the echo hosts
    build each one from the workload they read once; a request they cannot build would come
    back as an error)."""
    from runner.wallclock.prompts import RequestBuilder

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the orchestrator built a request")

    monkeypatch.setattr(RequestBuilder, "build", refuse)
    monkeypatch.setattr(RequestBuilder, "build_turn", refuse)
    rate = ReplayConfig(timing="rate", rate_per_s=100.0, concurrency=64, duration_s=1.0, seed=1)
    summary, _, sender = _on_fleet_loop(
        _replay(
            "http://127.0.0.1:9", small_trace(200), rate, redis_url=REDIS_URL, hosts=2, echo=True
        )
    )
    assert sender is not None and summary["errors"] == 0
    assert summary["requests"] == sender.stats.results >= 90
