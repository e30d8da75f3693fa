"""`/healthz`'s checks, each answering "ok" or what is wrong in a few words.

The database and the broker are this process's to reach: either failing makes the service
unhealthy (503). A worker may live on another host or be stopped on purpose (`serve
--no-worker`), so its absence is reported, never a failure.
"""

from __future__ import annotations

import datetime as dt
import threading
import time

from celery import current_app
from django.conf import settings
from django.db import DatabaseError, connection
from django.utils import timezone

from aiperf_web.runs.models import Run

# Each check is bounded: a load balancer probes every few seconds and must get an answer.
DATABASE_TIMEOUT_S = 3.0
BROKER_TIMEOUT_S = 2.0
INSPECT_TIMEOUT_S = 0.5
# A worker found by `inspect` stays found this long: probes do not each wait for replies.
WORKER_CACHE_S = 10.0

_worker_seen_at = 0.0
_worker_lock = threading.Lock()


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def check_database() -> str:
    try:
        pool = getattr(connection, "pool", None)
        if pool is not None:
            # Through the pool the service uses, with a short wait instead of its request
            # timeout: a database that went away must not hold the probe for 10 s.
            pool.open(wait=False)
            with pool.connection(timeout=DATABASE_TIMEOUT_S) as conn:
                conn.execute("SELECT 1")
        else:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
    except Exception as exc:
        return f"unreachable ({_reason(exc)})"
    return "ok"


def check_broker() -> str:
    if not settings.REDIS_URL:
        return "ok"  # the in-memory broker of the embedded shape lives in this process
    import redis

    client = redis.Redis.from_url(
        settings.REDIS_URL,
        socket_timeout=BROKER_TIMEOUT_S,
        socket_connect_timeout=BROKER_TIMEOUT_S,
    )
    try:
        client.ping()
    except Exception as exc:
        return f"unreachable ({_reason(exc)})"
    finally:
        client.close()
    return "ok"


def check_worker(*, database_ok: bool, broker_ok: bool) -> str:
    """ok when a run heartbeat is recent (a worker executing), else when a worker answers
    `inspect active_queues` with the runs queue (an idle one)."""
    global _worker_seen_at
    window_s = settings.AIPERF_STALE_RUN_S
    if database_ok:
        cutoff = timezone.now() - dt.timedelta(seconds=window_s)
        try:
            if Run.objects.filter(heartbeat_at__gte=cutoff).exists():
                return "ok"
        except DatabaseError:
            pass  # the database check already says what is wrong
    with _worker_lock:
        if time.monotonic() - _worker_seen_at < WORKER_CACHE_S:
            return "ok"
        if broker_ok and _worker_consumes(settings.AIPERF_RUNS_QUEUE):
            _worker_seen_at = time.monotonic()
            return "ok"
    return f"none seen in {window_s} s"


def _worker_consumes(queue: str) -> bool:
    # Not `ping`: other services on the same Redis answer it too; this names the queue.
    try:
        replies = current_app.control.inspect(timeout=INSPECT_TIMEOUT_S).active_queues() or {}
    except Exception:
        return False
    return any(q.get("name") == queue for queues in replies.values() for q in queues or [])


def health() -> tuple[bool, dict[str, str]]:
    """(healthy, {"database", "broker", "worker"})."""
    database = check_database()
    broker = check_broker()
    worker = check_worker(database_ok=database == "ok", broker_ok=broker == "ok")
    healthy = database == "ok" and broker == "ok"
    return healthy, {"database": database, "broker": broker, "worker": worker}
