"""One run's client workers as separate processes over real Redis (runner/fleet): the routing
figures of the in-process engine, session copies held in the hosts' own memory, a host lost
mid-run, and hosts that never outlive their orchestrator.

Every test starts real `python -m runner client-worker` processes against the real mock
server; Redis is the machine's (skips with the reason when there is none)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from cryptography.fernet import Fernet

from runner import SpecError, parse_spec
from runner.affinity.emitters import AffinityConfig, AffinityKind
from runner.cluster import ClusterConfig
from runner.ending import EndedBy, Ending
from runner.fleet import FleetSender, RunKeys, host_groups
from runner.fleet.host import SECRET_ENV, new_fleet_secret
from runner.mockserver import MockServerConfig, start_mock_server
from runner.replay.engine import EngineConfig
from runner.replay.scheduler import ReplayConfig
from runner.routing.router import Policy
from runner.trace import SyntheticConfig, Trace, generate_synthetic, load_trace
from runner.wallclock import LiveConfig, replay_live
from tests.fixtures import CLAUDE_CODE_SUBAGENTS
from tests.infra import unavailable
from tests.runner.fleet.conftest import REDIS_URL

ROOT = Path(__file__).resolve().parents[3]
ROUTING_KEYS = (
    "requests",
    "sessions",
    "trees_completed",
    "worker_switches",
    "sessions_multi_worker",
    "orphaned_session_copies",
    "errors",
)


@pytest.fixture(scope="module")
def mock() -> Iterator[str]:
    config = MockServerConfig(cluster=ClusterConfig(workers=8, time_scale=0.0))
    with start_mock_server(config, process=True) as server:
        yield server.url


def trace() -> Trace:
    return generate_synthetic(
        SyntheticConfig(seed=3, trees=6, main_turns=(4, 8), subagent_turns=(2, 4))
    )


class Hosts:
    """One `client-worker` process per group of `per_host` client workers."""

    def __init__(
        self,
        run: str,
        workers: int,
        per_host: int = 1,
        *,
        secret: str,
        redis_url: str = REDIS_URL,
    ) -> None:
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-m", "runner", "client-worker", "--redis", redis_url,
                 "--run", run, *(f"--worker={w}" for w in group), "--wait-s", "60"],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, SECRET_ENV: secret},  # the run's key, out of band
            )
            for group in host_groups(workers, per_host)
        ]  # fmt: skip

    def reports(self) -> list[dict]:
        """Each worker's report, as its process printed it (a JSON line per worker)."""
        out = []
        for proc in self.procs:
            try:
                stdout, stderr = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGUSR1)  # the host prints what it waits on
                time.sleep(1)
                proc.kill()
                _, stderr = proc.communicate()
                pytest.fail(f"a host did not leave after its run:\n{stderr[-4000:]}")
            assert stderr == "", stderr
            out.extend(json.loads(line) for line in stdout.splitlines())
        return out

    def kill(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def agent_replay() -> tuple[list[Trace], ReplayConfig]:
    """The project's Claude Code session, each of 8 lanes replaying it from t* in 100-300 s,
    around its SPAWN subagents: the same requests every run whatever the timing, and a
    legacy run bounces the subagents whose parent turn is gone (tests/runner/wallclock)."""
    agent = load_trace(CLAUDE_CODE_SUBAGENTS)
    span_s = agent.trees[0].span_s
    config = ReplayConfig(
        concurrency=8,
        max_trees=8,
        start_window=(100.0 / span_s, 300.0 / span_s),
        speedup=5000.0,
        seed=2,
    )
    return [agent], config


def replay(
    url: str,
    engine: EngineConfig,
    *,
    workers: int = 0,
    per_host: int = 1,
    traces: list[Trace] | None = None,
    replay_config: ReplayConfig | None = None,
):
    """The same run in-process (`workers` 0) or with that many client workers in host
    processes of `per_host` each; returns the summary and, for the fleet, each worker's
    report."""
    traces = traces or [trace()]
    config = LiveConfig(
        endpoint=url,
        model="mock-model",
        replay=replay_config or ReplayConfig(concurrency=6, max_trees=6, speedup=200.0),
        engine=engine,
    )
    if not workers:
        return asyncio.run(replay_live(traces, config)).summary, []
    run = uuid.uuid4().hex[:12]
    secret = new_fleet_secret()
    hosts = Hosts(run, workers, per_host, secret=secret)
    try:

        async def go():
            sender = FleetSender(traces, config, redis_url=REDIS_URL, run=run, secret=secret)
            await sender.start(timeout_s=60)
            return (await replay_live(traces, config, sender=sender)).summary

        summary = asyncio.run(go())
        reports = hosts.reports()
    finally:
        hosts.kill()
    # Nothing of the run stays in Redis: answered credits are deleted as they are
    # acknowledged, and every key of the run expires.
    client = redis.Redis.from_url(REDIS_URL)
    keys = RunKeys(run)
    for worker in range(workers):
        assert client.xlen(keys.credits(worker)) == 0
    for key in client.scan_iter(match=f"{keys.prefix}*"):
        assert 0 < client.ttl(key) <= 600, key
    return summary, reports


def test_host_processes_give_the_routing_figures_of_the_in_process_engine(mock):
    traces, replay_config = agent_replay()
    engine = EngineConfig(client_workers=4, policy=Policy.SPAWN_PIN)
    local, _ = replay(mock, engine, traces=traces, replay_config=replay_config)
    fleet, reports = replay(mock, engine, workers=4, traces=traces, replay_config=replay_config)
    assert {k: fleet[k] for k in ROUTING_KEYS} == {k: local[k] for k in ROUTING_KEYS}
    assert fleet["worker_switches"] == 0 and fleet["orphaned_session_copies"] == 0
    assert sum(r["sent"] for r in reports) == fleet["requests"]
    assert all(r["stopped"] == "stop" for r in reports)
    assert sum(r["copies"] for r in reports) == 0  # every session freed where it ended


def test_client_workers_sharing_host_processes_route_as_in_process(mock):
    """4 client workers in 2 host processes: the in-process engine's routing figures, each
    worker with its own stream, copies and heartbeat, the heartbeats naming 2 processes that
    serve 2 workers each (host h serves workers 2h and 2h+1)."""
    traces, replay_config = agent_replay()
    engine = EngineConfig(client_workers=4, policy=Policy.SPAWN_PIN)
    local, _ = replay(mock, engine, traces=traces, replay_config=replay_config)
    fleet, reports = replay(
        mock, engine, workers=4, per_host=2, traces=traces, replay_config=replay_config
    )
    assert {k: fleet[k] for k in ROUTING_KEYS} == {k: local[k] for k in ROUTING_KEYS}
    assert sorted(r["worker"] for r in reports) == [0, 1, 2, 3]
    assert sum(r["sent"] for r in reports) == fleet["requests"]
    assert all(r["stopped"] == "stop" and r["copies"] == 0 for r in reports)
    hosts = fleet["fleet"]["hosts"]
    served: dict[str, list[int]] = {}
    for beat in hosts:
        served.setdefault(beat["host"], []).append(beat["worker"])
    assert sorted(served.values()) == [[0, 1], [2, 3]], served
    # One process, one RSS: its workers' beats report the same process.
    assert all(re.fullmatch(r".+:\d+", host) for host in served)
    # Each beat's event-loop lag reaches the summary (None: the probe had not woken yet).
    for beat in hosts:
        assert beat["loop_lag_ms"] is None or beat["loop_lag_ms"] >= 0, beat
        assert beat["loop_lag_mean_ms"] is None or beat["loop_lag_mean_ms"] >= 0, beat


def test_placement_groups_workers_into_host_processes():
    assert host_groups(8, 1) == [[w] for w in range(8)]
    assert host_groups(8, 4) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert host_groups(5, 2) == [[0, 1], [2, 3], [4]]
    assert host_groups(3, 8) == [[0, 1, 2]]


def test_several_workers_per_host_need_client_worker_processes():
    live: dict[str, Any] = {
        "target": {"kind": "endpoint", "url": "http://127.0.0.1:9", "model": "m"},
        "duration_s": 5,
    }
    with pytest.raises(SpecError) as refused:
        parse_spec({**live, "client_workers_per_host": 2})
    assert "client_worker_processes" in refused.value.fields["client_workers_per_host"]
    spec = parse_spec({**live, "client_worker_processes": True, "client_workers_per_host": 2})
    assert spec.client_workers_per_host == 2
    assert parse_spec(live).client_workers_per_host == 1  # one process per worker by default
    with pytest.raises(SpecError, match="client_workers_per_host"):
        parse_spec({**live, "client_worker_processes": True, "client_workers_per_host": 0})


def test_legacy_bounces_leave_real_stale_copies_in_the_hosts(mock):
    """Legacy's bounces happen across real processes, and every stale copy the engine's books
    count is bytes held by the host that served the session. (How many bounces a live legacy
    run makes depends on which worker is least loaded at each instant, in-process too: two
    in-process runs of this replay differ by one or two, so the count is checked within the
    run, against the hosts' own memory.)"""
    traces, replay_config = agent_replay()
    engine = EngineConfig(client_workers=4, policy=Policy.LEGACY)
    fleet, reports = replay(mock, engine, workers=4, traces=traces, replay_config=replay_config)
    assert fleet["worker_switches"] > 0 and fleet["sessions_multi_worker"] > 0
    assert sum(r["copies"] for r in reports) == fleet["orphaned_session_copies"] > 0
    assert sum(r["copy_bytes"] for r in reports) > 0
    # Held as shared pieces (runner/workers/history.py), and measured as such.
    assert sum(r["copy_held_bytes"] for r in reports) > 0
    assert sum(r["sent"] for r in reports) == fleet["requests"]
    assert all(r["stopped"] == "stop" for r in reports)


def test_lineage_binds_each_tree_once_and_never_closes_early_across_processes(mock):
    traces, replay_config = agent_replay()
    affinity = AffinityConfig(kind=AffinityKind.DYNAMO_HEADERS, scope="lineage")
    engine = EngineConfig(client_workers=3, policy=Policy.SPAWN_PIN, affinity=affinity)
    fleet, _ = replay(mock, engine, workers=3, traces=traces, replay_config=replay_config)
    assert fleet["trees_completed"] == 8 and fleet["errors"] == 0
    assert fleet["affinity_binds"] == fleet["trees_started"]  # one key per tree: the root's
    # Only a provably tree-final request closes; whether a tree's last request is known final
    # when it is issued depends on its siblings' timing, so some trees are left to the TTL.
    assert 0 < fleet["affinity_closes"] <= fleet["trees_completed"]
    assert fleet["early_closes"] == 0


def run_killing_hosts(mock: str, *, workers: int, victims: list[int], after_results: int):
    """A live run on `workers` host processes whose `victims` are SIGKILLed once that many
    results came back (slow enough that the run is still going); returns the run's result
    and its sender."""
    engine = EngineConfig(client_workers=workers, policy=Policy.SPAWN_PIN, on_worker_loss="migrate")
    traces = [trace()]
    config = LiveConfig(
        endpoint=mock,
        model="mock-model",
        replay=ReplayConfig(concurrency=6, max_trees=6, speedup=20.0),
        engine=engine,
    )
    run = uuid.uuid4().hex[:12]
    secret = new_fleet_secret()
    hosts = Hosts(run, workers, secret=secret)
    try:

        async def go():
            sender = FleetSender(traces, config, redis_url=REDIS_URL, run=run, secret=secret)
            await sender.start(timeout_s=60)

            async def kill_when_busy():
                while sender.stats.results < after_results:
                    await asyncio.sleep(0.02)
                for victim in victims:
                    os.kill(hosts.procs[victim].pid, signal.SIGKILL)

            killer = asyncio.create_task(kill_when_busy())
            result = await replay_live(traces, config, sender=sender)
            await killer
            return result, sender

        return asyncio.run(go())
    finally:
        hosts.kill()


def test_a_host_killed_mid_run_is_lost_and_the_run_ends(mock):
    """SIGKILL one host once requests flow: the run does not hang; what it owed is answered
    `worker_lost` (never silently dropped or re-sent), the engine migrates its sessions, and
    the summary names the worker and when."""
    started = time.monotonic()
    result, sender = run_killing_hosts(mock, workers=3, victims=[1], after_results=10)
    elapsed = time.monotonic() - started
    summary = result.summary
    assert [lost["worker"] for lost in summary["client_workers_lost"]] == [1]
    assert [lost.worker for lost in sender.lost_workers()] == [1]
    # Every credit sent has its outcome: answered by a host, or classified as lost.
    assert sender.stats.credits == sender.stats.results + sum(
        lost.in_flight + lost.unread for lost in sender.lost_workers()
    )
    assert summary["trees_completed"] + summary.get("trees_cut", 0) == 6
    assert elapsed < 120  # a lost host must not hold the run for its whole read timeout


def test_a_host_leaves_when_its_orchestrator_is_gone():
    """No orchestrator refreshes the run's `alive` key: the host notices within seconds and
    exits instead of waiting forever (an orchestrator killed mid-run leaves no strays)."""
    run = uuid.uuid4().hex[:12]
    keys = RunKeys(run)
    client = redis.Redis.from_url(REDIS_URL)
    client.set(keys.prefix + "alive", b"1", ex=1)
    config = {
        "endpoint": "http://127.0.0.1:9",
        "api_key": None,
        "headers": {},
        "timeouts": [1, 1, None, None],
        "connections": 4,
    }
    secret = new_fleet_secret()
    sealed = Fernet(secret.encode()).encrypt(json.dumps(config).encode())
    client.set(keys.prefix + "config", sealed, ex=60)
    hosts = Hosts(run, 1, secret=secret)
    try:
        (report,) = hosts.reports()
    finally:
        hosts.kill()
        client.delete(keys.prefix + "config", keys.credits(0))
    assert report["stopped"] == "orphaned"
    assert hosts.procs[0].returncode == 1


def test_a_run_whose_every_host_dies_ends_and_says_so(mock):
    result, _ = run_killing_hosts(mock, workers=2, victims=[0, 1], after_results=5)
    summary = result.summary
    assert result.ended_by == Ending(EndedBy.WORKERS_LOST, "every client worker was lost")
    assert summary["stopped_reason"] == "every client worker was lost"
    assert sorted(lost["worker"] for lost in summary["client_workers_lost"]) == [0, 1]
    assert summary["fleet"]["credits"] == summary["fleet"]["results"] + sum(
        lost["in_flight"] + lost["unread"] for lost in summary["fleet"]["lost"]
    )


def run_through_redis_trouble(
    mock: str,
    workers: int,
    *,
    redis_url: str,
    trouble: Callable[[FleetSender], Awaitable[None]],
    hosts_leave: bool = False,
) -> tuple[Any, FleetSender, float, list[dict]]:
    """A closed-loop run on `workers` host processes over `redis_url` that ends on its failure
    threshold of 10, with `trouble(sender)` run beside it once the sender has started; returns
    the run's result, its sender, how long the run took, and (`hosts_leave`: the hosts must
    leave on the run's stop) the hosts' reports."""
    config = LiveConfig(
        endpoint=mock,
        model="mock-model",
        replay=ReplayConfig(timing="closed", concurrency=4, duration_s=120.0, seed=1),
        engine=EngineConfig(client_workers=workers, policy=Policy.SPAWN_PIN),
        failure_threshold=10,
    )
    traces = [trace()]
    run = uuid.uuid4().hex[:12]
    secret = new_fleet_secret()
    hosts = Hosts(run, workers, secret=secret, redis_url=redis_url)
    try:

        async def go():
            sender = FleetSender(traces, config, redis_url=redis_url, run=run, secret=secret)
            await sender.start(timeout_s=60)
            beside = asyncio.create_task(trouble(sender))
            started = time.monotonic()
            result = await asyncio.wait_for(replay_live(traces, config, sender=sender), 90)
            await beside
            return result, sender, time.monotonic() - started

        result, sender, elapsed_s = asyncio.run(go())
        # A host that leaves takes its heartbeat with it (the pool tests of tests/runner/fleet
        # count the beating hosts of other runs); a killed one's lingers a few seconds.
        reports = hosts.reports() if hosts_leave else []
        return result, sender, elapsed_s, reports
    finally:
        hosts.kill()


def test_redis_gone_past_its_grace_ends_the_run_with_what_it_owed_lost(tmp_path, monkeypatch):
    """A Redis of the test's own stops mid-run and stays away: the orchestrator's pops and
    looks at the hosts fail, are tried again, and once Redis has been gone past the grace (1 s
    here, 10 s in a run) everything owed is answered `worker_lost` and every later request
    fails at once, so the run ends on its failure threshold instead of waiting forever.

    The server is frozen (SIGSTOP) before Redis goes, once every credit owed has been
    appended: otherwise an answer already on its way would free a slot, the closed loop's next
    credit would fail its append at once, and that chain (a different rule, the test below)
    would reach the threshold before the grace is up."""
    from runner.fleet import sender as sender_module
    from tests.web.private_servers import PrivateRedis

    if shutil.which("redis-server") is None:
        unavailable("redis-server is not installed: the test needs a Redis of its own to stop")
    monkeypatch.setattr(sender_module, "_REDIS_GRACE_S", 1.0)
    server = PrivateRedis(tmp_path)
    server.start()
    mock = start_mock_server(
        MockServerConfig(cluster=ClusterConfig(workers=8, time_scale=0.0)), process=True
    )
    assert mock.pid is not None

    def settled(sender: FleetSender) -> tuple[int, ...] | None:
        """The ids owed, once nothing is waiting to be appended or being appended."""
        if sender._outbox or sender._flushing or sender._flush_due:
            return None
        if any(entry.entry is None for entry in sender._owed.values()):
            return None
        return tuple(sorted(sender._owed))

    async def freeze_then_stop_redis(sender: FleetSender) -> None:
        while sender.stats.results < 20:
            await asyncio.sleep(0.02)
        os.kill(mock.pid, signal.SIGSTOP)
        # Answers already on their way arrive and their slots' next credits go out; then
        # nothing moves (the server answers nothing more).
        steady, since = None, time.monotonic()
        while time.monotonic() - since < 0.5:
            await asyncio.sleep(0.02)
            now_owed = settled(sender)
            if now_owed is None or now_owed != steady:
                steady, since = now_owed, time.monotonic()
        assert steady, "nothing was owed when Redis went"
        await asyncio.to_thread(server.stop)

    try:
        result, sender, elapsed_s, _ = run_through_redis_trouble(
            mock.url, 2, redis_url=server.url, trouble=freeze_then_stop_redis
        )
    finally:
        server.stop()
        os.kill(mock.pid, signal.SIGCONT)
        mock.stop()
    summary = result.summary
    assert sender.broken is not None and sender.broken.startswith("lost contact with Redis")
    assert result.ended_by.by == EndedBy.FAILURES_IN_A_ROW, result.ended_by
    assert summary["errors_by_category"].get("worker_lost", 0) >= 10, summary
    assert summary["requests"] > 20  # what was answered before Redis went is kept
    assert elapsed_s < 60, elapsed_s


def test_credits_whose_append_redis_refuses_end_as_lost_and_the_run_ends(mock):
    """Every append of credits fails (the orchestrator's append link points at a port where
    nothing listens; its pops and watch use the real Redis): each batch's credits end at once
    as `worker_lost`, never re-sent, and the run ends on its failure threshold instead of
    waiting for answers that cannot come."""
    from runner.fleet.resp import connect

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def refuse_appends(sender: FleetSender) -> None:
        sender._out = connect(f"redis://127.0.0.1:{port}/0", timeout_s=2.0)

    result, sender, elapsed_s, (report,) = run_through_redis_trouble(
        mock, 1, redis_url=REDIS_URL, trouble=refuse_appends, hosts_leave=True
    )
    assert report["stopped"] == "stop" and report["sent"] == 0, report
    summary = result.summary
    assert result.ended_by.by == EndedBy.FAILURES_IN_A_ROW, result.ended_by
    assert "could not be appended to Redis" in result.ended_by.detail
    assert summary["errors_by_category"] == {"worker_lost": summary["requests"]}, summary
    assert sender.stats.results == 0 and not sender._owed
    assert elapsed_s < 30, elapsed_s
