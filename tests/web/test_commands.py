"""The management commands people and scripts use: serve (the whole service, one process
tree) and run_scenario (headless, exit code by outcome)."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from django.core.management import CommandError, call_command

from aiperf_web.core.mock import free_port
from aiperf_web.endpoints.services import endpoint_create
from tests.web.conftest import ROOT, World


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def test_serve_runs_the_service_with_its_mock_and_stops_them_together(tmp_path: Path) -> None:
    port, mock_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")} | {
        "AIPERF_DATA_DIR": str(tmp_path),
        "AIPERF_ADMIN_PASSWORD": "serve-test-pw",
        "AIPERF_MOCK_PORT": str(mock_port),
    }
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health/", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            pytest.fail("serve did not answer within 60 s")
        assert httpx.get(f"http://127.0.0.1:{mock_port}/health", timeout=2).status_code == 200
        login = httpx.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=5)
        assert login.status_code == 200 and "Log in" in login.text
        children = _children(proc.pid)
        assert children, "the mock runs as a child of serve"
    finally:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=30)
    assert f"http://127.0.0.1:{port}/" in output and "admin" in output
    time.sleep(0.5)
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{mock_port}/health", timeout=1)
    assert (tmp_path / "aiperf.sqlite3").exists()


def test_run_scenario_waits_prints_and_exits_zero_on_success(live_world: World) -> None:
    world = live_world
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "run_scenario",
        world.scenario.name,
        "--user",
        "owner",
        "--inline",
        "--set",
        "duration_s=30",
        stdout=out,
        stderr=err,
    )
    assert "succeeded" in out.getvalue() and "requests:" in out.getvalue()
    assert "queued" in err.getvalue()


def test_run_scenario_exits_non_zero_when_the_run_fails(live_world: World, mock_url: str) -> None:
    world = live_world
    endpoint_create(
        actor=world.owner,
        team=world.team,
        name="wrong",
        base_url=mock_url,
        model="nope",
        server_kind="dynamo",
    )
    with pytest.raises(SystemExit) as exit_info:
        call_command(
            "run_scenario",
            world.scenario.name,
            "--user",
            "owner",
            "--endpoint",
            "wrong",
            "--inline",
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )
    assert exit_info.value.code == 1


def test_run_scenario_rejects_bad_input_with_exit_code_2(world: World) -> None:
    for args in (["no-such-scenario"], [world.scenario.name, "--set", "duration_s=-4"]):
        # call_command raises what `manage.py` turns into its exit code.
        with pytest.raises(CommandError) as error:
            call_command(
                "run_scenario", *args, "--user", "owner", stdout=io.StringIO(), stderr=io.StringIO()
            )
        assert error.value.returncode == 2
