"""What a run reports, the same way from both clocks: snapshots, the summary, records, the sink.

Owns the JSON shapes that cross the engine's boundary (the live page, the service's storage,
the CLI's files) and the one function that builds a snapshot from the composed engine and its
metrics. It must not read a clock or do I/O beyond the process's own RSS: drivers pass times.

Snapshots are cumulative (a lost one costs only freshness) and compact: per-worker values are
parallel arrays, the migration matrix is sparse and capped, latency points of the last few
intervals ride along so a viewer that missed a message still gets every chart point.
"""

from __future__ import annotations

import os
import resource
from typing import Any, Final, Literal, NotRequired, Protocol, TypedDict

from runner.affinity.placement import PlacementFigures
from runner.ending import EndingJson, RunStatus
from runner.metrics import LatencyTimeSeries, RequestRecord, RunMetrics, SeriesPoint
from runner.metrics.aggregate import RequestStats
from runner.metrics.histogram import PercentileSummary
from runner.metrics.records import RequestRecordJson
from runner.replay.engine import Engine
from runner.servermetrics.shapes import ServerMetricsSummary, ServerMetricsView

__all__ = [
    "LATENCY_KEYS",
    "MIGRATION_PAIRS_SHOWN",
    "SUMMARY_KEYS",
    "ClientLoad",
    "ClientWorkerArrays",
    "InferenceWorkerArrays",
    "ListSink",
    "RecordDict",
    "Sink",
    "Snapshot",
    "SnapshotBuilder",
    "Summary",
    "drain_report",
    "summary_figures",
]

RecordDict = RequestRecordJson

# The summary's stable keys (docs/product.md §6), in the order a report shows them: counts first,
# then the latency percentiles.
SUMMARY_KEYS: Final = (
    "requests",
    "sessions",
    "trees",
    "trees_completed",
    "sessions_multi_worker",
    "worker_switches",
    "orphaned_session_copies",
    "peak_session_copies",
    "context_rebuilds",
    "prefix_cache_hit_ratio",
    "affinity_binds",
    "affinity_closes",
    "early_closes",
    "errors",
)
LATENCY_KEYS: Final = ("ttft_ms", "itl_ms", "latency_ms")

# The from→to pairs a snapshot carries, largest first: 64 workers could make 4,032 pairs,
# which alone would break the 16 KB budget; the heatmap is read for its big cells.
MIGRATION_PAIRS_SHOWN: Final = 256
_RECENT_POINTS: Final = 5  # latency points repeated in each snapshot (lost-message tolerance)
_PAGE_BYTES: Final = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class Percentiles(TypedDict):
    p50: float | None
    p90: float | None
    p99: float | None


class ClientWorkerArrays(TypedDict):
    """Per client worker, index = worker id."""

    in_flight: list[int]
    completed: list[int]
    errors: list[int]
    sticky_entries: list[int]
    session_copies: list[int]
    orphaned_copies: list[int]
    cached_bytes: list[int]


class InferenceWorkerArrays(TypedDict):
    """Per inference worker the endpoint (or the simulated cluster) reported, by its id."""

    ids: list[int]
    requests: list[int]
    cached_token_ratio: list[float | None]
    bound_keys: list[int] | None  # None when the target does not report bindings


class RoutingCounters(TypedDict):
    sessions: int
    trees: int
    sessions_multi_worker: int
    worker_switches: int
    session_copies: int
    peak_session_copies: int
    orphaned_session_copies: int
    peak_orphaned_session_copies: int
    context_rebuilds: int


class AffinityEvents(TypedDict):
    binds: int
    closes: int
    early_closes: int
    keys_bound: int


class Snapshot(TypedDict):
    """One cumulative view of a run, about once a second (live) or per simulated interval."""

    t_s: float  # run time (virtual in simulation)
    wall_s: float  # wall-clock seconds since the run started
    progress: float  # 0..1 of the nearest stop condition
    eta_s: float | None  # wall seconds left, estimated from progress so far
    issued: int
    in_flight: int
    requests: int  # counted (non-warmup) requests that ended
    completed: int
    errors: int
    errors_by_category: dict[str, int]
    cut_by_stop: int  # in flight at the stop and cut by it: not errors (RequestStats)
    requests_per_s: float | None
    output_tokens_per_s: float | None
    goodput_per_s: float | None
    prefix_cache_hit_ratio: float | None
    ttft_ms: Percentiles
    itl_ms: Percentiles
    latency_ms: Percentiles
    recent: list[SeriesPoint]  # the last few closed intervals: percentiles over time
    routing: RoutingCounters
    affinity: AffinityEvents
    client_workers: ClientWorkerArrays
    rss_bytes: int  # this process: every in-process client worker shares it
    migrations: list[list[int]]  # [[from, to, count], ...], largest first, capped
    migrations_total: int
    inference_workers: InferenceWorkerArrays
    state: dict[str, int]  # per-session and per-tree state the engine holds: flat unless leaking
    # Where the server put trees (serving worker per request); None until it reports one.
    placement: PlacementFigures | None
    server_metrics: ServerMetricsView | None  # the endpoint's /metrics, latest scrape (live)
    # Client workers hosted as processes (runner/fleet): each as its host last reported it
    # (host, RSS, CPU, event-loop lag, in flight, session copies held, lost_at_s); None when
    # in-process.
    hosts: list[dict[str, Any]] | None
    # The client's own load (live runs: runner/wallclock/load.py): its process's CPU and its
    # event loop's lag since the last snapshot. Absent from simulated runs and older snapshots.
    client: NotRequired[ClientLoad | None]


class ClientLoad(TypedDict):
    """The client process between two snapshots (measured by runner/wallclock/load.py)."""

    cpu_pct: float | None  # process CPU time over wall time, % of one core (None: first read)
    loop_lag_ms: float | None  # the latest a wake-up of the loop came beyond its due time
    loop_lag_mean_ms: float | None


class Summary(TypedDict, total=False):
    """The final figures; docs/product.md §6 keys at top level (both clocks), more beside them."""

    requests: int
    sessions: int
    trees: int
    trees_started: int
    trees_completed: int
    trees_cut: int  # started, then stopped by a stop condition before draining
    trees_skipped: int  # nothing left to send after t*
    achieved_tree_rate_per_s: float | None
    arrival_wait_ms: ArrivalWait | None  # rate timing only
    sessions_multi_worker: int
    worker_switches: int
    orphaned_session_copies: int
    peak_session_copies: int
    context_rebuilds: int
    prefix_cache_hit_ratio: float | None
    affinity_binds: int
    affinity_closes: int
    early_closes: int
    errors: int
    cut_by_stop: int  # in flight at the stop and cut by it: not errors, not against goodput
    ttft_ms: PercentileSummary
    itl_ms: PercentileSummary
    latency_ms: PercentileSummary
    status: RunStatus
    stopped_reason: str | None  # ended_by's detail when the run did not succeed
    ended_by: EndingJson  # why it ended (runner.ending): by, detail, early
    unavailable: dict[str, str]  # metric -> why the target could not provide it
    length_scale: float  # the factor asked or fitted, when not 1 (blocks round it down)
    goodput: Goodput
    schedule_lag_ms: Percentiles
    inter_chunk_ms: Percentiles  # over every inter-chunk gap of the successful requests
    inter_chunk_samples: int
    by_depth: dict[str, GroupFigures]  # "0", "1", "2", "3+"
    by_branch_mode: dict[str, GroupFigures]  # "root", "fork", "spawn"
    drain: Drain
    # Trees split across inference workers, child requests on their root's worker, requests
    # off their affinity key's worker; None when the server reports no serving worker.
    placement: PlacementFigures | None
    inference_worker_ids: dict[str, str]  # index -> the server's worker id, when renumbered
    server_metrics: ServerMetricsSummary  # the endpoint's /metrics over the run (live)
    # Client workers hosted as processes: the hosts' last reports, credits and results
    # counted, late answers, and each lost worker with what it owed (runner/fleet).
    fleet: dict[str, Any]
    client_workers_lost: list[dict[str, float]]  # {"worker", "at_s"}, in order


class Drain(TypedDict):
    """What the client still held, and the server still had bound, when the run ended.

    Orphaned copies are the leak: histories of sessions that ended, or that another worker
    served since, which nothing will ever read again. Copies of sessions cut by the stop are
    current state (the run could have gone on), reported but not a leak; so are affinity keys
    of cut trees, which are left to the server's TTL because their finality was unknown.
    """

    verdict: Literal["drained", "leaked"]
    orphaned_copies: int
    orphaned_copies_by_worker: list[int]
    session_copies: int
    session_copies_by_worker: list[int]
    cached_bytes_by_worker: list[int]
    copies_of_cut_sessions: int
    affinity_keys_bound: int  # the client's books: bound and never closed
    affinity_keys_bound_server: int | None  # what the target still held (simulated cluster)
    early_closes: int
    message: str


class ArrivalWait(TypedDict):
    """Rate timing: how long arrivals waited for a slot under the concurrency cap."""

    p50: float | None
    p99: float | None
    waited: int  # arrivals that found every slot taken
    never_started: int  # arrivals still waiting when the run stopped


class Goodput(TypedDict):
    slo_ms: dict[str, float]  # the thresholds set; a request is good when it meets them all
    good_requests: int
    good_ratio: float | None
    goodput_per_s: float | None


class GroupFigures(TypedDict):
    """Latency and cache figures of one slice of the requests (a depth, a branch mode)."""

    requests: int
    errors: int
    cut_by_stop: int
    prefix_cache_hit_ratio: float | None
    ttft_ms: Percentiles
    itl_ms: Percentiles
    latency_ms: Percentiles


class Sink(Protocol):
    """Where a run reports while it goes. Called on the thread (and loop) that runs it."""

    def snapshot(self, snapshot: Snapshot) -> None: ...

    def records(self, batch: list[RecordDict]) -> None:
        """Per-request records in arrival order, in batches (one per snapshot or so)."""

    def log(self, level: Literal["info", "warning", "error"], message: str) -> None:
        """A line for the run's log tail (warnings such as 'no cached tokens reported')."""


class ListSink:
    """Keeps everything in memory: for tests and small scripts."""

    def __init__(self) -> None:
        self.snapshots: list[Snapshot] = []
        self.record_list: list[RecordDict] = []
        self.lines: list[tuple[str, str]] = []

    def snapshot(self, snapshot: Snapshot) -> None:
        self.snapshots.append(snapshot)

    def records(self, batch: list[RecordDict]) -> None:
        self.record_list.extend(batch)

    def log(self, level: Literal["info", "warning", "error"], message: str) -> None:
        self.lines.append((level, message))


def summary_figures(metrics: RunMetrics, *, elapsed_s: float) -> Summary:
    """The summary keys both clocks derive from their metrics alone: goodput, schedule lag,
    and latency by tree depth and branch mode (where FORK and SPAWN children differ)."""
    overall = metrics.overall
    return {
        "goodput": {
            "slo_ms": metrics.slo_ms,
            "good_requests": overall.good,
            # Over the requests that ran their course: the stop's cuts are not held against it.
            "good_ratio": _round(overall.good / overall.finished, 4) if overall.finished else None,
            "goodput_per_s": _round(metrics.throughput(elapsed_s)["goodput_per_s"]),
        },
        "schedule_lag_ms": _percentiles(metrics.schedule_lag_ms.summary()),
        # Over every inter-chunk gap (itl_ms is over each request's mean gap).
        "inter_chunk_ms": _percentiles(metrics.inter_chunk_ms.summary()),
        "inter_chunk_samples": metrics.inter_chunk_ms.count,
        "by_depth": {
            label: _group(stats) for label, stats in metrics.by_depth.items() if stats.requests
        },
        "by_branch_mode": {
            mode: _group(stats) for mode, stats in metrics.by_branch_mode.items() if stats.requests
        },
    }


def drain_report(engine: Engine, *, server_bound_keys: int | None = None) -> Drain:
    """The drain check (see Drain), from the engine's books at the end of a run."""
    workers = engine.caches.workers
    orphans = [w.orphans for w in workers]
    copies = [w.copies for w in workers]
    orphaned, held = sum(orphans), sum(copies)
    keys = engine.ledger.keys_bound
    early = engine.ledger.early_closes
    if orphaned:
        where = ", ".join(f"worker {i}: {n}" for i, n in enumerate(orphans) if n)
        verdict: Literal["drained", "leaked"] = "leaked"
        message = f"{orphaned} orphaned session copies left ({where})"
    else:
        verdict = "drained"
        message = "no orphaned session copies"
    if held - orphaned:
        message += f"; {held - orphaned} copies belong to sessions cut by the stop"
    if keys:
        message += f"; {keys} affinity keys left bound (trees cut by the stop: the TTL frees them)"
    return {
        "verdict": verdict,
        "orphaned_copies": orphaned,
        "orphaned_copies_by_worker": orphans,
        "session_copies": held,
        "session_copies_by_worker": copies,
        "cached_bytes_by_worker": [w.bytes for w in workers],
        "copies_of_cut_sessions": held - orphaned,
        "affinity_keys_bound": keys,
        "affinity_keys_bound_server": server_bound_keys,
        "early_closes": early,
        "message": message,
    }


def _group(stats: RequestStats) -> GroupFigures:
    return {
        "requests": stats.requests,
        "errors": stats.errors,
        "cut_by_stop": stats.cut_by_stop,
        "prefix_cache_hit_ratio": _round(stats.prefix_cache_hit_ratio, 4),
        "ttft_ms": _percentiles(stats.ttft_ms.summary()),
        "itl_ms": _percentiles(stats.itl_ms.summary()),
        "latency_ms": _percentiles(stats.latency_ms.summary()),
    }


def _percentiles(summary: PercentileSummary) -> Percentiles:
    return {
        "p50": _round(summary["p50"]),
        "p90": _round(summary["p90"]),
        "p99": _round(summary["p99"]),
    }


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def process_rss_bytes() -> int:
    """Resident set size now (Linux /proc), else the peak the kernel reports."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * _PAGE_BYTES
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class SnapshotBuilder:
    """Builds snapshots for one run; keeps the latency time series between them."""

    def __init__(
        self,
        engine: Engine,
        metrics: RunMetrics,
        *,
        interval_s: float,
        duration_s: float | None,
        max_requests: int | None,
        max_trees: int | None,
    ) -> None:
        self.engine = engine
        self.metrics = metrics
        self.series = LatencyTimeSeries(interval_s=interval_s, max_points=_RECENT_POINTS)
        self.duration_s = duration_s
        self.max_requests = max_requests
        self.max_trees = max_trees

    def progress(self, t_s: float) -> float:
        scheduler = self.engine.scheduler
        fractions = [0.0]
        if self.duration_s:
            fractions.append(t_s / self.duration_s)
        if self.max_requests:
            fractions.append(scheduler.issued / self.max_requests)
        if self.max_trees:
            fractions.append(scheduler.trees_started / self.max_trees)
        return min(1.0, max(fractions))

    def build(
        self,
        *,
        t_s: float,
        wall_s: float,
        in_flight: int,
        bound_keys: list[int] | None = None,
        server_metrics: ServerMetricsView | None = None,
        hosts: list[dict[str, Any]] | None = None,
        client: ClientLoad | None = None,
        final: bool = False,
    ) -> Snapshot:
        engine = self.engine
        metrics = self.metrics
        overall = metrics.overall
        if final:
            self.series.flush()
        else:
            self.series.advance(t_s)
        progress = 1.0 if final else self.progress(t_s)
        eta_s = None
        if 0 < progress < 1:
            eta_s = round(wall_s * (1 - progress) / progress, 1)
        elif progress >= 1:
            eta_s = 0.0
        throughput = metrics.throughput(t_s)
        percentiles = metrics.summary_percentiles()
        routing = engine.routing_summary()
        workers = engine.worker_snapshot()
        clients = metrics.client_workers()
        k = len(workers["in_flight"])
        inference = metrics.inference_workers()
        migrations = sorted(
            ([a, b, n] for (a, b), n in engine.caches.migrations.items()),
            key=lambda pair: -pair[2],
        )
        return {
            "t_s": round(t_s, 3),
            "wall_s": round(wall_s, 3),
            "progress": round(progress, 4),
            "eta_s": eta_s,
            "issued": engine.scheduler.issued,
            "in_flight": in_flight,
            "requests": overall.requests,
            "completed": overall.completed,
            "errors": overall.errors,
            "errors_by_category": dict(overall.errors_by_category),
            "cut_by_stop": overall.cut_by_stop,
            "requests_per_s": _round(throughput["requests_per_s"]),
            "output_tokens_per_s": _round(throughput["output_tokens_per_s"]),
            "goodput_per_s": _round(throughput["goodput_per_s"]),
            "prefix_cache_hit_ratio": _round(metrics.prefix_cache_hit_ratio, 4),
            "ttft_ms": _percentiles(percentiles["ttft_ms"]),
            "itl_ms": _percentiles(percentiles["itl_ms"]),
            "latency_ms": _percentiles(percentiles["latency_ms"]),
            "recent": self.series.points,
            "routing": {
                "sessions": routing["sessions"],
                "trees": routing["trees"],
                "sessions_multi_worker": routing["sessions_multi_worker"],
                "worker_switches": routing["worker_switches"],
                "session_copies": routing["session_copies"],
                "peak_session_copies": routing["peak_session_copies"],
                "orphaned_session_copies": routing["orphaned_session_copies"],
                "peak_orphaned_session_copies": routing["peak_orphaned_session_copies"],
                "context_rebuilds": routing["context_rebuilds"],
            },
            "affinity": {
                "binds": routing["affinity_binds"],
                "closes": routing["affinity_closes"],
                "early_closes": routing["early_closes"],
                "keys_bound": routing["affinity_keys_bound_at_end"],
            },
            "client_workers": {
                "in_flight": workers["in_flight"],
                "completed": _pad(clients["completed"], k),
                "errors": _pad(clients["errors"], k),
                "sticky_entries": workers["sticky_sessions"],
                "session_copies": workers["session_copies"],
                "orphaned_copies": workers["orphans"],
                "cached_bytes": workers["session_bytes"],
            },
            "rss_bytes": process_rss_bytes(),
            "migrations": migrations[:MIGRATION_PAIRS_SHOWN],
            "migrations_total": sum(pair[2] for pair in migrations),
            "inference_workers": {
                "ids": inference["ids"],
                "requests": inference["requests"],
                "cached_token_ratio": [
                    None if reported == 0 else round(cached / reported, 4)
                    for cached, reported in zip(
                        inference["cached_tokens"],
                        inference["cache_reported_prompt_tokens"],
                        strict=True,
                    )
                ],
                "bound_keys": None
                if bound_keys is None
                else [bound_keys[i] if 0 <= i < len(bound_keys) else 0 for i in inference["ids"]],
            },
            "state": engine.state_sizes(),
            "placement": routing["placement"],
            "server_metrics": server_metrics,
            "hosts": hosts,
            "client": client,
        }

    def observe(self, record: RequestRecord) -> None:
        """Feed one RequestRecord to the latency time series (drivers call it per record)."""
        self.series.record(record)


def _pad(values: list[int], length: int) -> list[int]:
    return values + [0] * (length - len(values)) if len(values) < length else values[:length]
