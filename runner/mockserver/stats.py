"""The mock server's own counters and the two views of them: `/stats` JSON and `/metrics`.

Owns what the HTTP layer counts (answers by status, faults actually injected, broken streams,
tokens) and the Prometheus text rendering of those counters plus the cluster's per-worker
stats. Counting only: it decides nothing and reads no clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, NotRequired, TypedDict

from runner.cluster import ClusterStats
from runner.mockserver.config import FAULT_KINDS, FaultKind

__all__ = ["ProcessStats", "ServerCounters", "ServerStats", "StatsBody", "render_prometheus"]


class ServerStats(TypedDict):
    requests: dict[str, int]  # completion-route answers by HTTP status ("200", "429", ...)
    faults_injected: dict[str, int]  # by kind; every kind present, 0 when none
    streams_broken: int  # answers cut short by the server: disconnect faults, worker down
    worker_down_failures: int  # answers failed because their worker was taken down
    client_disconnects: int  # answers the client abandoned before their end
    prompt_tokens: int  # of requests the cluster served
    cached_tokens: int
    completion_tokens: int  # planned output of requests the cluster served
    # Timed streams: tokens that went out in one chunk with the token before them because
    # the server woke late (a share of completion_tokens well above 0 means it was busy).
    coalesced_tokens: int
    in_flight: int  # answers still being written


class ProcessStats(TypedDict):
    """One process of a multi-process mock (`--processes N`)."""

    role: Literal["state", "http"]  # the one state owner, or an HTTP front
    pid: int
    cpu_s: float  # its CPU time (user + system)
    requests: int  # completion requests it answered (a front; 0 for the state owner)


class StatsBody(TypedDict):
    """`GET /stats`."""

    model: str
    uptime_s: float
    # This server's CPU time (user + system): with --processes N, the sum over its processes.
    process_cpu_s: float
    server: ServerStats  # with --processes N, the fronts' counters summed
    cluster: ClusterStats
    processes: NotRequired[list[ProcessStats]]  # with --processes N only: each process


class ServerCounters:
    """Mutable counters, touched only from the server's event loop."""

    __slots__ = (
        "cached_tokens",
        "client_disconnects",
        "coalesced_tokens",
        "completion_tokens",
        "faults",
        "in_flight",
        "prompt_tokens",
        "requests",
        "streams_broken",
        "worker_down_failures",
    )

    def __init__(self) -> None:
        self.requests: dict[int, int] = {}
        self.faults: dict[FaultKind, int] = dict.fromkeys(FAULT_KINDS, 0)
        self.streams_broken = 0
        self.worker_down_failures = 0
        self.client_disconnects = 0
        self.prompt_tokens = 0
        self.cached_tokens = 0
        self.completion_tokens = 0
        self.coalesced_tokens = 0
        self.in_flight = 0

    def answered(self, status: int) -> None:
        self.requests[status] = self.requests.get(status, 0) + 1

    def snapshot(self) -> ServerStats:
        return ServerStats(
            requests={str(status): n for status, n in sorted(self.requests.items())},
            faults_injected={kind: n for kind, n in self.faults.items()},
            streams_broken=self.streams_broken,
            worker_down_failures=self.worker_down_failures,
            client_disconnects=self.client_disconnects,
            prompt_tokens=self.prompt_tokens,
            cached_tokens=self.cached_tokens,
            completion_tokens=self.completion_tokens,
            coalesced_tokens=self.coalesced_tokens,
            in_flight=self.in_flight,
        )


def render_prometheus(stats: StatsBody) -> str:
    """Prometheus text exposition (version 0.0.4) of the server and cluster stats."""
    server, cluster = stats["server"], stats["cluster"]
    out: list[str] = []

    def family(name: str, kind: str, help_text: str, samples: Iterable[tuple[str, float]]) -> None:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(f"{name}{labels} {_number(value)}" for labels, value in samples)

    family(
        "mock_requests_total",
        "counter",
        "Completion requests answered, by HTTP status.",
        ((f'{{status="{status}"}}', n) for status, n in server["requests"].items()),
    )
    family(
        "mock_faults_injected_total",
        "counter",
        "Faults injected, by kind.",
        ((f'{{kind="{kind}"}}', n) for kind, n in server["faults_injected"].items()),
    )
    totals = (
        ("mock_prompt_tokens_total", "Prompt tokens of served requests.", "prompt_tokens"),
        (
            "mock_cached_tokens_total",
            "Prompt tokens served from the prefix cache.",
            "cached_tokens",
        ),
        ("mock_completion_tokens_total", "Output tokens of served requests.", "completion_tokens"),
        ("mock_coalesced_tokens_total", "Tokens sent late, sharing a chunk.", "coalesced_tokens"),
        ("mock_streams_broken_total", "Answers cut short by the server.", "streams_broken"),
        (
            "mock_worker_down_failures_total",
            "Answers failed by a worker going down.",
            "worker_down_failures",
        ),
        ("mock_client_disconnects_total", "Answers the client abandoned.", "client_disconnects"),
    )
    for name, help_text, key in totals:
        family(name, "counter", help_text, [("", server[key])])  # type: ignore[literal-required]
    family("mock_in_flight", "gauge", "Answers being written.", [("", server["in_flight"])])

    workers = cluster["workers"]
    per_worker = (
        ("mock_worker_up", "gauge", "1 if the worker is up.", "up"),
        ("mock_worker_running", "gauge", "Requests running on the worker.", "running"),
        ("mock_worker_queued", "gauge", "Requests waiting for a batch slot.", "queued"),
        ("mock_worker_kv_usage", "gauge", "KV blocks held / capacity.", "kv_usage"),
        ("mock_worker_cache_blocks", "gauge", "Prefix-cache blocks held.", "cache_blocks_used"),
        ("mock_worker_bound_keys", "gauge", "Live session bindings to the worker.", "bound_keys"),
        ("mock_worker_requests_total", "counter", "Requests routed to the worker.", "requests"),
        (
            "mock_worker_prompt_tokens_total",
            "counter",
            "Prompt tokens on the worker.",
            "prompt_tokens",
        ),
        ("mock_worker_cached_tokens_total", "counter", "Prefix-cache hit tokens.", "cached_tokens"),
        ("mock_worker_binds_total", "counter", "Session bindings made.", "binds"),
        ("mock_worker_closes_total", "counter", "Session bindings closed.", "closes"),
        ("mock_worker_expiries_total", "counter", "Session bindings expired.", "expiries"),
        (
            "mock_worker_bindings_dropped_total",
            "counter",
            "Bindings dropped: worker down.",
            "bindings_dropped",
        ),
        ("mock_worker_sessions_seen", "gauge", "Distinct session ids served.", "sessions_seen"),
        (
            "mock_worker_header_binds_total",
            "counter",
            "X-Dynamo-Session-ID keys bound to the worker.",
            "header_binds",
        ),
        (
            "mock_worker_header_follows_total",
            "counter",
            "Requests sent to the worker by a header binding.",
            "header_follows",
        ),
        (
            "mock_worker_header_expiries_total",
            "counter",
            "Header bindings that idled past their TTL.",
            "header_expiries",
        ),
        (
            "mock_worker_header_invalidations_total",
            "counter",
            "Header bindings dropped: worker down.",
            "header_invalidations",
        ),
        (
            "mock_worker_header_fallbacks_total",
            "counter",
            "Soft header affinity: bound here, sent elsewhere (no free slot).",
            "header_fallbacks",
        ),
    )
    for name, kind, help_text, key in per_worker:
        family(
            name,
            kind,
            help_text,
            ((f'{{worker="{w["worker_id"]}"}}', w[key]) for w in workers),  # type: ignore[literal-required]
        )
    family(
        "mock_header_refusals_total",
        "counter",
        "Requests refused by the header affinity limits, by reason.",
        (
            (f'{{reason="{reason}"}}', n)
            for reason, n in cluster["totals"]["header_refusals"].items()
        ),
    )
    return "\n".join(out) + "\n"


def _number(value: float) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    return repr(float(value))
