"""What the web and the worker send to Celery about runs: tickets, and how many wait.

A ticket (task `runs.execute` on the AIPERF_RUNS_QUEUE queue) is not an order: the worker that
takes one claims the queued run fairest to start (runs.services). This is the one place that
sends them, so every ticket carries the same queue and time limits. The Celery app is the
current one (`celery -A aiperf_web`, or the web process's, set by aiperf_web/__init__.py): no
app imports the project's Celery module.
"""

from __future__ import annotations

from typing import Any

from celery import chain, current_app
from django.conf import settings
from kombu.exceptions import ChannelError

from runner import MAX_DURATION_S

TASK_NAME = "runs.execute"
# A ticket may start any queued run, so Celery's hard limit is that of the longest run a spec
# accepts; each run's own limit is enforced by its watcher.
TASK_TIME_LIMIT_S = max(24 * 3600, int(MAX_DURATION_S * 1.2 + 600))


def _options() -> dict[str, Any]:
    # Read at each send: test sessions point AIPERF_RUNS_QUEUE at a queue of their own.
    return {
        "queue": settings.AIPERF_RUNS_QUEUE,
        "time_limit": TASK_TIME_LIMIT_S,
        "soft_time_limit": TASK_TIME_LIMIT_S - 30,
    }


def tickets_send(*run_uuids: str) -> None:
    """A ticket per run; `run_uuid` (the launch it stands for, or "" after a run ended) is only
    a label in the worker's log. Several are sent as one chain: each is delivered only once the
    one before has been executed (a paired A/B launch, whose runs never compete)."""
    if len(run_uuids) == 1:
        current_app.send_task(TASK_NAME, args=[run_uuids[0]], **_options())
        return
    chain(
        *(
            current_app.signature(TASK_NAME, args=[run_uuid], immutable=True, **_options())
            for run_uuid in run_uuids
        )
    ).apply_async()


def tickets_waiting() -> int:
    """Tickets waiting in the runs queue (Redis: the length of its list; the in-memory broker:
    its size). Tickets a worker holds unacknowledged are not counted: they wait in Redis's
    `unacked` set, not the list."""
    with current_app.connection_for_read() as conn:
        channel: Any = conn.default_channel  # a kombu virtual channel (Redis or memory)
        try:
            declared = channel.queue_declare(queue=settings.AIPERF_RUNS_QUEUE, passive=True)
        except ChannelError:  # no such queue: Redis lost its keys, or nothing was ever sent
            return 0
    return int(declared.message_count)
