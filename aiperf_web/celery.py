"""The Celery application. Configuration comes from Django settings (CELERY_* names); tasks
live in each app's tasks.py. With Redis the broker transport is RedisTransport below; every
worker's consumer says it is there (WorkerPresence)."""

from __future__ import annotations

import logging
import os
import warnings
from typing import Any

import redis
from celery import Celery, bootsteps
from celery.exceptions import CPendingDeprecationWarning
from celery.signals import worker_ready
from kombu.transport import redis as kombu_redis

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aiperf_web.settings")

app = Celery("aiperf_web")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
log = logging.getLogger(__name__)


class _RedisChannel(kombu_redis.Channel):
    """kombu's Redis channel, saying "connection lost" where it would crash the worker.

    When Redis goes away under a worker executing a run (celery 5.7, kombu 5.7), the consumer
    (Consumer.on_connection_error_after_connected) first `collect()`s the broken connection,
    then `close()`s it. In collect, closing the default channel stops at draining its pending
    BRPOP (a ConnectionError, swallowed), before the channel is marked closed, and collect
    then drops the transport (`transport.client = None`). The close that follows closes that
    channel again and now reaches QoS.restore_unacked_once: the run's ticket is unacknowledged
    (acks_late), so kombu builds a Redis client from `transport.client.hostname`:
    AttributeError, which neither kombu's ignore_errors nor Celery's reconnect loop catch, so
    the worker logged "Unrecoverable error: AttributeError('NoneType' object has no attribute
    'hostname')" and, once the run ended, exited. With that patched alone the run's late ack
    on the same stale channel hit the same AttributeError and killed the worker too.

    A channel whose transport was dropped belongs to a connection that is gone: raising
    redis's ConnectionError there (one of the transport's connection_errors) lets both callers
    treat it as what it is: the close is ignored, the ack is logged as not delivered ("Couldn't
    ack"). Nothing is lost: a Redis restarted empty has no record of the ticket, and one that
    kept it redelivers it after the visibility timeout, a surplus ticket the worker drops."""

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        if self.connection.client is None:
            raise redis.exceptions.ConnectionError(
                "the broker connection of this channel was closed (Redis went away)"
            )
        # Not in kombu's type stubs, which list the public surface only.
        params: dict[str, Any] = super()._connparams(asynchronous=asynchronous)  # type: ignore[misc]
        return params


class RedisTransport(kombu_redis.Transport):
    """The Redis transport with _RedisChannel (settings: CELERY_BROKER_TRANSPORT)."""

    Channel = _RedisChannel


class WorkerPresence(bootsteps.StartStopStep):
    """Writes this worker's presence (runs/presence.py: its queues and slots) every
    PRESENCE_BEAT_S, on the consumer's own timer: the beats stop when the consumer does (a
    lost broker, a crashed consumer) even while the process lives."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.tref: Any = None

    def start(self, parent: Any) -> None:
        from aiperf_web.runs.presence import PRESENCE_BEAT_S

        self.beat(parent)
        self.tref = parent.timer.call_repeatedly(PRESENCE_BEAT_S, self.beat, (parent,))

    def stop(self, parent: Any) -> None:
        if self.tref is not None:
            self.tref.cancel()
            self.tref = None

    def beat(self, consumer: Any) -> None:
        from aiperf_web.runs.presence import presence_beat

        try:
            presence_beat(
                worker=consumer.hostname,
                queues=[queue.name for queue in consumer.task_consumer.queues],
                slots=int(consumer.controller.concurrency),
            )
        except Exception:
            # The cache is the broker's Redis: the consumer is reconnecting to it already.
            log.warning("writing this worker's presence failed", exc_info=True)


app.steps["consumer"].add(WorkerPresence)


@worker_ready.connect
def _quiet_the_cancel_warning(**_: object) -> None:
    # At each lost broker connection Celery 5 warns that Celery 6 will cancel the executing
    # tasks by default; settings.py chose for runs to go on (CELERY_WORKER_CANCEL_LONG_...), so
    # the warning only buries the reconnect lines. Here, not at import: the worker's log setup
    # puts its own "always" filter for these warnings in front of any set before it.
    warnings.filterwarnings(
        "ignore", message=r"\s*In Celery 5.1 we introduced", category=CPendingDeprecationWarning
    )


@worker_ready.connect
def _start_stale_run_reaper(**_: object) -> None:
    # Every worker watches for runs whose worker died (a killed process writes no heartbeat).
    from aiperf_web.runs.claiming import StaleRunReaper

    StaleRunReaper().start()
