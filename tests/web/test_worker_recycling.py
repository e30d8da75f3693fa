"""Worker processes are recycled (issue 13 item 10): a run's engine leaves memory its process
does not give back, so every way of starting a worker carries the recycling rule."""

from __future__ import annotations

from django.conf import settings

from aiperf_web.celery import app
from aiperf_web.stack.worker import recycling_options
from tests.web.conftest import ROOT


def test_every_worker_command_recycles_its_pool_processes() -> None:
    assert app.conf.worker_max_tasks_per_child == settings.CELERY_WORKER_MAX_TASKS_PER_CHILD
    assert app.conf.worker_max_memory_per_child == settings.CELERY_WORKER_MAX_MEMORY_PER_CHILD
    assert app.conf.worker_max_tasks_per_child and app.conf.worker_max_memory_per_child
    options = recycling_options()
    assert "--max-tasks-per-child" in options and "--max-memory-per-child" in options
    compose = (ROOT / "docker-compose.yml").read_text()
    assert '"--max-tasks-per-child"' in compose and '"--max-memory-per-child"' in compose
