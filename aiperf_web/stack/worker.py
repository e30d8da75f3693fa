"""The Celery worker `manage.py serve` starts: in the embedded default a WorkController on the
in-memory broker, in a thread of the web process; with Redis a `celery -A aiperf_web worker -Q
runs` child process, whose command line is built here (bench_web uses it too). Either consumes the
same `runs` queue with the same task code as the worker processes of production."""

from __future__ import annotations

import logging
import socket
import sys
import threading
from collections.abc import Sequence
from typing import Any

from django.conf import settings

from aiperf_web.celery import app


def recycling_options() -> list[str]:
    """The worker-process recycling rule of the settings (README: Worker memory), as options
    of `celery worker` (which would read the same settings; named here so `ps` shows them)."""
    options: list[str] = []
    if settings.CELERY_WORKER_MAX_TASKS_PER_CHILD:
        options += ["--max-tasks-per-child", str(settings.CELERY_WORKER_MAX_TASKS_PER_CHILD)]
    if settings.CELERY_WORKER_MAX_MEMORY_PER_CHILD:
        options += ["--max-memory-per-child", str(settings.CELERY_WORKER_MAX_MEMORY_PER_CHILD)]
    return options


def worker_command(
    *,
    queue: str,
    concurrency: int,
    recycle: bool = True,
    loglevel: str = "INFO",
    extra: Sequence[str] = (),
) -> list[str]:
    """`celery -A aiperf_web worker` on `queue`, each pool process taking one ticket at a time,
    with the recycling rule unless `recycle` is false."""
    return [
        *(sys.executable, "-m", "celery", "-A", "aiperf_web", "worker", "-Q", queue),
        *("--concurrency", str(concurrency), "--prefetch-multiplier", "1"),
        *(recycling_options() if recycle else []),
        *("--loglevel", loglevel, *extra),
    ]


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

    def ended(self) -> str | None:
        """None while its thread runs (stack/supervise.py)."""
        if self.thread is None:
            return "never started"
        return None if self.thread.is_alive() else "stopped"

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop(in_sighandler=False)
        if self.thread is not None:
            self.thread.join(timeout=10)
