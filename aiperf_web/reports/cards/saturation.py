"""Who limits a run: the client (its CPU, its event loop) or, on a simulated run, the cluster.

Pure functions over a run's stored samples; no I/O. The run page's report and its live key
figures name the limit so that latencies that grew because the load generator could not keep
up, or because the simulated workers queued more than they served, are not read as the
server's.

The client. Each live snapshot carries `client` (runner/wallclock/load.py): the client
process's CPU (% of one core) and how late its event loop woke up; client workers hosted as
processes (runner/fleet) report each process's CPU seconds, turned here into a share of the
wall time between samples, and how late their own loop woke up over their last heartbeat
(the same probe; a host is named by its `host`). aiperf warns when its workers pass 85 % CPU:
past that a Python client answers late (streams read late, requests sent late) and the
latencies include its own delay. A loop that wakes 100 ms late says the same from the other side.

The simulated cluster. A simulated run's schedule spans `duration_s`; when its workers serve
less than it sends, requests queue and the virtual clock runs on long after the schedule (a
30 s demo took 96 s of virtual time with TTFT p99 at 49 s). Either sign names the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from aiperf_web.live.selectors import MAX_HISTORY_POINTS, thinned_samples
from aiperf_web.runs.models import Run

# aiperf's own warning threshold for its worker processes' CPU.
CPU_WARN_PCT = 85.0
# A wake-up this late, at its worst over a snapshot: requests and stream reads wait as long.
LAG_WARN_MS = 100.0
# At least this many snapshots past a threshold before it is named (one busy second is noise).
MIN_SAMPLES = 3
# The simulated run's virtual end beyond its schedule by this factor: the cluster queued.
OVERRUN = 1.5
# TTFT p99 of an interval this many times the first answered interval's, and at least 1 s.
TTFT_GROWTH = 5.0
TTFT_FLOOR_MS = 1000.0

Limit = Literal["client", "cluster"]


@dataclass(frozen=True, slots=True)
class LoadPoint:
    """One sample as the saturation check reads it."""

    t_s: float
    wall_s: float | None
    client: Mapping[str, Any] | None  # the snapshot's `client` (in-process client)
    hosts: Sequence[Mapping[str, Any]] = ()  # client-worker processes: host, cpu_s, loop_lag_ms
    ttft_p99_ms: Sequence[float] = field(default_factory=tuple)  # closed intervals' p99s


class Saturation(TypedDict):
    limits: list[Limit]  # what limits the run, if anything: [] = nothing seen
    warnings: list[str]  # one sentence per limit, for people
    cpu_peak_pct: float | None  # the busiest client process, % of one core
    lag_peak_ms: float | None  # the latest wake-up of a client loop (in-process or a host's)
    samples_over: int  # snapshots past a client threshold


def load_point(t_s: float, data: Mapping[str, Any]) -> LoadPoint:
    recent = data.get("recent") or []
    p99s = [
        float(p["ttft_ms"]["p99"])
        for p in recent
        if isinstance(p, Mapping)
        and p.get("requests")
        and isinstance(p.get("ttft_ms"), Mapping)
        and p["ttft_ms"].get("p99") is not None
    ]
    hosts = data.get("hosts")
    return LoadPoint(
        t_s=float(t_s),
        wall_s=data.get("wall_s"),
        client=data.get("client") if isinstance(data.get("client"), Mapping) else None,
        hosts=[h for h in hosts if isinstance(h, Mapping)] if isinstance(hosts, list) else (),
        ttft_p99_ms=tuple(p99s),
    )


def _host_cpu(points: Sequence[LoadPoint]) -> list[tuple[str, float]]:
    """Each client-worker process's CPU share between consecutive samples: (host, %)."""
    out: list[tuple[str, float]] = []
    last: dict[str, tuple[float, float]] = {}
    for p in points:
        if p.wall_s is None:
            continue
        seen: dict[str, float] = {}
        for h in p.hosts:
            if h.get("host") and isinstance(h.get("cpu_s"), int | float):
                seen[str(h["host"])] = max(seen.get(str(h["host"]), 0.0), float(h["cpu_s"]))
        for host, cpu_s in seen.items():
            prev = last.get(host)
            if prev is not None and p.wall_s - prev[0] > 0.2 and cpu_s >= prev[1]:
                out.append((host, 100.0 * (cpu_s - prev[1]) / (p.wall_s - prev[0])))
            last[host] = (p.wall_s, cpu_s)
    return out


def _host_lag(points: Sequence[LoadPoint]) -> list[tuple[str, float]]:
    """Each sample's worst loop lag per client-worker process: (host, ms). A host's figure
    counts once per heartbeat: a sample that sees the same beat again (the host is slower
    to beat than samples come, or lost and kept as last reported) does not count it twice."""
    out: list[tuple[str, float]] = []
    last: dict[str, tuple[Any, Any]] = {}
    for p in points:
        seen: dict[str, float] = {}
        beats: dict[str, tuple[Any, Any]] = {}
        for h in p.hosts:
            lag = h.get("loop_lag_ms")
            if h.get("lost_at_s") is not None or not h.get("host"):
                continue
            if not isinstance(lag, int | float):
                continue
            name = str(h["host"])
            seen[name] = max(seen.get(name, 0.0), float(lag))
            beats.setdefault(name, (h.get("cpu_s"), lag))
        for host, lag_ms in seen.items():
            if last.get(host) != beats[host]:
                out.append((host, lag_ms))
            last[host] = beats[host]
    return out


def _fmt_s(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def saturation_assess(
    points: Sequence[LoadPoint], *, simulated: bool, duration_s: float | None
) -> Saturation:
    limits: list[Limit] = []
    warnings: list[str] = []
    cpus = [
        float(p.client["cpu_pct"])
        for p in points
        if p.client and p.client.get("cpu_pct") is not None
    ]
    lags = [
        float(p.client["loop_lag_ms"])
        for p in points
        if p.client and p.client.get("loop_lag_ms") is not None
    ]
    hosts = _host_cpu(points)
    host_lags = _host_lag(points)
    busy_hosts = sorted({h for h, pct in hosts if pct >= CPU_WARN_PCT})
    late_hosts = sorted({h for h, lag in host_lags if lag >= LAG_WARN_MS})
    over_cpu = sum(1 for c in cpus if c >= CPU_WARN_PCT) + sum(
        1 for _, pct in hosts if pct >= CPU_WARN_PCT
    )
    over_lag = sum(1 for lag in lags if lag >= LAG_WARN_MS) + sum(
        1 for _, lag in host_lags if lag >= LAG_WARN_MS
    )
    cpu_peak = max([*cpus, *(pct for _, pct in hosts)], default=None)
    lag_peak = max([*lags, *(lag for _, lag in host_lags)], default=None)
    if not simulated and (over_cpu >= MIN_SAMPLES or over_lag >= MIN_SAMPLES):
        limits.append("client")
        parts = []
        if over_cpu >= MIN_SAMPLES and cpu_peak is not None:
            where = f" ({', '.join(busy_hosts[:4])})" if busy_hosts else ""
            parts.append(
                f"its process{'es' if len(busy_hosts) > 1 else ''}{where} used up to "
                f"{cpu_peak:.0f} % of a core, past {CPU_WARN_PCT:.0f} % in {over_cpu} snapshots "
                f"(aiperf warns past {CPU_WARN_PCT:.0f} %)"
            )
        if over_lag >= MIN_SAMPLES and lag_peak is not None:
            where = f" ({', '.join(late_hosts[:4])})" if late_hosts else ""
            loops = "event loops" if len(late_hosts) > 1 else "event loop"
            parts.append(
                f"its {loops}{where} woke up to {lag_peak:.0f} ms late, past "
                f"{LAG_WARN_MS:.0f} ms in {over_lag} snapshots"
            )
        warnings.append(
            "The client, not the server, limits this run: " + "; ".join(parts) + ". Requests "
            "went out and streams were read late, so the latencies include the client's own "
            "delay: fewer lanes per client worker, more client workers or client worker "
            "processes."
        )
    if simulated and points:
        end_s = points[-1].t_s
        p99s = [v for p in points for v in p.ttft_p99_ms]
        first = next((v for v in p99s if v > 0), None)
        peak = max(p99s, default=None)
        overran = bool(duration_s) and end_s > OVERRUN * float(duration_s or 0)
        grew = (
            first is not None
            and peak is not None
            and peak >= TTFT_FLOOR_MS
            and peak >= TTFT_GROWTH * first
        )
        if overran or grew:
            limits.append("cluster")
            facts = []
            if overran:
                facts.append(
                    f"the {_fmt_s(float(duration_s or 0))} schedule took {_fmt_s(end_s)} of "
                    "virtual time to serve"
                )
            if grew and first is not None and peak is not None:
                facts.append(
                    f"TTFT p99 rose from {first:,.0f} ms in the first answered interval to "
                    f"{peak:,.0f} ms"
                )
            warnings.append(
                "The simulated cluster is the bottleneck: " + " and ".join(facts) + ". Its "
                "workers served less than the replay sent, so requests queued: these "
                "latencies measure the queue. Fewer lanes, a lower speedup or more simulated "
                "workers give figures of the cluster under load it can serve."
            )
    return {
        "limits": limits,
        "warnings": warnings,
        "cpu_peak_pct": None if cpu_peak is None else round(cpu_peak, 1),
        "lag_peak_ms": None if lag_peak is None else round(lag_peak, 1),
        "samples_over": max(over_cpu, over_lag),
    }


# -- the card's read of the stored series --------------------------------------------------


def run_load_points(*, run_obj: Run, max_points: int = MAX_HISTORY_POINTS) -> list[LoadPoint]:
    """What the saturation check reads of each sample (saturation_assess), as JSON paths:
    the client's load, the client-worker processes, the latest latency intervals."""
    thinned = thinned_samples(run_obj=run_obj, max_points=max_points)
    if thinned is None:
        return []
    rows = thinned[0].values_list(
        "t_s", "data__wall_s", "data__client", "data__hosts", "data__recent"
    )
    return [
        load_point(t_s, {"wall_s": wall_s, "client": client, "hosts": hosts, "recent": recent})
        for t_s, wall_s, client, hosts, recent in rows
    ]
