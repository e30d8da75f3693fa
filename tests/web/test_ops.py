"""What operators look at, and the service's database connections under load (issue 13).

- A burst of API requests (16 clients × 20, half with wrong tokens) against the service in its
  production shape (`manage.py serve`: uvicorn and its Celery worker process, PostgreSQL,
  Redis) must leave it holding a bounded number of connections and answer no 5xx.
- `/healthz` says what works; it answers 503 naming the database when that is unreachable.
- `/metrics` is Prometheus text and counts a run by status once it ran; it asks for its token
  when one is set, and without one is open only on the embedded shape or when the operator
  opens it (AIPERF_METRICS_OPEN).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from aiperf_web.bench.burst import ConnectionCounter, burst, served
from aiperf_web.core.mock import free_port
from aiperf_web.ops.metrics import metrics_text
from aiperf_web.ops.viewers import viewer_join
from aiperf_web.teams.services import api_token_create, team_create
from runner.servermetrics.exposition import Exposition, parse_exposition
from tests.infra import needs
from tests.web.conftest import ROOT, World, _test_database_url

# What the whole service (web process with its reaper thread, worker parent, worker children)
# may hold on the database after, and during, a burst of 16 concurrent clients.
MAX_HELD = 12
APP_NAME = f"aiperf-ops-test-{os.getpid()}"
production_only = needs(
    not (settings.DATABASE_URL and settings.REDIS_URL),
    "the production shape (DATABASE_URL and REDIS_URL set, as .ci/run does)",
)


@pytest.fixture(scope="module")
def service(django_db_setup: Any, tmp_path_factory: Any) -> Iterator[str]:
    """`manage.py serve` on the test database with its own Celery worker process and queue;
    every connection it opens is named APP_NAME."""
    queue = f"runs-ops-{os.getpid()}"
    env = {
        "DATABASE_URL": _test_database_url(),
        "AIPERF_RUNS_QUEUE": queue,
        "PGAPPNAME": APP_NAME,
        "AIPERF_LOG_LEVEL": "WARNING",
    }
    log = tmp_path_factory.mktemp("ops") / "serve.log"
    with served(
        port=free_port(), env=env, args=["--no-migrate", "--no-bootstrap", "--no-mock"], log=log
    ) as base:
        yield base


def _metrics(text: str) -> Exposition:
    exposition = parse_exposition(text)
    assert exposition.skipped_lines == 0, text
    return exposition


def _value(exposition: Exposition, series: str, **labels: str) -> float | None:
    for sample in exposition.series(series):
        if all(sample.label(k) == v for k, v in labels.items()):
            return sample.value
    return None


@production_only
def test_a_burst_of_api_requests_holds_few_connections_and_answers_no_5xx(
    transactional_db: Any, service: str
) -> None:
    user = User.objects.create_user("burst", password="pw-burst-1")
    team_create(name="burst", owner=user)
    _, token = api_token_create(user=user, name="burst")
    counter = ConnectionCounter(app=APP_NAME)
    counter.start()
    result = burst(url=f"{service}/api/v1/runs", good_token=token, threads=16, requests=20)
    held = counter.stop()
    print(
        f"connections: peak {counter.peak}, held after {held}; statuses {dict(result.statuses)}; "
        f"latency p50 {result.pct_ms(0.5):.0f} ms p95 {result.pct_ms(0.95):.0f} ms"
    )
    assert result.failures == []
    assert result.server_errors == 0, dict(result.statuses)
    assert dict(result.statuses) == {200: 160, 401: 160}
    assert counter.peak <= MAX_HELD
    assert held <= MAX_HELD


@production_only
def test_healthz_says_database_broker_and_worker_are_ok_on_the_running_service(
    service: str, wait_for: Callable[..., Any]
) -> None:
    first = httpx.get(f"{service}/healthz", timeout=10)
    assert first.status_code == 200, first.text
    assert first.json()["database"] == "ok" and first.json()["broker"] == "ok"

    # The worker process serve started answers for its queue once it is up.
    def worker_ok() -> Any:
        body = httpx.get(f"{service}/healthz", timeout=10).json()
        return body if body["worker"] == "ok" else None

    assert wait_for(worker_ok, timeout_s=60, every_s=1.0) == {
        "database": "ok",
        "broker": "ok",
        "worker": "ok",
    }


def test_healthz_answers_503_naming_the_database_when_it_is_unreachable(tmp_path: Path) -> None:
    closed = free_port()  # nothing listens there
    env = {
        "DATABASE_URL": f"postgresql://postgres@127.0.0.1:{closed}/nowhere",
        "AIPERF_DATA_DIR": str(tmp_path),
        "AIPERF_RUNS_QUEUE": f"runs-nowhere-{os.getpid()}",
        "AIPERF_LOG_LEVEL": "CRITICAL",
    }
    args = ["--no-migrate", "--no-bootstrap", "--no-mock", "--no-worker"]
    with served(port=free_port(), env=env, args=args, log=tmp_path / "serve.log") as base:
        response = httpx.get(f"{base}/healthz", timeout=20)
    body = response.json()
    assert response.status_code == 503, body
    assert body["database"].startswith("unreachable"), body
    assert body["broker"] == "ok"
    assert body["worker"] == f"none seen in {settings.AIPERF_STALE_RUN_S} s"


def test_metrics_count_a_run_by_status_once_it_ran(
    live_world: World, wait_for: Callable[..., Any], settings: Any
) -> None:
    world = live_world
    settings.AIPERF_METRICS_TOKEN = "scrape-secret"  # closed without one in production
    scraper = Client(HTTP_AUTHORIZATION="Bearer scrape-secret")
    before = _metrics(scraper.get("/metrics").content.decode())
    succeeded = _value(before, "aiperf_runs", status="succeeded")
    assert succeeded is not None and succeeded >= 1  # the world's finished run

    api = world.api("owner")
    response = api.post(
        "/api/v1/runs",
        {"scenario": str(world.scenario.uuid), "endpoint": str(world.endpoint.uuid)},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    run_id = response.json()["id"]
    wait_for(
        lambda: api.get(f"/api/v1/runs/{run_id}").json()["status"] == "succeeded",
        timeout_s=90,
        every_s=0.2,
    )

    reply = scraper.get("/metrics")
    assert reply.status_code == 200
    assert reply["Content-Type"].startswith("text/plain; version=0.0.4")
    after = _metrics(reply.content.decode())
    assert _value(after, "aiperf_runs", status="succeeded") == succeeded + 1
    assert _value(after, "aiperf_runs", status="running") == 0
    assert _value(after, "aiperf_queue_depth", queue=settings.AIPERF_RUNS_QUEUE) == 0
    ages = after.series("aiperf_worker_heartbeat_age_seconds")
    assert ages and all(0 <= s.value < 3600 for s in ages)
    assert after.families["aiperf_http_request_duration_seconds"].kind == "histogram"
    assert (_value(after, "aiperf_http_request_duration_seconds_count", status="2xx") or 0) >= 1


def test_metrics_count_open_websocket_viewers(db: Any) -> None:
    def viewers() -> float | None:
        return _value(_metrics(metrics_text()), "aiperf_websocket_viewers", consumer="run")

    start = viewers() or 0
    viewer = viewer_join("run")
    assert viewers() == start + 1
    viewer.leave()
    viewer.leave()  # a second disconnect counts once
    assert viewers() == start


@pytest.mark.parametrize("shape", ["embedded", "production"])
def test_metrics_without_a_token_are_open_only_on_purpose(
    db: Any, settings: Any, shape: str
) -> None:
    # The default follows the shape the settings were read in: open on a laptop (neither
    # DATABASE_URL nor REDIS_URL), closed on a served site (either set).
    environ = {} if shape == "embedded" else {"REDIS_URL": "redis://127.0.0.1:6379/0"}
    settings.AIPERF_METRICS_OPEN = _metrics_open_default(environ)
    settings.AIPERF_METRICS_TOKEN = ""
    reply = Client().get("/metrics")
    if shape == "embedded":
        assert reply.status_code == 200
        assert _value(_metrics(reply.content.decode()), "aiperf_runs", status="queued") is not None
    else:
        assert reply.status_code == 403
        text = reply.content.decode()
        assert "AIPERF_METRICS_TOKEN" in text and "AIPERF_METRICS_OPEN=1" in text
        assert "aiperf_runs" not in text
        settings.AIPERF_METRICS_OPEN = True  # the operator opens it on purpose
        assert Client().get("/metrics").status_code == 200


def _metrics_open_default(environ: dict[str, str]) -> bool:
    """AIPERF_METRICS_OPEN as settings.py reads it from `environ` (the settings module itself,
    in a child interpreter: the test process's settings are already read)."""
    unset = ("DATABASE_URL", "REDIS_URL", "AIPERF_METRICS_OPEN")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    code = "from django.conf import settings; print(settings.AIPERF_METRICS_OPEN)"
    out = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        env={**env, **environ, "DJANGO_SETTINGS_MODULE": "aiperf_web.settings"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return {"True": True, "False": False}[out.stdout.strip().splitlines()[-1]]


def test_metrics_ask_for_the_bearer_token_when_one_is_set(db: Any, settings: Any) -> None:
    settings.AIPERF_METRICS_TOKEN = "scrape-secret"
    assert Client().get("/metrics").status_code == 401
    assert Client(HTTP_AUTHORIZATION="Bearer wrong").get("/metrics").status_code == 401
    allowed = Client(HTTP_AUTHORIZATION="Bearer scrape-secret").get("/metrics")
    assert allowed.status_code == 200
    assert _value(_metrics(allowed.content.decode()), "aiperf_runs", status="queued") is not None
