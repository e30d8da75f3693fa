"""A Celery worker killed mid-run (docs/product.md §8): the run is marked failed with the reason
within a minute, and the samples stored up to the worker's last flush are kept.

Production configuration only (PostgreSQL + Redis): the test starts a `celery -A aiperf_web
worker` process of its own, on a queue of its own (the session's shared worker is untouched),
launches a 60 s live run against the built-in mock, waits until the run is running, has stored
samples and has written a heartbeat, SIGKILLs the worker's whole process group (the prefork
pool's children with it), then lets the service's own reaper judge the run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from aiperf_web.celery import app
from aiperf_web.runs import claiming, executing, services
from aiperf_web.runs.claiming import StaleRunReaper
from aiperf_web.runs.models import Run, RunRecord, RunSample, Status
from tests.infra import needs
from tests.web.conftest import ROOT, World, _test_database_url

production_only = needs(
    not (settings.DATABASE_URL and settings.REDIS_URL),
    "a killed worker process needs the production configuration (set DATABASE_URL "
    "and REDIS_URL, as .ci/run does); the embedded worker is a thread of this process",
)

# Production fails a run whose heartbeat is AIPERF_STALE_RUN_S (30 s) old; the test shortens
# that to keep its wall time low. It must stay above the watcher's heartbeat period (5 s) plus
# slack, or the reaper would fail a healthy run (checked below before the kill).
STALE_S = 8
REAPER_EVERY_S = 0.2


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie waiting for its reparented reaper counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.fixture
def own_worker(settings: Any, transactional_db: Any) -> Iterator[subprocess.Popen[bytes]]:
    """A prefork `celery -A aiperf_web worker` on a queue of this test's own, in its own process
    group; runs launched during the test go to that queue."""
    import redis

    queue = f"runs-worker-loss-{os.getpid()}"
    node = f"{queue}@localhost"
    settings.AIPERF_RUNS_QUEUE = queue
    broker = redis.Redis.from_url(settings.REDIS_URL)
    broker.delete(queue)
    env = {**os.environ, "DATABASE_URL": _test_database_url(), "AIPERF_RUNS_QUEUE": queue}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "aiperf_web",
            "worker",
            "-Q",
            queue,
            "-n",
            node,
            "--pool",
            "prefork",
            "--concurrency",
            "1",
            "--prefetch-multiplier",
            "1",
            "--loglevel",
            "WARNING",
            "--without-mingle",
            "--without-gossip",
        ],
        cwd=ROOT,
        env=env,
        start_new_session=True,  # its own process group: one killpg takes the pool too
    )
    try:
        deadline = time.monotonic() + 30
        while not app.control.ping(destination=[node], timeout=0.5):
            if proc.poll() is not None:
                pytest.fail(f"the celery worker exited with {proc.returncode}")
            if time.monotonic() > deadline:
                pytest.fail("the celery worker did not answer a ping within 30 s")
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        # The killed worker never acknowledged its task (acks_late): drop that message from
        # the broker's unacked set, which the Redis server shares with other sessions.
        broker.delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
        for tag, raw in broker.hgetall("unacked").items():
            try:
                routing_key = json.loads(raw)[2]
            except (ValueError, IndexError, TypeError):
                continue
            if routing_key == queue:
                broker.hdel("unacked", tag)
                broker.zrem("unacked_index", tag)


def test_the_production_path_reaps_within_a_minute() -> None:
    # Every worker process starts a reaper when it is ready, and `manage.py serve` (the web
    # container) starts one too; each calls runs_reap_stale() with the production threshold.
    from celery.signals import worker_ready

    from aiperf_web import celery as celery_module

    assert any(
        receiver() is celery_module._start_stale_run_reaper
        for _, receiver in worker_ready.receivers
    )
    serve = (ROOT / "aiperf_web/stack/management/commands/serve.py").read_text()
    assert "StaleRunReaper().start()" in serve
    # Worst case after a kill: the last heartbeat was written just before it, the run is stale
    # AIPERF_STALE_RUN_S later, and a reaper looks at most one interval after that.
    interval_s = StaleRunReaper().interval_s
    assert executing._HEARTBEAT_S + settings.AIPERF_STALE_RUN_S + interval_s < 60


@pytest.mark.slow
@production_only
def test_a_worker_killed_mid_run_fails_the_run_and_keeps_its_samples(
    own_worker: subprocess.Popen[bytes],
    mock_url: str,
    settings: Any,
    wait_for: Callable[..., Any],
) -> None:
    world = World(mock_url)
    launched = services.run_launch(
        actor=world.owner,
        scenario_id=world.scenario.uuid,
        endpoint_id=world.endpoint.uuid,
        overrides={"duration_s": 60},
    )

    def row() -> Run:
        return Run.objects.get(pk=launched.pk)

    # Running on our worker, samples stored, and at least one heartbeat written by the watcher
    # since the claim (so the worker is known to keep a live run fresh).
    def beating() -> Run | None:
        run = row()
        if run.status == Status.RUNNING and run.heartbeat_at and run.started_at:
            fresh = run.heartbeat_at > run.started_at
            if fresh and RunSample.objects.filter(run=run).exists():
                return run
        assert run.status in (Status.QUEUED, Status.RUNNING), (run.status, run.reason)
        return None

    running: Run = wait_for(beating, timeout_s=20, every_s=0.1)
    pool_pid = int(running.worker.rsplit(":", 1)[1])
    assert os.getpgid(pool_pid) == own_worker.pid, "the run is not on this test's worker"
    # A live worker is not reaped at the test's threshold.
    assert claiming.runs_reap_stale(older_than_s=STALE_S) == 0
    assert row().status == Status.RUNNING

    os.killpg(own_worker.pid, signal.SIGKILL)
    own_worker.wait(timeout=10)
    wait_for(lambda: not _alive(pool_pid), timeout_s=10, every_s=0.05)
    killed_at = time.monotonic()

    # The kill alone judges nothing: the run is still "running", with what it had flushed.
    after_kill = row()
    assert after_kill.status == Status.RUNNING and after_kill.finished_at is None
    samples_kept = RunSample.objects.filter(run=after_kill).count()
    records_kept = RunRecord.objects.filter(run=after_kill).count()
    assert samples_kept >= 1

    # The service's reaper thread, as every worker and `manage.py serve` run it, with the
    # threshold shortened from production's AIPERF_STALE_RUN_S (30 s) to STALE_S.
    settings.AIPERF_STALE_RUN_S = STALE_S
    reaper = StaleRunReaper(interval_s=REAPER_EVERY_S)
    reaper.start()
    try:
        failed: Run = wait_for(
            lambda: (run := row()).status != Status.RUNNING and run,
            timeout_s=STALE_S + 5,
            every_s=0.1,
        )
    finally:
        reaper.done.set()
        reaper.join(timeout=5)
    reaped_after_s = time.monotonic() - killed_at

    assert failed.status == Status.FAILED
    assert f"worker {running.worker} stopped responding" in failed.reason, failed.reason
    assert f"no heartbeat for over {STALE_S} s" in failed.reason
    assert "up to its last flush are kept" in failed.reason
    assert failed.finished_at is not None and failed.finished_at >= after_kill.started_at
    assert failed.worker == running.worker  # who lost it stays on the run
    # Stale only once the last heartbeat is STALE_S old: never before, and not much after.
    assert failed.heartbeat_at is not None
    assert (failed.finished_at - failed.heartbeat_at).total_seconds() >= STALE_S
    assert reaped_after_s < STALE_S + 2
    # Everything flushed before the kill is kept, and the counts on the run say so.
    assert RunSample.objects.filter(run=failed).count() == samples_kept
    assert RunRecord.objects.filter(run=failed).count() == records_kept
    assert failed.samples_count == samples_kept
    assert failed.records_count == records_kept

    # Never claimed again: a redelivered task (acks_late puts the killed worker's message back
    # on the queue after the visibility timeout) finds the run final and skips it.
    assert executing.run_execute(run_uuid=str(failed.uuid), worker="redelivered:1") == "skipped"
    again = row()
    assert (again.status, again.reason, again.finished_at, again.worker) == (
        failed.status,
        failed.reason,
        failed.finished_at,
        failed.worker,
    )
    assert RunSample.objects.filter(run=again).count() == samples_kept
