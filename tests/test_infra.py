"""The real tier never drops silently: under CI a test that needs a missing service fails with
the reason, outside CI it skips with it, and the embedded pass skips on purpose (tests/infra.py).
Each case runs pytest on a real test of the suite in a child process, as CI would."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FLEET_TEST = (
    "tests/runner/fleet/test_line.py::test_a_stop_ends_the_wait_for_hosts_between_redis_commands"
)
WEB_TEST = "tests/web/test_layers.py"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pytest(target: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CI", "AIPERF_TEST_PASS", "DATABASE_URL", "REDIS_URL")
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", target, "-rs", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=base | env,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.fixture(scope="module")
def no_redis() -> str:
    return f"redis://127.0.0.1:{_closed_port()}/5"


def test_the_fleet_without_redis_fails_under_ci(no_redis: str) -> None:
    done = _pytest(FLEET_TEST, CI="true", AIPERF_FLEET_TEST_REDIS=no_redis)
    assert done.returncode == 1, done.stdout
    assert "the fleet needs one [CI=true: the real tier must run, not skip]" in done.stdout
    assert " skipped" not in done.stdout


def test_the_fleet_without_redis_skips_with_the_reason_outside_ci(no_redis: str) -> None:
    done = _pytest(FLEET_TEST, AIPERF_FLEET_TEST_REDIS=no_redis)
    assert done.returncode == 0, done.stdout
    assert f"SKIPPED [1] {FLEET_TEST.split('::')[0]}" in done.stdout
    assert f"no Redis at {no_redis}" in done.stdout and "1 skipped" in done.stdout


def test_web_tests_under_ci_without_the_production_shape_fail_naming_the_fix() -> None:
    done = _pytest(WEB_TEST, CI="true")
    assert done.returncode == 1, done.stdout
    assert "DATABASE_URL and REDIS_URL are not both set" in done.stdout
    assert "scripts/services.sh up" in done.stdout


def test_the_embedded_pass_under_ci_runs_on_the_embedded_default() -> None:
    done = _pytest(WEB_TEST, CI="true", AIPERF_TEST_PASS="embedded")
    assert done.returncode == 0, done.stdout
    assert " passed" in done.stdout and "error" not in done.stdout.lower()
