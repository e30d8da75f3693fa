"""A run's client workers as processes on the `hosts` queue (the engine's runner/fleet).

The run's own task stays the orchestrator (scheduler, router, affinity, books); each group of
`client_workers_per_host` client workers becomes a `fleet.host` task that a `celery -A
aiperf_web worker -Q hosts` pool process runs for the run's length, on any machine reaching
Redis and the endpoint. Host tasks are acknowledged on receipt: a host that dies is not
redelivered (the orchestrator settles what its workers owed as lost, never re-sends it).

The endpoint's API key and secret headers never lie in Redis in the clear: the engine seals
the hosts' configuration under a key of the run's own (runner/fleet/host.py), and each host
task carries that key sealed in turn under the service's at-rest key (core/crypto.py: the
hosts worker is this service's code with its settings), so the broker's copy of the task
opens nothing without the service's SECRET_KEY or AIPERF_ENCRYPTION_KEY.
"""

from __future__ import annotations

from celery import current_app
from django.conf import settings

from aiperf_web.core.crypto import decrypt_secret, encrypt_secret
from aiperf_web.core.errors import Invalid
from runner import FleetPlan, RunSpec

HOST_TASK = "fleet.host"


def fleet_check(spec: RunSpec) -> None:
    """At launch: a run that wants client-worker processes needs the Redis they meet on."""
    if spec.client_worker_processes and not settings.AIPERF_FLEET_REDIS_URL:
        raise Invalid.field(
            "overrides.client_worker_processes",
            "needs Redis: the embedded default has none (set REDIS_URL, and run "
            "`celery -A aiperf_web worker -Q hosts` processes)",
        )


def fleet_plan(spec: RunSpec) -> FleetPlan | None:
    """How the worker starts the run's hosts: one host task per worker group."""
    if not spec.client_worker_processes:
        return None
    return FleetPlan(
        redis_url=settings.AIPERF_FLEET_REDIS_URL,
        start_hosts=_send_hosts,
        start_timeout_s=float(settings.AIPERF_FLEET_START_TIMEOUT_S),
    )


def _send_hosts(run_key: str, groups: list[list[int]], secret: str) -> None:
    sealed = encrypt_secret(secret)
    for workers in groups:
        current_app.send_task(
            HOST_TASK,
            args=[settings.AIPERF_FLEET_REDIS_URL, run_key, workers, sealed],
            queue=settings.AIPERF_HOSTS_QUEUE,
        )


def fleet_secret_open(sealed: str) -> str:
    """The run's key a host task carries; a hosts worker whose at-rest key differs from the
    service's cannot serve (it says so rather than join with a key that opens nothing)."""
    secret = decrypt_secret(sealed)
    if secret is None:
        raise RuntimeError(
            "this hosts worker cannot open the run's key: its SECRET_KEY / "
            "AIPERF_ENCRYPTION_KEY differ from the service's"
        )
    return secret
