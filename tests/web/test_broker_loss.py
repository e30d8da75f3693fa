"""Faults that strand queued runs (issue 13 item 10): Redis restarted with an empty dataset
lost every ticket of the runs waiting in it. Every worker and web process reconciles the
queued runs with the broker periodically (runs_reconcile_queued), so they start anyway.

Production configuration only (PostgreSQL + Redis). The test takes a Redis database number of
its own (never db 0, which other sessions share), points this process's Celery producer and a
worker of its own at it, launches runs with no worker consuming, empties that database
(FLUSHDB: the state of a Redis restarted without persistence), then starts the worker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings

from aiperf_web.celery import app
from aiperf_web.runs import services
from aiperf_web.runs.models import Run, Status
from tests.infra import needs, unavailable
from tests.web.conftest import ROOT, World, _test_database_url, point_producer_at

production_only = needs(
    not (settings.DATABASE_URL and settings.REDIS_URL),
    "a lost broker needs the production configuration (set DATABASE_URL and REDIS_URL)",
)


@pytest.fixture
def own_redis_db(settings: Any) -> Iterator[str]:
    """A Redis URL on a database number no other session holds (a lock key in db 0 claims it,
    and it must be empty), and a queue of this test's own."""
    import redis

    shared = redis.Redis.from_url(settings.REDIS_URL)
    base = settings.REDIS_URL.rsplit("/", 1)[0]
    for number in range(15, 0, -1):
        lock = f"aiperf-test-redis-db:{number}"
        if shared.set(lock, os.getpid(), nx=True, ex=900):
            if redis.Redis.from_url(f"{base}/{number}").dbsize() == 0:
                break
            shared.delete(lock)
    else:
        unavailable("no free Redis database number for this test")
    url = f"{base}/{number}"
    settings.AIPERF_RUNS_QUEUE = f"runs-broker-loss-{os.getpid()}"
    original = app.conf.broker_url
    point_producer_at(url)
    try:
        yield url
    finally:
        point_producer_at(original)
        redis.Redis.from_url(url).flushdb()
        shared.delete(lock)


def _start_worker(*, broker_url: str, queue: str) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DATABASE_URL": _test_database_url(),
        "REDIS_URL": broker_url,
        "AIPERF_RUNS_QUEUE": queue,
    }
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "celery", "-A", "aiperf_web", "worker", "-Q", queue),
            *("-n", f"{queue}@localhost", "--concurrency", "2", "--prefetch-multiplier", "1"),
            *("--loglevel", "WARNING", "--without-mingle", "--without-gossip"),
        ],
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )


@pytest.mark.slow
@production_only
def test_runs_queued_when_redis_lost_its_data_still_complete(
    own_redis_db: str,
    transactional_db: Any,
    mock_url: str,
    wait_for: Callable[..., Any],
) -> None:
    import redis

    world = World(mock_url)
    queue = settings.AIPERF_RUNS_QUEUE
    launched = [
        services.run_launch(actor=world.owner, scenario_id=world.scenario.uuid).pk for _ in range(3)
    ]
    broker = redis.Redis.from_url(own_redis_db)
    assert broker.llen(queue) == 3  # one ticket per launch, no worker consuming

    broker.flushdb()  # Redis restarted without persistence: every ticket is gone
    assert broker.llen(queue) == 0
    assert all(r.status == Status.QUEUED for r in Run.objects.filter(pk__in=launched))

    worker = _start_worker(broker_url=own_redis_db, queue=queue)
    try:
        # The worker's reconciliation (every 10 s) finds three startable runs and no ticket.
        started = time.monotonic()
        wait_for(
            lambda: (
                Run.objects.filter(pk__in=launched)
                .exclude(status__in=[Status.QUEUED, Status.RUNNING])
                .count()
                == 3
            ),
            timeout_s=90,
            every_s=0.5,
        )
        statuses = list(Run.objects.filter(pk__in=launched).values_list("status", flat=True))
        assert statuses == [Status.SUCCEEDED] * 3
        assert time.monotonic() - started < 90
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()


def test_reconciliation_runs_in_every_process_that_reaps() -> None:
    # The reaper thread every worker starts when ready (and `manage.py serve` in the web
    # process) reconciles queued runs with the broker on each tick, in every shape.
    import inspect

    from aiperf_web.runs.claiming import StaleRunReaper

    assert "runs_reconcile_queued()" in inspect.getsource(StaleRunReaper.run)
