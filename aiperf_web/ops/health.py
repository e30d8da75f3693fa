"""`/healthz`'s checks, each answering "ok" or what is wrong in a few words.

Unhealthy (503, naming the part) when this process cannot reach the database or the broker;
when no worker has consumed the runs queue for AIPERF_STALE_RUN_S while runs wait (they would
wait for ever); when a built-in server this service started (the mock, the real Dynamo, the
real vLLM, registered by `manage.py serve` through health_server_watch) is down. A missing
worker while no run waits is reported, not a failure: workers may live elsewhere or be stopped
on purpose.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from django.conf import settings
from django.db import DatabaseError, connection

from aiperf_web.runs.models import Run, Status
from aiperf_web.runs.presence import workers_seen

# Each check is bounded: a load balancer probes every few seconds and must get an answer.
DATABASE_TIMEOUT_S = 3.0
BROKER_TIMEOUT_S = 2.0

# name -> () -> (healthy, in words): the built-in servers this process started and watches.
_servers: dict[str, Callable[[], tuple[bool, str]]] = {}


def health_server_watch(name: str, status: Callable[[], tuple[bool, str]]) -> None:
    """/healthz shows `status()`'s words under `name`, and is unhealthy while it says False."""
    _servers[name] = status


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


def check_worker(*, database_ok: bool) -> tuple[bool, str]:
    """(healthy, words): "ok" when a worker's consumer beat on the runs queue within the stale
    window (runs.presence); otherwise unhealthy only while runs wait."""
    window_s = settings.AIPERF_STALE_RUN_S
    try:
        if workers_seen(settings.AIPERF_RUNS_QUEUE, within_s=window_s):
            return True, "ok"
    except Exception as exc:
        # Presence lives in the broker's Redis: the broker check says it is unreachable.
        return True, f"unknown ({_reason(exc)})"
    none = f"none seen in {window_s} s"
    waiting = 0
    if database_ok:
        with contextlib.suppress(DatabaseError):  # the database check says what is wrong
            waiting = Run.objects.filter(status=Status.QUEUED).count()
    if waiting:
        return False, f"{none} while {waiting} queued run(s) wait"
    return True, none


def health() -> tuple[bool, dict[str, str]]:
    """(healthy, {"database", "broker", "worker", and each built-in server watched})."""
    database = check_database()
    broker = check_broker()
    worker_ok, worker = check_worker(database_ok=database == "ok")
    checks = {"database": database, "broker": broker, "worker": worker}
    healthy = database == "ok" and broker == "ok" and worker_ok
    for name, status in _servers.items():
        ok, words = status()
        checks[name] = words
        healthy = healthy and ok
    return healthy, checks
