"""The service's own Prometheus exposition (text format 0.0.4), written by hand: a few gauges
and one histogram do not need a client library.

Database-wide figures (runs by status, worker heartbeats, queue depth) are the same from any
process; viewers, request latency and the connection pool are this process's own.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable

from django.conf import settings
from django.db import connection
from django.db.models import Count, Max
from django.utils import timezone

from aiperf_web.ops.latency import REQUESTS
from aiperf_web.ops.viewers import viewers_by_kind
from aiperf_web.runs.models import Run, Status

log = logging.getLogger(__name__)

# Heartbeats older than this are history, not a worker: it bounds the series (one per worker
# name) and the rows read.
HEARTBEAT_WINDOW = dt.timedelta(hours=1)

Line = tuple[str, dict[str, str], float]  # series name, labels, value


def runs_by_status() -> dict[str, int]:
    counts = {str(s): 0 for s in Status}
    for row in Run.objects.values("status").annotate(n=Count("id")).order_by():
        counts[row["status"]] = row["n"]
    return counts


def worker_heartbeat_ages_s() -> dict[str, float]:
    """Per worker name, seconds since its newest heartbeat in the runs table (written every
    5 s while it executes a run; an idle worker writes none)."""
    now = timezone.now()
    rows = (
        Run.objects.filter(heartbeat_at__gte=now - HEARTBEAT_WINDOW)
        .exclude(worker="")
        .values("worker")
        .annotate(newest=Max("heartbeat_at"))
        .order_by()
    )
    return {row["worker"]: (now - row["newest"]).total_seconds() for row in rows}


def queue_depths() -> dict[str, int]:
    """Messages waiting per Celery queue (only the runs queue exists)."""
    queue = settings.AIPERF_RUNS_QUEUE
    if settings.REDIS_URL:
        import redis

        # Celery's Redis transport keeps a queue as a list named after it (tasks are sent
        # without a priority, so the priority-suffixed lists stay empty).
        client = redis.Redis.from_url(
            settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2
        )
        try:
            return {queue: int(client.llen(queue))}
        finally:
            client.close()
    # The embedded shape: kombu's in-memory broker lives in this process, its queues in a
    # class attribute shared by every channel.
    from kombu.transport.memory import Channel

    waiting = Channel.queues.get(queue)
    return {queue: waiting.qsize() if waiting is not None else 0}


def pool_stats() -> dict[str, int]:
    """This process's PostgreSQL pool (psycopg_pool): open, idle, waiting, max; empty without
    a pool."""
    pool = getattr(connection, "pool", None)
    if pool is None:
        return {}
    stats = pool.get_stats()
    return {
        "open": int(stats.get("pool_size", 0)),
        "idle": int(stats.get("pool_available", 0)),
        "waiting": int(stats.get("requests_waiting", 0)),
        "max": int(stats.get("pool_max", 0)),
    }


def metrics_text() -> str:
    out: list[str] = []
    _family(
        out,
        "aiperf_runs",
        "gauge",
        "Runs stored, by status.",
        [("aiperf_runs", {"status": k}, v) for k, v in runs_by_status().items()],
    )
    try:
        depths = queue_depths()
    except Exception as exc:  # an unreachable broker: say so, keep the other figures
        log.warning("metrics: queue depth unavailable: %s", exc)
        depths = {}
    _family(
        out,
        "aiperf_queue_depth",
        "gauge",
        "Messages waiting in each Celery queue.",
        [("aiperf_queue_depth", {"queue": k}, v) for k, v in depths.items()],
    )
    _family(
        out,
        "aiperf_worker_heartbeat_age_seconds",
        "gauge",
        "Seconds since each worker's newest run heartbeat (workers seen in the last hour).",
        [
            ("aiperf_worker_heartbeat_age_seconds", {"worker": k}, v)
            for k, v in sorted(worker_heartbeat_ages_s().items())
        ],
    )
    viewers = {"run": 0, "runs_list": 0} | viewers_by_kind()
    _family(
        out,
        "aiperf_websocket_viewers",
        "gauge",
        "Open live WebSocket connections in this process, by consumer.",
        [("aiperf_websocket_viewers", {"consumer": k}, v) for k, v in sorted(viewers.items())],
    )
    pool = pool_stats()
    if pool:
        _family(
            out,
            "aiperf_db_pool_connections",
            "gauge",
            "This process's database pool: open, idle, max connections, requests waiting.",
            [("aiperf_db_pool_connections", {"state": k}, v) for k, v in pool.items()],
        )
    _family(
        out,
        "aiperf_http_request_duration_seconds",
        "histogram",
        "Time to a response's headers in this process, by status class.",
        _histogram_lines("aiperf_http_request_duration_seconds"),
    )
    return "\n".join(out) + "\n"


def _histogram_lines(name: str) -> Iterable[Line]:
    for status, (cumulative, total_s) in sorted(REQUESTS.snapshot().items()):
        bounds = [_number(b) for b in REQUESTS.buckets] + ["+Inf"]
        for le, count in zip(bounds, cumulative, strict=True):
            yield (f"{name}_bucket", {"status": status, "le": le}, count)
        yield (f"{name}_sum", {"status": status}, total_s)
        yield (f"{name}_count", {"status": status}, cumulative[-1])


def _family(out: list[str], name: str, kind: str, help_: str, lines: Iterable[Line]) -> None:
    out.append(f"# HELP {name} {help_}")
    out.append(f"# TYPE {name} {kind}")
    for series, labels, value in lines:
        body = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
        out.append(f"{series}{{{body}}} {_number(value)}" if body else f"{series} {_number(value)}")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
