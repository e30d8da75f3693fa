"""Faults of the service's own parts, injected for real (issue 26 items 1 and 2).

- A Redis restart (down ~3 s) under a Celery runs worker executing a run: the run succeeds and
  the worker goes on consuming, so a run launched after the restart succeeds with no manual
  action. Before the fix in aiperf_web/celery.py (RedisTransport) the worker logged
  "Unrecoverable error: AttributeError('NoneType' object has no attribute 'hostname')" and
  exited once its run had ended: the second run stayed queued for good. The test starts a
  Redis server of its own on a free port (never the shared one) and a real worker on it.
- `manage.py serve` restarts its mock when it dies, and /healthz answers 503 naming the mock
  until it is back.

Each prints its recovery time (measured, not asserted: timings are not test conditions).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings

from aiperf_web.core.mock import free_port
from aiperf_web.runs import services
from aiperf_web.runs.models import Run, Status
from aiperf_web.stack.worker import worker_command
from tests.infra import needs, unavailable
from tests.web.conftest import ROOT, World, _test_database_url, final_run, point_producer_at
from tests.web.private_servers import PrivateRedis

production_only = needs(
    not (settings.DATABASE_URL and settings.REDIS_URL),
    "a broker restart needs the production configuration (set DATABASE_URL and REDIS_URL)",
)


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    if shutil.which("redis-server") is None:
        unavailable("redis-server is not installed")
    server = PrivateRedis(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.mark.slow
@production_only
def test_a_redis_restart_under_a_running_run_leaves_the_worker_consuming(
    private_redis: PrivateRedis,
    transactional_db: Any,
    mock_url: str,
    settings: Any,
    tmp_path: Path,
    wait_for: Callable[..., Any],
) -> None:
    queue = f"runs-redis-restart-{os.getpid()}"
    settings.AIPERF_RUNS_QUEUE = queue
    original = settings.CELERY_BROKER_URL
    point_producer_at(private_redis.url)
    log = tmp_path / "worker.log"
    # The worker as `manage.py serve` starts it (mingle, gossip and heartbeats on), on the
    # test database and the private Redis (broker and cache alike).
    with open(log, "wb") as out:
        worker = subprocess.Popen(
            [*worker_command(queue=queue, concurrency=2), "-n", f"{queue}@localhost"],
            cwd=ROOT,
            env={
                **os.environ,
                "DATABASE_URL": _test_database_url(),
                "REDIS_URL": private_redis.url,
                "AIPERF_RUNS_QUEUE": queue,
            },
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        world = World(mock_url)

        def launch(duration_s: int) -> Run:
            return services.run_launch(
                actor=world.owner,
                scenario_id=world.scenario.uuid,
                endpoint_id=world.endpoint.uuid,
                overrides={"duration_s": duration_s, "concurrency": 4},
            )

        first = launch(20)
        # Restarted once the run is sending (it stored a snapshot).
        wait_for(
            lambda: Run.objects.filter(
                pk=first.pk, status=Status.RUNNING, samples__isnull=False
            ).exists(),
            timeout_s=60,
        )
        private_redis.stop()
        time.sleep(3)  # Redis is away for 3 s
        private_redis.start()
        restarted = time.monotonic()

        ended = final_run(str(first.uuid), wait_for, timeout_s=120)
        assert ended.status == Status.SUCCEEDED, ended.reason
        # Every request it answered is stored, the restart notwithstanding.
        assert ended.records_count == ended.summary["requests"] > 0

        # A run launched after the restart starts and succeeds, with nobody touching anything.
        second = launch(3)
        done = final_run(str(second.uuid), wait_for, timeout_s=120)
        recovered_s = time.monotonic() - restarted
        assert done.status == Status.SUCCEEDED, done.reason
        assert worker.poll() is None, log.read_text()[-3000:]
        text = log.read_text()
        assert "Unrecoverable error" not in text, text[-3000:]
        assert "Connection to broker lost" in text  # the fault did reach the worker
        print(
            f"redis restart: first run {ended.status} ({ended.records_count} records of "
            f"{ended.summary['requests']} requests); a run launched after it ended "
            f"{done.status} {recovered_s:.1f} s after Redis came back"
        )
    finally:
        _stop_group(worker)
        point_producer_at(original)


def _serve_env(tmp_path: Path, mock_port: int) -> dict[str, str]:
    # The embedded shape (no DATABASE_URL/REDIS_URL): serve's children are the same either way.
    return {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")} | {
        "AIPERF_DATA_DIR": str(tmp_path),
        "AIPERF_ADMIN_PASSWORD": "supervise-test-pw",
        "AIPERF_MOCK_PORT": str(mock_port),
        "AIPERF_RUNS_QUEUE": f"runs-supervise-{os.getpid()}",
    }


def _mock_pid(serve_pid: int) -> int:
    out = subprocess.run(
        ["ps", "-o", "pid=,args=", "--ppid", str(serve_pid)], capture_output=True, text=True
    ).stdout
    (pid,) = [int(line.split()[0]) for line in out.splitlines() if "mock-server" in line]
    return pid


@pytest.mark.slow
@pytest.mark.shape_independent  # serve runs in a shape of its own here
def test_serve_restarts_a_killed_mock_and_healthz_says_503_meanwhile(
    tmp_path: Path, wait_for: Callable[..., Any]
) -> None:
    port, mock_port = free_port(), free_port()
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        serve = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(port)],
            cwd=ROOT,
            env=_serve_env(tmp_path, mock_port),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"

    def healthz() -> tuple[int, dict[str, str]]:
        response = httpx.get(f"{base}/healthz", timeout=10)
        return response.status_code, response.json()

    def answers() -> Any:
        try:
            return healthz()
        except httpx.HTTPError:
            return None

    def until(status: int, timeout_s: float) -> dict[str, str]:
        answer: tuple[int, dict[str, str]] = wait_for(
            lambda: (got := healthz())[0] == status and got, timeout_s=timeout_s
        )
        return answer[1]

    try:
        wait_for(answers, timeout_s=90, every_s=0.25)
        # The embedded worker thread beats at once; the mock was up before the site.
        body = until(200, timeout_s=30)
        assert body["mock"] == "ok" and body["worker"] == "ok", body
        before = _mock_pid(serve.pid)

        os.kill(before, signal.SIGKILL)
        killed = time.monotonic()
        body = until(503, timeout_s=10)
        assert body["mock"].startswith("down for"), body
        assert "killed by signal 9" in body["mock"], body
        assert body["database"] == "ok" and body["worker"] == "ok", body

        body = until(200, timeout_s=30)
        back_s = time.monotonic() - killed
        assert body["mock"] == "ok", body
        after = _mock_pid(serve.pid)
        assert after != before
        # Back on its port, so the built-in endpoint's URL still leads to it.
        assert httpx.get(f"http://127.0.0.1:{mock_port}/health", timeout=5).status_code == 200
        text = log.read_text()
        assert "the built-in mock was killed by signal 9" in text, text[-3000:]
        assert "the built-in mock started again (restart 1)" in text, text[-3000:]
        print(f"killed mock: /healthz 503 naming it, back and 200 after {back_s:.1f} s")
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=30)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait()
    # Stopping serve stops the mock it restarted too.
    time.sleep(0.5)
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{mock_port}/health", timeout=1)
