"""`python -m runner service sweep ...` (issue 20's CLI parity) end to end: a subprocess against
the service served by uvicorn with a real worker: launch --wait prints a row per point as it
ends and exits by the verdict, show, list, export, and refusals as one line, exit 2."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aiperf_web.sweeps.models import Sweep
from tests.web.conftest import ROOT, World

Cli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def cli(service: str, tmp_path: Path, live_world: World) -> Cli:
    env = {k: v for k, v in os.environ.items() if k not in ("AIPERF_TOKEN", "AIPERF_URL")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    env["AIPERF_TOKEN"] = live_world.tokens["teammate"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "runner", "service", "sweep", *args, "--url", service]
        return subprocess.run(
            command, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env
        )

    return run


def test_launch_wait_prints_each_point_and_exits_by_the_verdict_then_show_list_export(
    live_world: World, cli: Cli, tmp_path: Path
) -> None:
    launched = cli(
        "launch",
        live_world.scenario.name,
        "--endpoint",
        "simulated",
        "--concurrency",
        "1,2",
        "--arm",
        "legacy:policy=legacy",
        "--arm",
        "spawn-pin:policy=spawn-pin",
        "--set",
        "duration_s=20",
        "--wait",
        "--every",
        "0.5",
    )
    assert launched.returncode == 0, (launched.stdout, launched.stderr)
    out = launched.stdout
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["#", "arm", "load"], out
    rows = [line.split() for line in lines[1:5]]
    assert sorted((r[1], r[2]) for r in rows) == sorted(
        (arm, load) for arm in ("legacy", "spawn-pin") for load in ("c=1", "c=2")
    ), out
    assert all(r[4] == "succeeded" and r[-1] == "valid" for r in rows), out
    assert "headline: " in out and "verdict: pass: 4 points, every one valid" in out
    assert "point 1: legacy at c=1" in launched.stderr

    sweep = Sweep.objects.get()
    shown = cli("show", str(sweep.uuid))
    assert shown.returncode == 0 and "succeeded" in shown.stdout, shown.stderr
    assert f"/sweeps/{sweep.uuid}/" in shown.stdout
    listed = cli("list")
    assert listed.returncode == 0 and str(sweep.uuid) in listed.stdout, listed.stderr
    target = tmp_path / "sweep.csv"
    exported = cli("export", str(sweep.uuid), "--format", "csv", "-o", str(target))
    assert exported.returncode == 0, exported.stderr
    table = list(csv.DictReader(io.StringIO(target.read_text())))
    assert len(table) == 4 and {r["arm"] for r in table} == {"legacy", "spawn-pin"}


def test_refusals_are_one_line_and_exit_2(live_world: World, cli: Cli, settings: Any) -> None:
    bad = cli("launch", live_world.scenario.name, "--concurrency", "1,1")
    assert bad.returncode == 2, (bad.stdout, bad.stderr)
    assert len(bad.stderr.splitlines()) == 1 and "sweep.concurrency" in bad.stderr
    no_axis = cli("launch", live_world.scenario.name)
    assert no_axis.returncode == 2 and "--concurrency" in no_axis.stderr
    unknown = cli("show", "00000000-0000-0000-0000-000000000000")
    assert unknown.returncode == 2 and len(unknown.stderr.splitlines()) == 1, unknown.stderr
    assert Sweep.objects.count() == 0
