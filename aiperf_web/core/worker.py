"""The embedded default's Celery worker: a WorkController on the in-memory broker, in a thread
of the web process. It consumes the same `runs` queue with the same task code as the
`celery -A aiperf_web worker -Q runs` processes of production."""

from __future__ import annotations

import logging
import socket
import threading
from typing import Any

from django.conf import settings

from aiperf_web.celery import app

log = logging.getLogger(__name__)


class EmbeddedWorker:
    def __init__(self, *, concurrency: int) -> None:
        self.concurrency = concurrency
        self.controller: Any = None
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.controller = app.WorkController(
            hostname=f"embedded@{socket.gethostname()}",
            pool_cls="threads",
            concurrency=self.concurrency,
            queues=[settings.AIPERF_RUNS_QUEUE],
            prefetch_multiplier=1,
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
            loglevel=logging.INFO,
        )
        self.thread = threading.Thread(
            target=self.controller.start, name="celery-embedded", daemon=True
        )
        self.thread.start()

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop(in_sighandler=False)
        if self.thread is not None:
            self.thread.join(timeout=10)


class StaleRunReaper(threading.Thread):
    """Every `interval_s`: marks failed the running runs whose worker stopped writing
    heartbeats (a killed worker process), and sends tickets for queued runs that have none in
    the broker (runs_reconcile_queued: Redis lost its data, a worker died holding one). Runs
    in every web process and worker; the UPDATE is conditional, so several reapers agree, and
    a surplus ticket is dropped by the worker that takes it."""

    def __init__(self, *, interval_s: float = 10.0) -> None:
        super().__init__(name="stale-run-reaper", daemon=True)
        self.interval_s = interval_s
        self.done = threading.Event()

    def run(self) -> None:
        from django.db import connection

        from aiperf_web.runs.services import runs_reap_stale, runs_reconcile_queued

        while not self.done.wait(self.interval_s):
            try:
                reaped = runs_reap_stale()
                if reaped:
                    log.warning("marked %d run(s) failed: their worker stopped responding", reaped)
            except Exception:
                log.exception("stale-run reaper failed")
            try:
                sent = runs_reconcile_queued()
                if sent:
                    log.warning("sent %d ticket(s) for queued runs the broker had none for", sent)
            except Exception:
                log.exception("reconciling queued runs with the broker failed")
            finally:
                connection.close()
