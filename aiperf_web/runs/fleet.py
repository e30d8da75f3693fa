"""A run's client workers as processes on the `hosts` queue (the engine's runner/fleet).

The run's own task stays the orchestrator (scheduler, router, affinity, books); each group of
`client_workers_per_host` client workers becomes a `fleet.host` task that a `celery -A
aiperf_web worker -Q hosts` pool process runs for the run's length, on any machine reaching
Redis and the endpoint. Host tasks are acknowledged on receipt: a host that dies is not
redelivered (the orchestrator settles what its workers owed as lost, never re-sends it).
"""

from __future__ import annotations

from celery import current_app
from django.conf import settings

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


def _send_hosts(run_key: str, groups: list[list[int]]) -> None:
    for workers in groups:
        current_app.send_task(
            HOST_TASK,
            args=[settings.AIPERF_FLEET_REDIS_URL, run_key, workers],
            queue=settings.AIPERF_HOSTS_QUEUE,
        )
