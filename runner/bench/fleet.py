"""Client workers as processes: what the trip through Redis costs, and what it buys.

Figures side by side in one run (absolute times are noisy on a shared machine):

- **added round trip** at an open-loop credit rate: for every request, the time from the
  orchestrator handing it over to its result being back, minus the time the host spent on the
  HTTP exchange itself (both clocks are the same machine's). Three ways, at the same rate:
  `floor`, the least a trip through Redis costs on this machine now (a bare stream read and
  push back, runner/bench/fleet_hosts.py); `transport`, the whole engine and real hosts that
  build every request and whose client answers at once (the orchestrator, hosts and Redis
  alone on the cores); and
  `under load`, real hosts against the mock server, whose HTTP work shares the same cores, at
  `load_rate_per_s` (a rate the machine can serve: on 2 cores the mock's streamed answers and
  the host's HTTP alone use them up near 2k requests/s, past which the figure is queueing);
- **orchestrator CPU per credit** at `rate_per_s`: the orchestrating process's CPU time over
  the credits it issued (scheduler, router, books, metrics and the Redis traffic together; the
  hosts build the requests and do the HTTP, so the transport run's is its figure), beside the
  same replay in-process, where the same process also builds and does the HTTP, and beside the
  engine alone (the driver with a sender that answers at once: what no transport can take
  away); and again at `busy_rate_per_s`, where the orchestrator's ceiling is decided: at a
  low rate its loop wakes for one or two credits at a time and each wake-up's fixed cost
  (timers, the flush and the pop round trips) is spread over few, at a high one a tick carries
  many (on this VM a process's every sleep and wake-up costs tens of microseconds of its CPU).
  The credits/s one core would sustain at the busy rate's cost follow
  (`orchestrator_credits_per_core_s`);
- **requests/s** of a closed loop against the mock with 1, 2 and 4 host processes, beside the
  in-process engine, with the machine's cores busy meanwhile (all processes: once they are
  all busy, more host processes only share them).

Hosts are processes on this machine; the mock server runs in its own process. The workload is
synthetic and small-bodied (short prompts and answers), so the figures are about the
transport, not about prompt size.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from runner.bench.fleet_hosts import floor_round_trips
from runner.bench.instant import InstantSender
from runner.cluster import ClusterConfig
from runner.fleet import FleetSender, LocalHosts, RunKeys, fleet_loop, host_groups
from runner.fleet.host import SECRET_ENV
from runner.mockserver import MockServerConfig, start_mock_server
from runner.replay.engine import EngineConfig
from runner.replay.scheduler import ReplayConfig
from runner.routing.router import Policy
from runner.trace import SyntheticConfig, Trace, generate_synthetic
from runner.wallclock import LiveConfig, replay_live

__all__ = ["FleetBenchResult", "bench_fleet", "bench_fleet_rss"]


@dataclass(frozen=True, slots=True)
class FleetBenchResult:
    rate_per_s: float
    load_rate_per_s: float
    # "floor", "transport", "under load": {"p50", "p99"} milliseconds
    added_rtt_ms: dict[str, dict[str, float | None]]
    cpu_ms_per_credit_fleet: float
    cpu_ms_per_credit_local: float
    busy_rate_per_s: float
    cpu_ms_per_credit_busy: float  # fleet, at busy_rate_per_s
    # The driver and engine alone (a sender that answers at once): at rate_per_s, busy rate
    cpu_ms_per_credit_engine: tuple[float, float]
    req_per_s: dict[str, float]  # "in-process", "1", "2", "4" host processes
    cores_busy: dict[str, float]  # the same keys: the machine's busy cores meanwhile
    credits_measured: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "rate_per_s": self.rate_per_s,
            "load_rate_per_s": self.load_rate_per_s,
            **{f"added_rtt_ms_{name}": figures for name, figures in self.added_rtt_ms.items()},
            "orchestrator_cpu_ms_per_credit": {
                "fleet": self.cpu_ms_per_credit_fleet,
                "in-process": self.cpu_ms_per_credit_local,
                f"fleet at {self.busy_rate_per_s:g}/s": self.cpu_ms_per_credit_busy,
                "engine alone": self.cpu_ms_per_credit_engine[0],
                f"engine alone at {self.busy_rate_per_s:g}/s": self.cpu_ms_per_credit_engine[1],
            },
            "orchestrator_credits_per_core_s": round(1000.0 / self.cpu_ms_per_credit_busy),
            "req_per_s": self.req_per_s,
            "cores_busy": {**self.cores_busy, "of": float(os.cpu_count() or 1)},
            "credits_measured": self.credits_measured,
        }


T = TypeVar("T")


def _on_fleet_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on the loop a fleet's orchestrator runs on (runner.run does the same)."""
    with asyncio.Runner(loop_factory=fleet_loop) as loop_runner:
        return loop_runner.run(coro)


def _bench_processes(
    kind: str, redis_url: str, run: str, workers: int, *, secret: str = ""
) -> list[subprocess.Popen[bytes]]:
    """Stand-in hosts; `secret`, the run's key, in their environment (echo hosts build)."""
    env = {**os.environ, SECRET_ENV: secret}
    return [
        subprocess.Popen(
            [sys.executable, "-m", "runner.bench.fleet_hosts", kind, "--redis", redis_url,
             "--run", run, "--worker", str(worker)],
            env=env,
        )
        for worker in range(workers)
    ]  # fmt: skip


def _reap(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _figures(trips_s: list[float]) -> dict[str, float | None]:
    ordered = sorted(1000.0 * t for t in trips_s)
    return {"p50": _percentile(ordered, 0.50), "p99": _percentile(ordered, 0.99)}


def small_trace(trees: int) -> Trace:
    """Single-turn trees with short prompts and answers: one credit per tree arrival."""
    return generate_synthetic(
        SyntheticConfig(
            seed=11,
            trees=trees,
            main_turns=(1, 1),
            main_system_tokens=(64, 128),
            first_prompt_tokens=(16, 32),
            output_tokens=(8, 16),
            output_median_tokens=12,
            spawn_probability=0.0,
            fork_probability=0.0,
        )
    )


def _open_loop_trace(rate_per_s: float, duration_s: float) -> Trace:
    """Enough single-request trees for an open loop at `rate_per_s` to last `duration_s` (a
    fifth more, so arrivals never run out first; at most the generator's 100,000)."""
    return small_trace(min(100_000, int(rate_per_s * duration_s * 1.2)))


async def _started_fleet(
    trace: Trace, config: LiveConfig, *, redis_url: str, echo: bool = False
) -> tuple[FleetSender, Any]:
    """One local host process per client worker of `config`, answering (`echo`: hosts whose
    client answers at once, without the endpoint). Returns the sender and the processes."""
    run = uuid.uuid4().hex[:12]
    workers = config.engine.client_workers
    procs: Any
    sender = FleetSender([trace], config, redis_url=redis_url, run=run)
    if echo:
        procs = _bench_processes("echo", redis_url, run, workers, secret=sender.secret)
    else:
        procs = LocalHosts(redis_url, run, host_groups(workers, 1), secret=sender.secret)
    await sender.start(timeout_s=60)
    return sender, procs


def _close(procs: Any) -> None:
    if isinstance(procs, LocalHosts):
        procs.close()
    else:
        _reap(procs)


async def _replay(
    url: str,
    trace: Trace,
    replay: ReplayConfig,
    *,
    redis_url: str,
    hosts: int,
    echo: bool = False,
) -> tuple[dict[str, Any], float, FleetSender | None]:
    """One replay; returns its summary (with the machine's busy cores meanwhile, under
    `bench_cores_busy`), the orchestrator's CPU seconds during it, and the sender when the
    client workers were host processes."""
    engine = EngineConfig(client_workers=max(1, hosts) if hosts else 4)
    config = LiveConfig(
        endpoint=url, model="mock-model", replay=replay, engine=engine, snapshot_interval_s=1.0
    )
    sender = None
    procs = None
    if hosts:
        sender, procs = await _started_fleet(trace, config, redis_url=redis_url, echo=echo)
        sender.record_transit = True
    try:
        cpu0 = time.process_time()
        machine0 = _cpu_times()
        gc.freeze()  # as runner.run does around a replay
        try:
            result = await replay_live([trace], config, sender=sender)
        finally:
            gc.unfreeze()
        cpu_s = time.process_time() - cpu0
        result.summary["bench_cores_busy"] = _busy_cores(machine0, _cpu_times())
    finally:
        if procs is not None:
            _close(procs)
    return result.summary, cpu_s, sender


async def _engine_alone(trace: Trace, replay: ReplayConfig) -> float:
    """The orchestrator's CPU per credit with no transport: the live driver and the engine
    (scheduler, router, books, metrics) on the fleet's loop, every request answered at once."""
    config = LiveConfig(
        endpoint="http://127.0.0.1:9",  # never reached: the sender answers
        model="mock-model",
        replay=replay,
        engine=EngineConfig(client_workers=1),
        snapshot_interval_s=1.0,
    )
    cpu0 = time.process_time()
    gc.freeze()
    try:
        result = await replay_live([trace], config, sender=InstantSender())
    finally:
        gc.unfreeze()
    return round(1000.0 * (time.process_time() - cpu0) / max(1, int(result.summary["requests"])), 3)


def _floor(redis_url: str, rate_per_s: float, duration_s: float) -> list[float]:
    run = uuid.uuid4().hex[:12]
    procs = _bench_processes("floor", redis_url, run, 1)
    try:
        return _on_fleet_loop(
            floor_round_trips(redis_url, RunKeys(run), rate_per_s=rate_per_s, duration_s=duration_s)
        )
    finally:
        _reap(procs)


def bench_fleet(
    *,
    redis_url: str,
    rate_per_s: float = 2000.0,
    load_rate_per_s: float = 500.0,
    busy_rate_per_s: float = 8000.0,
    rate_duration_s: float = 10.0,
    closed_requests: int = 6000,
    concurrency: int = 64,
    host_counts: tuple[int, ...] = (1, 2, 4),
) -> FleetBenchResult:
    mock = MockServerConfig(cluster=ClusterConfig(workers=8, time_scale=0.0))
    with start_mock_server(mock, process=True) as server:
        url = server.url
        # 1. Open loop at `rate_per_s`, one host: the added round trip three ways, and the
        # orchestrator's CPU per credit beside in-process.
        trace = _open_loop_trace(rate_per_s, rate_duration_s)
        rate = ReplayConfig(
            timing="rate",
            rate_per_s=rate_per_s,
            concurrency=4096,
            duration_s=rate_duration_s,
            seed=1,
        )
        added: dict[str, dict[str, float | None]] = {}
        added["floor"] = _figures(_floor(redis_url, rate_per_s, rate_duration_s))
        fleet_summary, fleet_cpu, echoed = _on_fleet_loop(
            _replay(url, trace, rate, redis_url=redis_url, hosts=1, echo=True)
        )
        assert echoed is not None
        added["transport"] = _figures(echoed.transits_s)
        load = dataclasses.replace(rate, rate_per_s=load_rate_per_s)
        _, _, sender = _on_fleet_loop(_replay(url, trace, load, redis_url=redis_url, hosts=1))
        assert sender is not None
        added["under load"] = _figures(sender.transits_s)
        local_summary, local_cpu, _ = asyncio.run(
            _replay(url, trace, rate, redis_url=redis_url, hosts=0)
        )
        busy = dataclasses.replace(rate, rate_per_s=busy_rate_per_s)
        busy_trace = _open_loop_trace(busy_rate_per_s, rate_duration_s)
        busy_summary, busy_cpu, _ = _on_fleet_loop(
            _replay(url, busy_trace, busy, redis_url=redis_url, hosts=1, echo=True)
        )
        engine_alone = (
            _on_fleet_loop(_engine_alone(trace, rate)),
            _on_fleet_loop(_engine_alone(busy_trace, busy)),
        )
        # 2. Closed loop: throughput with 1, 2, 4 hosts beside in-process.
        closed_trace = small_trace(closed_requests)
        closed = ReplayConfig(
            timing="closed", concurrency=concurrency, max_requests=closed_requests, seed=1
        )
        req_per_s: dict[str, float] = {}
        cores_busy: dict[str, float] = {}
        for hosts in (0, *host_counts):
            replayed = _replay(url, closed_trace, closed, redis_url=redis_url, hosts=hosts)
            summary, _, _ = _on_fleet_loop(replayed) if hosts else asyncio.run(replayed)
            key = "in-process" if hosts == 0 else str(hosts)
            req_per_s[key] = round(float(summary["requests_per_s"]), 1)
            cores_busy[key] = summary["bench_cores_busy"]
    return FleetBenchResult(
        rate_per_s=rate_per_s,
        load_rate_per_s=load_rate_per_s,
        added_rtt_ms=added,
        cpu_ms_per_credit_fleet=round(1000.0 * fleet_cpu / max(1, fleet_summary["requests"]), 3),
        cpu_ms_per_credit_local=round(1000.0 * local_cpu / max(1, local_summary["requests"]), 3),
        busy_rate_per_s=busy_rate_per_s,
        cpu_ms_per_credit_busy=round(1000.0 * busy_cpu / max(1, busy_summary["requests"]), 3),
        cpu_ms_per_credit_engine=engine_alone,
        req_per_s=req_per_s,
        cores_busy=cores_busy,
        credits_measured=len(echoed.transits_s) + len(sender.transits_s),
    )


def _growth(series: list[dict[str, float]]) -> dict[str, float] | None:
    """All hosts' RSS, copies and copy bytes gained per minute over the run's second half
    (after the lanes filled): flat when copies are bounded by live sessions, rising with a
    leak."""
    if len(series) < 4:
        return None
    half = series[len(series) // 2 :]
    first, last = half[0], half[-1]
    minutes = (last["t_s"] - first["t_s"]) / 60.0
    if minutes <= 0:
        return None
    return {
        key: round((last[key] - first[key]) / minutes, 1)
        for key in ("rss_mib", "copies", "copy_mib")
    }


def _cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine so far (Linux /proc/stat), else zeros."""
    try:
        with open("/proc/stat") as stat:
            fields = [float(v) for v in stat.readline().split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _busy_cores(before: tuple[float, float], after: tuple[float, float]) -> float:
    total = after[1] - before[1]
    if total <= 0:
        return 0.0
    return round((after[0] - before[0]) / total * (os.cpu_count() or 1), 2)


def _percentile(ordered: list[float], q: float) -> float | None:
    if not ordered:
        return None
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


if __name__ == "__main__":  # pragma: no cover - a manual entry point
    print(bench_fleet(redis_url=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/5")))


def bench_fleet_rss(
    *, redis_url: str, duration_s: float = 60.0, hosts: int = 4, concurrency: int = 32
) -> dict[str, Any]:
    """Each host's resident memory at the start and end of a long run, legacy beside
    spawn-pin (the same synthetic agentic workload: big contexts, many SPAWN subagents), with
    the session copies the hosts still hold. Legacy's stale copies are real memory now."""
    # Short trees, so lanes finish theirs and start new ones many times within the run: a
    # steady state where copies of live sessions stay level unless they leak.
    trace = generate_synthetic(
        SyntheticConfig(
            seed=5, trees=400, spawn_probability=0.5, main_turns=(6, 12), subagent_turns=(2, 6)
        )
    )
    replay = ReplayConfig(concurrency=concurrency, duration_s=duration_s, speedup=50.0, seed=3)
    out: dict[str, Any] = {}
    mock = MockServerConfig(cluster=ClusterConfig(workers=8, time_scale=0.0))
    with start_mock_server(mock, process=True) as server:
        for policy in (Policy.LEGACY, Policy.SPAWN_PIN):
            out[policy.value] = _on_fleet_loop(
                _rss_run(server.url, trace, replay, policy, redis_url=redis_url, hosts=hosts)
            )
    return out


async def _rss_run(
    url: str,
    trace: Trace,
    replay: ReplayConfig,
    policy: Policy,
    *,
    redis_url: str,
    hosts: int,
) -> dict[str, Any]:
    config = LiveConfig(
        endpoint=url,
        model="mock-model",
        replay=replay,
        engine=EngineConfig(client_workers=hosts, policy=policy),
    )
    sender, procs = await _started_fleet(trace, config, redis_url=redis_url)
    start = {w: beat["rss_bytes"] for w, beat in sender.heartbeats.items()}
    last: dict[int, dict[str, Any]] = {}
    series: list[dict[str, float]] = []
    started = time.monotonic()

    async def sample() -> None:
        while True:
            await asyncio.sleep(2.0)
            last.update(sender.heartbeats)
            beats = list(last.values())
            series.append(
                {
                    "t_s": round(time.monotonic() - started, 1),
                    "rss_mib": sum(b["rss_bytes"] for b in beats) / 2**20,
                    "copies": sum(b["copies"] for b in beats),
                    "copy_mib": sum(b["copy_bytes"] for b in beats) / 2**20,
                }
            )

    sampler = asyncio.create_task(sample())
    try:
        summary = (await replay_live([trace], config, sender=sender)).summary
    finally:
        sampler.cancel()
        _close(procs)
    mib = 1 / (1024 * 1024)
    return {
        "growth_second_half_per_min": _growth(series),
        "requests": summary["requests"],
        "worker_switches": summary["worker_switches"],
        "orphaned_session_copies": summary["orphaned_session_copies"],
        "hosts": [
            {
                "worker": w,
                "rss_start_mib": round(start.get(w, 0) * mib, 1),
                "rss_end_mib": round(last.get(w, {}).get("rss_bytes", 0) * mib, 1),
                "copies_held": last.get(w, {}).get("copies"),
                "copy_mib": round(last.get(w, {}).get("copy_bytes", 0) * mib, 2),
            }
            for w in range(hosts)
        ],
    }
