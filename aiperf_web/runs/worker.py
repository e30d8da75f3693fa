"""The worker's side of runs that is not a write the web makes: the stale-run reaper.

It runs in every worker process (started when the worker is ready, aiperf_web/celery.py) and in
every process `manage.py serve` starts, beside the watcher that keeps each running run's
heartbeat (runs.services)."""

from __future__ import annotations

import logging
import threading

from django.db import connection

from aiperf_web.runs.services import runs_reap_stale, runs_reconcile_queued

log = logging.getLogger(__name__)


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
