"""Browser tests: headless Debian Chromium driven by Playwright, against the service in its
production configuration: `manage.py serve` (uvicorn, HTTP + WebSocket) on the test PostgreSQL
database, Redis as broker and channel layer, and the separate `celery -A aiperf_web worker -Q
runs` process that serve starts; the built-in mock over real sockets as the endpoint.

They run when DATABASE_URL and REDIS_URL are set (as .ci/run does) and are skipped, saying
why, on the embedded default (under CI they fail instead: tests/infra.py). A failing test
leaves a full-page screenshot in tests/browser/artifacts/ (or $AIPERF_BROWSER_ARTIFACTS).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User

from tests.infra import needs
from tests.web.conftest import ROOT, _test_database_url
from tests.web.conftest import mock_url as mock_url  # the session fixture, shared

# Playwright's sync API keeps an event loop in this thread; the test's own ORM calls are plain
# synchronous ones between browser steps.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("AIPERF_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("AIPERF_BROWSER_ARTIFACTS", Path(__file__).parent / "artifacts"))
ADMIN_PASSWORD = "pw-admin-browser-1"
VIEWER_PASSWORD = "pw-viewer-browser-1"


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    # Last: the slowest tests, and Playwright's sync API leaves an event loop on this thread
    # while it runs, which the other tests' async_to_sync calls must not meet.
    items.sort(key=lambda item: "tests/browser" in str(item.fspath))
    if settings.DATABASE_URL and settings.REDIS_URL:
        return
    missing = needs(
        True,
        "browser tests run on the production configuration (set DATABASE_URL and REDIS_URL, "
        "as .ci/run does)",
    )
    for item in items:
        if "tests/browser" in str(item.fspath):
            item.add_marker(missing)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


def _free_port() -> int:
    from aiperf_web.core.mock import free_port

    return free_port()


@pytest.fixture(scope="session")
def server(django_db_setup: Any, django_db_blocker: Any, mock_url: str) -> Iterator[str]:
    """The service as production runs it, on the test database; yields its base URL."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} not found: apt-get install -y chromium (see .ci/run)")
    port = _free_port()
    log = (ARTIFACTS / "serve.log") if ARTIFACTS else None
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    # A queue of this session's own: other sessions on this machine share the Redis server.
    queue = f"runs-browser-{os.getpid()}"
    env = {
        **os.environ,
        "AIPERF_RUNS_QUEUE": queue,
        "DATABASE_URL": _test_database_url(),
        "AIPERF_MOCK_URL": mock_url,
        "AIPERF_LOG_LEVEL": "WARNING",
        # Client workers as processes: two host pool processes on a queue of this session's.
        "AIPERF_HOSTS_QUEUE": f"hosts-browser-{os.getpid()}",
        "AIPERF_HOST_PROCESSES": "2",
    }
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    import redis

    # A stale message of an earlier session would name runs this database never had.
    redis.Redis.from_url(settings.REDIS_URL).delete(queue)
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(port), "--no-migrate",
             "--no-bootstrap"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            pytest.fail(f"manage.py serve exited with {proc.returncode}; see {log}")
        try:
            with urllib.request.urlopen(f"{base}/health/", timeout=1) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"manage.py serve did not answer within 60 s; see {log}")
        time.sleep(0.2)
    yield base
    proc.send_signal(2)  # SIGINT: serve stops its worker process too
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


class Site:
    """The demo objects (as the embedded default's first start makes them) and personas."""

    def __init__(self, base: str, mock_url: str) -> None:
        from aiperf_web.stack.demo import demo_bootstrap
        from aiperf_web.teams.models import Membership, Role

        self.base = base
        boot = demo_bootstrap(mock_url=mock_url)
        self.team = boot.team
        self.scenario = boot.scenario
        self.endpoint = boot.endpoint
        self.admin = User.objects.get(username="admin")
        self.admin.set_password(ADMIN_PASSWORD)
        self.admin.save()
        self.viewer = User.objects.create_user("viewer", password=VIEWER_PASSWORD)
        Membership.objects.create(team=self.team, user=self.viewer, role=Role.VIEWER)

    def url(self, path: str) -> str:
        return f"{self.base}{path}"


@pytest.fixture
def site(transactional_db: Any, server: str, mock_url: str) -> Iterator[Site]:
    yield Site(server, mock_url)
    # Let no run of this test write into the next test's (flushed) database.
    from aiperf_web.runs.models import ACTIVE, Run

    deadline = time.monotonic() + 60
    while Run.objects.filter(status__in=ACTIVE).exists() and time.monotonic() < deadline:
        Run.objects.filter(status="queued").update(status="cancelled")
        for run in Run.objects.filter(status="running", cancel_requested_at__isnull=True):
            Run.objects.filter(pk=run.pk).update(cancel_requested_at=run.created_at)
        time.sleep(0.3)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    profile = ARTIFACTS / "profile"
    shutil.rmtree(profile, ignore_errors=True)
    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run",
                  "--disable-quic"],
        )  # fmt: skip
        yield b
        b.close()


@pytest.fixture
def context(browser: Any, request: Any) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1366, "height": 900}, accept_downloads=True)
    errors: list[str] = []
    ctx.on("weberror", lambda e: errors.append(str(e.error)))
    yield ctx
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
        for i, page in enumerate(ctx.pages):
            # The page may be gone; the test's own error matters more.
            with contextlib.suppress(Exception):
                page.screenshot(path=str(ARTIFACTS / f"{name}-{i}.png"), full_page=True)
    ctx.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def login(page: Any, site: Site, username: str = "admin", password: str = ADMIN_PASSWORD) -> None:
    page.goto(site.url("/accounts/login/"))
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit], form button")
    page.wait_for_url(re.compile(r".*/runs/$"))
