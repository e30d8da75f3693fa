"""The Celery application. Configuration comes from Django settings (CELERY_* names); tasks
live in each app's tasks.py."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aiperf_web.settings")

app = Celery("aiperf_web")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _start_stale_run_reaper(**_: object) -> None:
    # Every worker watches for runs whose worker died (a killed process writes no heartbeat).
    from aiperf_web.runs.worker import StaleRunReaper

    StaleRunReaper().start()
