"""Web test fixtures: three personas and anonymous, a team's objects, the built-in mock over
real sockets, and a real Celery worker consuming the `runs` queue.

Two shapes, chosen by the environment like the service itself:
- embedded (no DATABASE_URL/REDIS_URL): SQLite file, in-memory broker, the worker is the
  embedded one (a WorkController thread), as `manage.py serve` runs it;
- production (DATABASE_URL and REDIS_URL set, as .ci/run does): PostgreSQL, Redis, and a
  separate `celery -A aiperf_web worker -Q runs` process on the test database.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from tests.conftest import is_live
from tests.fixtures import DAG_SPAWN
from tests.infra import unavailable

ROOT = Path(__file__).resolve().parents[2]
WEB_TESTS = Path(__file__).resolve().parent


# Files whose tests, when they use no worker, server or committed transaction (`live`), check
# what lies above the shape: each runs inside one rolled-back transaction through the test
# client or a service, and touches no broker, channel layer, cache or engine-specific SQL. The
# PostgreSQL pass is the stricter one for them (it enforces the column lengths SQLite ignores).
ABOVE_THE_SHAPE = frozenset(
    {
        "test_access.py",  # who sees which page and API route: querysets filtered by team
        "test_bounded_inputs.py",  # limits in the schema, forms and services, before the DB
        "test_inputs.py",  # 4xx for bad input, secrets kept: validation code
        "test_error_pages.py",  # templates of the 400/403/404/500 pages and the API's body
        "test_dashboard_pages.py",  # page wording and markup
        "test_endpoint_safety.py",  # where an endpoint's key may go: URL and HTTP checks
        "test_affinity.py",  # a probe of the mock over a socket, stored on the endpoint
    }
)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks given here
def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Every web test that uses the database (and so the worker, broker and channel layer of
    the shape it runs in) is marked `embedded_shape`, unless it says it is
    `shape_independent` or is a test of ABOVE_THE_SHAPE that is not `live`: `make
    web-embedded` runs again, on the embedded default, only those.
    The rest (pure checks, and tests that start `serve` in a shape of their own) behave the
    same whatever DATABASE_URL and REDIS_URL say, so the first pass is enough."""
    for item in items:
        if WEB_TESTS not in Path(str(item.fspath)).parents:
            continue
        if item.get_closest_marker("shape_independent") is not None:
            continue
        if Path(str(item.fspath)).name in ABOVE_THE_SHAPE and not is_live(item):
            continue
        if "django_db_setup" in item.fixturenames or item.get_closest_marker("django_db"):
            item.add_marker(pytest.mark.embedded_shape)


@pytest.fixture(scope="session")
def mock_url() -> Iterator[str]:
    from aiperf_web.core.mock import MockServer, free_port

    mock = MockServer(port=free_port(), time_scale=0.01)
    mock.start()
    yield mock.url
    mock.stop()


def _test_database_url() -> str:
    """The test database as a URL for the processes a test starts (password included)."""
    db = settings.DATABASES["default"]
    host, port = db.get("HOST") or "127.0.0.1", db.get("PORT") or 5432
    user = quote(str(db.get("USER") or ""), safe="")
    if db.get("PASSWORD"):
        user += ":" + quote(str(db["PASSWORD"]), safe="")
    return f"postgresql://{user}@{host}:{port}/{db['NAME']}"


WORKER_START_S = 120  # how long a worker process may take to answer its first ping


def point_producer_at(url: str) -> None:
    """This process's Celery app sends to `url` from now on (its pools are rebuilt lazily).
    kombu keeps one pool per connection in a process-wide registry, so closing the app's pool
    alone would leave a closed pool to be handed back when the URL returns: reset them all."""
    from kombu import pools

    from aiperf_web.celery import app

    pools.reset()
    app.conf.broker_url = url
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture(scope="session")
def run_worker(django_db_setup: Any, django_db_blocker: Any) -> Iterator[str]:
    """A worker consuming the `runs` queue for the whole session; yields its kind."""
    if settings.EMBEDDED:
        from aiperf_web.stack.worker import EmbeddedWorker

        worker = EmbeddedWorker(concurrency=2)
        worker.start()
        yield "embedded"
        worker.stop()
        return
    import redis

    # A queue and a worker name of this session's own: other sessions on the machine share
    # the Redis server.
    queue = f"runs-test-{os.getpid()}"
    node = f"{queue}@localhost"
    settings.AIPERF_RUNS_QUEUE = queue
    # Runs with client_worker_processes send their hosts here (tests/web/test_fleet_runs.py).
    settings.AIPERF_HOSTS_QUEUE = f"hosts-test-{os.getpid()}"
    redis.Redis.from_url(settings.REDIS_URL).delete(queue)
    env = {
        **os.environ,
        "DATABASE_URL": _test_database_url(),
        "AIPERF_RUNS_QUEUE": queue,
        "AIPERF_HOSTS_QUEUE": settings.AIPERF_HOSTS_QUEUE,
    }
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
            "--concurrency",
            "2",
            "--prefetch-multiplier",
            "1",
            "--loglevel",
            "WARNING",
            "--without-mingle",
            "--without-gossip",
        ],
        cwd=ROOT,
        env=env,
    )
    from aiperf_web.celery import app

    # A worker answers in 2-3 s on a quiet machine; the suite's parallel processes can make a
    # cold start (Django, Celery, the app's imports) take far longer.
    deadline = time.monotonic() + WORKER_START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the celery worker exited with {proc.returncode}")
        if app.control.ping(destination=[node], timeout=0.5):
            break
    else:
        proc.kill()
        pytest.fail(f"the celery worker did not answer a ping within {WORKER_START_S} s")
    yield "process"
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="module")
def hosts_worker(run_worker: str) -> Iterator[str]:
    """Three host pool processes (a `celery worker -Q <hosts queue>`) for runs whose client
    workers are processes (tests/web/test_fleet_*.py); yields the queue."""
    if settings.EMBEDDED:
        unavailable("client workers as processes need Redis (the embedded default has none)")
    from aiperf_web.celery import app

    queue = settings.AIPERF_HOSTS_QUEUE
    node = f"{queue}@localhost"
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "aiperf_web", "worker", "-Q", queue, "-n", node,
         "--concurrency", "3", "--prefetch-multiplier", "1", "--loglevel", "WARNING",
         "--without-mingle", "--without-gossip"],
        cwd=ROOT,
        env={**os.environ, "AIPERF_HOSTS_QUEUE": queue},
    )  # fmt: skip
    deadline = time.monotonic() + WORKER_START_S
    while not app.control.ping(destination=[node], timeout=0.5):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the hosts worker did not answer a ping within {WORKER_START_S} s")
    yield queue
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Any) -> None:
    # Personas are created per test; PBKDF2's deliberate slowness would dominate the suite.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


SETTLE_S = 60  # how long a test's leftover runs get to stop before its database is flushed


@pytest.fixture(autouse=True)
def _nothing_left_running(request: Any) -> Iterator[None]:
    """A committed test's sweeps and runs end before its tables are flushed.

    The session's worker outlives every test: a run or sweep a test launched and left (a sweep
    page test that launches a simulated twin, say) keeps writing while `transactional_db`
    truncates the tables, and the flush fails (CI saw "couldn't be flushed", then the next test
    found the last one's users). Depending on `transactional_db` makes this teardown run before
    its flush: active sweeps are ended (no further point is made), queued runs cancelled,
    running ones asked to stop, and their worker is given SETTLE_S to store their end."""
    if "transactional_db" not in request.fixturenames:
        yield
        return
    request.getfixturevalue("transactional_db")
    yield
    from aiperf_web.runs.models import Run, Status
    from aiperf_web.sweeps.models import SWEEP_ACTIVE, Sweep, SweepStatus

    now = timezone.now()
    Sweep.objects.filter(status__in=SWEEP_ACTIVE).update(
        status=SweepStatus.CANCELLED, reason="cancelled", cancel_requested_at=now, finished_at=now
    )
    deadline = time.monotonic() + SETTLE_S
    while True:
        Run.objects.filter(status=Status.QUEUED).update(
            status=Status.CANCELLED, finished_at=now, cancel_requested_at=now, reason="cancelled"
        )
        Run.objects.filter(status=Status.RUNNING, cancel_requested_at__isnull=True).update(
            cancel_requested_at=now
        )
        # A run is being executed while its worker beats (every 5 s, runs/executing.py); a
        # row a test wrote as running, or whose worker the test killed, has no fresh beat.
        beating = timezone.now() - timedelta(seconds=12)
        if not Run.objects.filter(status=Status.RUNNING, heartbeat_at__gte=beating).exists():
            return
        if time.monotonic() > deadline:
            pytest.fail(f"runs this test left were still running {SETTLE_S} s after it ended")
        time.sleep(0.2)


@pytest.fixture
def wait_for() -> Callable[..., Any]:
    def wait(predicate: Callable[[], Any], *, timeout_s: float = 60.0, every_s: float = 0.1) -> Any:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(every_s)
        raise AssertionError(f"condition not met within {timeout_s} s")

    return wait


# -- personas ------------------------------------------------------------------------------------


class World:
    """Team A (owner = admin, teammate = member, viewer), team B (outsider = admin), and team
    A's objects: a trace, a scenario, an endpoint on the mock, a finished run with records."""

    def __init__(self, mock: str) -> None:
        from aiperf_web.endpoints.services import endpoint_create
        from aiperf_web.runs.models import Run, RunSample, Status
        from aiperf_web.runs.sink import records_insert
        from aiperf_web.scenarios.services import scenario_create, trace_upload
        from aiperf_web.teams.models import Membership, Role
        from aiperf_web.teams.services import api_token_create, team_create

        self.owner = User.objects.create_user("owner", password="pw-owner-1")
        self.teammate = User.objects.create_user("teammate", password="pw-teammate-1")
        self.viewer = User.objects.create_user("viewer", password="pw-viewer-1")
        self.outsider = User.objects.create_user("outsider", password="pw-outsider-1")
        self.team = team_create(name="alpha", owner=self.owner)
        Membership.objects.create(team=self.team, user=self.teammate, role=Role.MEMBER)
        Membership.objects.create(team=self.team, user=self.viewer, role=Role.VIEWER)
        self.other_team = team_create(name="beta", owner=self.outsider)
        # The project's own fixture, not a built-in sample: the public samples may be absent.
        self.trace = trace_upload(
            actor=self.owner,
            team=self.team,
            filename=DAG_SPAWN.name,
            chunks=[DAG_SPAWN.read_bytes()],
            name="alpha-trace",
        )
        self.scenario = scenario_create(
            actor=self.owner,
            team=self.team,
            name="alpha-scenario",
            spec={"duration_s": 2, "concurrency": 2, "speedup": 50, "snapshot_interval_s": 0.5},
            trace_ids=[self.trace.uuid],
            tags="smoke",
        )
        self.endpoint = endpoint_create(
            actor=self.owner,
            team=self.team,
            name="alpha-mock",
            base_url=mock,
            model="mock-model",
            api_key="sk-alpha-secret",
            server_kind="dynamo",
        )
        self.run = Run.objects.create(
            team=self.team,
            scenario=self.scenario,
            scenario_name=self.scenario.name,
            endpoint=self.endpoint,
            endpoint_name=self.endpoint.name,
            target_kind="endpoint",
            spec=self.scenario.spec,
            status=Status.SUCCEEDED,
            summary={"requests": 2, "errors": 0, "ttft_ms": {"p50": 1.0, "p90": 2.0, "p99": 3.0}},
            records_count=3,
        )
        records_insert(
            run_pk=self.run.pk,
            first_seq=0,
            batch=[
                {"request_id": 1, "warmup": True},
                {"request_id": 2, "warmup": False},
                {"request_id": 3, "warmup": False},
            ],  # type: ignore[list-item]
        )
        RunSample.objects.create(run=self.run, seq=0, t_s=1.0, data={"t_s": 1.0, "progress": 1.0})
        self.tokens = {
            name: api_token_create(user=user, name="test")[1]
            for name, user in (
                ("owner", self.owner),
                ("teammate", self.teammate),
                ("viewer", self.viewer),
                ("outsider", self.outsider),
            )
        }

    def user(self, persona: str) -> User | None:
        return None if persona == "anonymous" else getattr(self, persona)

    def client(self, persona: str) -> Client:
        client = Client()
        user = self.user(persona)
        if user is not None:
            client.force_login(user)
        return client

    def api(self, persona: str) -> Client:
        if persona == "anonymous":
            return Client()
        return Client(HTTP_AUTHORIZATION=f"Bearer {self.tokens[persona]}")

    def launch_fleet_run(self, *, allow_overlap: bool = False, **overrides: Any) -> str:
        """The teammate launches team A's scenario on the mock through the API, its client
        workers as processes (three unless `overrides` say otherwise); returns the run's id.
        `allow_overlap`: it may share the endpoint with a running run (no endpoint lease)."""
        response = self.api("teammate").post(
            "/api/v1/runs",
            {
                "scenario": str(self.scenario.uuid),
                "endpoint": str(self.endpoint.uuid),
                "overrides": {"client_worker_processes": True, "client_workers": 3, **overrides},
                "allow_overlap": allow_overlap,
            },
            content_type="application/json",
        )
        assert response.status_code == 201, response.content
        return str(response.json()["id"])


def final_run(run_id: str, wait_for: Callable[..., Any], timeout_s: float = 120) -> Any:
    """The run once it has ended (succeeded, failed or cancelled)."""
    from aiperf_web.runs.models import Run

    def ended() -> Any:
        run = Run.objects.get(uuid=run_id)
        return run if run.status in ("succeeded", "failed", "cancelled") else None

    return wait_for(ended, timeout_s=timeout_s, every_s=0.2)


def samples_dir_with(folder: Path, *, key: str, source: Path) -> Path:
    """`folder` as an AIPERF_SAMPLES_DIR where built-in sample `key` is installed, its file a
    copy of the project fixture `source`: sample import works without the public traces."""
    from aiperf_web.scenarios.samples import SAMPLES

    path = folder / SAMPLES[key].relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(source.read_bytes())
    return folder


@pytest.fixture
def world(db: Any, mock_url: str) -> World:
    return World(mock_url)


@pytest.fixture
def live_world(transactional_db: Any, mock_url: str, run_worker: str) -> World:
    """The same objects, committed, with a worker consuming the queue."""
    return World(mock_url)


@pytest.fixture(scope="module")
def service(django_db_setup: Any, django_db_blocker: Any) -> Iterator[str]:
    """The ASGI application as uvicorn serves it, in a thread of the test process on the test
    database, on a free loopback port; yields its base URL. For what a test client would hide:
    how much of a body is read before a refusal, what goes over a real socket."""
    import uvicorn

    from aiperf_web.asgi import application
    from aiperf_web.core.mock import free_port

    port = free_port()
    config = uvicorn.Config(
        application, host="127.0.0.1", port=port, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    with django_db_blocker.unblock():
        thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
        thread.start()
        deadline = time.monotonic() + 20
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                pytest.fail("uvicorn did not start within 20 s")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
        server.should_exit = True
        thread.join(timeout=10)
