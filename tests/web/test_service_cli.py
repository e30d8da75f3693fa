"""The service's command line (`python -m runner service ...`, issue 27 item 8) end to end: a
subprocess against the service served by uvicorn on a free port, with a real worker consuming
its runs. Log in with a token, list, launch, watch to the end with the exit code the verdict
gives (a leaking legacy run exits 1, spawn-pin 0), A/B, export, compare; a bad token, a server's
refusals and an address that is not the service are one line each, exit 2."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aiperf_web.runs.models import Run, Status
from aiperf_web.stack.demo import demo_bootstrap
from aiperf_web.teams.services import api_token_create
from tests.web.conftest import ROOT, World

Cli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def cli(service: str, tmp_path: Path) -> Cli:
    """Run the command line against the test service, with a config folder of the test's own
    and no token or address from the caller's environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("AIPERF_TOKEN", "AIPERF_URL")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")

    def run(*args: str, url: str | None = service) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "runner", "service", *args]
        if url is not None:
            command += ["--url", url]
        return subprocess.run(
            command, capture_output=True, text=True, timeout=240, cwd=ROOT, env=env
        )

    return run


def _one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """The whole of stderr, which must be a single `error: ...` line."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.fixture
def demo(live_world: World, mock_url: str) -> str:
    """The demo objects as `make run` makes them (team `default`: scenario `demo`, endpoint
    `built-in mock` on the mock); a token of their admin."""
    return api_token_create(user=demo_bootstrap(mock_url=mock_url).scenario.created_by)[1]


# -- logging in and lists --------------------------------------------------------------------


def test_login_keeps_the_token_for_its_server_only_readable_by_its_owner_and_lists_use_it(
    live_world: World, cli: Cli, service: str, tmp_path: Path
) -> None:
    login = cli("login", "--token", live_world.tokens["owner"])
    assert login.returncode == 0, login.stderr
    assert "alpha (admin)" in login.stdout
    config = tmp_path / "config" / "aiperf-web" / "config.json"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert json.loads(config.read_text()) == {
        "url": service,
        "tokens": {service: live_world.tokens["owner"]},
    }

    # From here on neither address nor token is given: both come from the file.
    scenarios = cli("scenarios", url=None)
    assert scenarios.returncode == 0, scenarios.stderr
    assert "alpha-scenario" in scenarios.stdout and "beta" not in scenarios.stdout
    endpoints = cli("endpoints", "--json", url=None)
    assert [e["name"] for e in json.loads(endpoints.stdout)] == ["alpha-mock"]
    runs = cli("runs", "--json", url=None)
    assert [r["id"] for r in json.loads(runs.stdout)["items"]] == [str(live_world.run.uuid)]

    # The kept token goes to the server it was given for, never to another address.
    other = cli("runs", url="http://127.0.0.1:9")
    assert "no API token for http://127.0.0.1:9" in _one_line_error(other)


def test_a_bad_token_exits_2_with_one_line_saying_how_to_log_in(
    live_world: World, cli: Cli, service: str
) -> None:
    line = _one_line_error(cli("runs", "--token", "aip_not-a-token"))
    assert f"{service} refused the API token (401" in line
    assert "python -m runner service login" in line


def test_the_servers_refusals_are_one_line_each(live_world: World, cli: Cli, settings: Any) -> None:
    viewer, owner = live_world.tokens["viewer"], live_world.tokens["owner"]
    refused = _one_line_error(cli("launch", "alpha-scenario", "--token", viewer))
    assert "POST /api/v1/runs refused (403)" in refused and "role" in refused
    missing = _one_line_error(cli("show", "not-a-run", "--token", owner))
    assert "GET /api/v1/runs/not-a-run refused (404): run not found" in missing
    invalid = _one_line_error(
        cli("launch", "alpha-scenario", "--set", "duration_s=-1", "--token", owner)
    )
    assert "refused (422): overrides.duration_s:" in invalid
    settings.AIPERF_TEAM_MAX_QUEUED = 0  # the service runs in this process: it reads this
    capped = _one_line_error(cli("launch", "alpha-scenario", "--token", owner))
    assert "refused (429): team alpha already has 0 runs queued" in capped
    assert not Run.objects.exclude(pk=live_world.run.pk).exists()  # nothing was launched


def test_an_address_that_is_not_the_service_exits_2_naming_it(
    live_world: World, cli: Cli, mock_url: str
) -> None:
    line = _one_line_error(cli("runs", "--token", live_world.tokens["owner"], url=mock_url))
    assert f"{mock_url}/api/v1/runs answered 404" in line and "not the aiperf-web API" in line


def test_names_that_match_nothing_or_several_are_refused_before_anything_is_launched(
    live_world: World, cli: Cli
) -> None:
    owner = live_world.tokens["owner"]
    unknown = _one_line_error(cli("launch", "no-such-scenario", "--token", owner))
    assert "no scenario named 'no-such-scenario'" in unknown
    endpoint = _one_line_error(
        cli("launch", "alpha-scenario", "--endpoint", "nope", "--token", owner)
    )
    assert "no endpoint named 'nope'" in endpoint
    assert not Run.objects.exclude(pk=live_world.run.pk).exists()


# -- launching, watching, the verdict's exit code -------------------------------------------


def test_a_spawn_pin_run_launched_with_wait_shows_progress_and_exits_0_on_its_pass(
    demo: str, cli: Cli
) -> None:
    # Ended by its request count at 16 lanes, not after 5 s at the demo's 64: the stop cuts
    # the requests still in flight, and on a busy machine 64 of them passed the verdict's 10 %
    # of a short run's requests, failing the run's own checks; 16 in 200 cannot.
    result = cli(
        "launch", "demo", "--endpoint", "built-in mock", "--set", "duration_s=120",
        "--set", "max_requests=200", "--set", "concurrency=16", "--set", "policy=spawn-pin",
        "--tag", "from-cli", "--wait", "--every", "0.2", "--token", demo,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    run = Run.objects.get(tags__contains="from-cli")  # a run of the service, tagged as asked
    assert run.status == Status.SUCCEEDED and run.spec["policy"] == "spawn-pin"
    assert run.spec["max_requests"] == 200
    # stderr: the launch, then progress lines ending with the last figures; stdout: the result.
    progress = result.stderr.splitlines()
    assert progress[0].startswith(f"run {run.uuid} (demo on built-in mock) queued")
    assert progress[-1].startswith(f"[{'#' * 24}] 100.0% ")
    assert " succeeded | req " in progress[-1] and progress[-1].endswith("orphans 0  switches 0")
    assert any("eta" in line or "ending" in line for line in progress)  # seen while it ran
    assert f"run {run.uuid} (demo on built-in mock) succeeded in " in result.stdout
    assert "Pass on the run's own checks" in result.stdout


def test_a_leaking_legacy_run_watched_to_its_end_exits_1_naming_the_leak(
    demo: str, cli: Cli, wait_for: Callable[..., Any]
) -> None:
    launched = cli(
        "launch", "demo", "--endpoint", "built-in mock", "--set", "duration_s=5",
        "--set", "policy=legacy", "--json", "--token", demo,
    )  # fmt: skip
    assert launched.returncode == 0, launched.stderr
    run_id = json.loads(launched.stdout)["id"]

    watched = cli("watch", run_id, "--every", "0.2", "--json", "--token", demo)
    assert watched.returncode == 1, watched.stdout + watched.stderr
    out = json.loads(watched.stdout)
    run = Run.objects.get(uuid=run_id)
    assert out["run"]["status"] == run.status == Status.SUCCEEDED
    orphans = run.summary["drain"]["orphaned_copies"]
    assert orphans > 0, run.summary["drain"]
    assert out["verdict"]["verdict"] == "fail"
    assert out["verdict"]["reasons"][0].startswith(
        f"Drain check: {orphans} orphaned session copies left"
    )
    # The same run watched again in text: the verdict's sentence, and still exit 1.
    again = cli("watch", run_id, "--quiet", "--token", demo)
    assert again.returncode == 1 and again.stderr == ""
    assert f"Fail: Drain check: {orphans} orphaned session copies left" in again.stdout


def test_an_ab_pair_is_launched_followed_compared_and_exits_by_bs_verdict(
    demo: str, cli: Cli
) -> None:
    result = cli(
        "ab", "demo", "--knob", "policy", "--set", "duration_s=30", "--wait", "--every",
        "0.2", "--token", demo,
    )  # fmt: skip
    pair = Run.objects.filter(scenario__name="demo").order_by("created_at")
    a, b = list(pair)
    assert (a.spec["policy"], b.spec["policy"]) == ("legacy", "spawn-pin")
    assert a.status == b.status == Status.SUCCEEDED
    b_verdict = cli("show", str(b.uuid), "--json", "--token", demo)
    expected = 0 if json.loads(b_verdict.stdout)["verdict"]["verdict"] == "pass" else 1
    assert result.returncode == expected, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"A: run {a.uuid} (demo on simulated cluster) succeeded"
    assert any(line.startswith("Orphaned session copies") for line in lines)
    # The comparison's columns are headed by what differs between the two: the policy.
    heads = next(line for line in lines if line.startswith("figure "))
    assert heads.split()[1:] == ["A:", "legacy", "B:", "spawn-pin"], heads


def test_ctrl_c_stops_watching_not_the_run_and_cancel_stops_the_run(
    live_world: World, cli: Cli, service: str, tmp_path: Path, wait_for: Callable[..., Any]
) -> None:
    owner = live_world.tokens["owner"]
    launched = cli(
        "launch", "alpha-scenario", "--endpoint", "alpha-mock", "--set", "duration_s=120",
        "--json", "--token", owner,
    )  # fmt: skip
    run_id = json.loads(launched.stdout)["id"]
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    command = [sys.executable, "-m", "runner", "service", "watch", run_id, "--every", "0.2",
               "--url", service, "--token", owner]  # fmt: skip
    with subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as watcher:
        assert watcher.stderr is not None
        # Interrupted once it shows the run's figures (its progress bar).
        while not (line := watcher.stderr.readline()).startswith("["):
            assert line, "the watcher ended before the run showed figures"
        watcher.send_signal(signal.SIGINT)
        rest = watcher.stderr.read()
        assert watcher.wait(timeout=30) == 130
    assert f"stopped watching; run {run_id} goes on on the service" in rest
    assert "Traceback" not in rest
    assert Run.objects.get(uuid=run_id).status == Status.RUNNING

    cancelled = cli("cancel", run_id, "--token", owner)
    assert cancelled.returncode == 0, cancelled.stderr
    assert "cancel asked" in cancelled.stdout
    wait_for(lambda: Run.objects.get(uuid=run_id).status == Status.CANCELLED, timeout_s=60)


# -- exports and compare ---------------------------------------------------------------------


def test_export_writes_what_the_api_serves_and_compare_prints_the_figures(
    live_world: World, cli: Cli, tmp_path: Path
) -> None:
    owner, run = live_world.tokens["owner"], live_world.run
    summary = cli("export", str(run.uuid), "--token", owner)
    assert summary.returncode == 0, summary.stderr
    assert json.loads(summary.stdout)["summary"] == run.summary

    records = tmp_path / "records.jsonl"
    written = cli(
        "export", str(run.uuid), "--format", "records.jsonl", "-o", str(records),
        "--token", owner,
    )  # fmt: skip
    assert written.returncode == 0, written.stderr
    assert [json.loads(line)["request_id"] for line in records.read_text().splitlines()] == [2, 3]
    assert written.stderr == f"wrote {records} ({records.stat().st_size:,} bytes)\n"

    other = Run.objects.create(
        team=live_world.team, scenario=live_world.scenario, scenario_name="alpha-scenario",
        endpoint=live_world.endpoint, endpoint_name="alpha-mock", target_kind="endpoint",
        spec=live_world.scenario.spec, status=Status.SUCCEEDED,
        summary={"requests": 4, "errors": 0, "ttft_ms": {"p50": 2.0, "p90": 3.0, "p99": 4.0}},
    )  # fmt: skip
    compared = cli("compare", str(run.uuid), str(other.uuid), "--token", owner)
    assert compared.returncode == 0, compared.stderr
    ttft = next(line for line in compared.stdout.splitlines() if line.startswith("TTFT p50"))
    assert ttft.split()[-4:] == ["1", "2", "(+100.0", "%)"]


def test_exporting_an_unknown_run_writes_no_file(
    live_world: World, cli: Cli, tmp_path: Path
) -> None:
    target = tmp_path / "summary.json"
    line = _one_line_error(
        cli("export", "not-a-run", "-o", str(target), "--token", live_world.tokens["owner"])
    )
    assert "refused (404): run not found" in line
    assert not target.exists()


def test_verify_prints_what_the_service_recomputes_and_exits_1_on_a_difference(
    live_world: World, cli: Cli
) -> None:
    from tests.web.test_verify_run import run_row, stored_run

    viewer = live_world.tokens["viewer"]  # reading: any role of the team
    run = stored_run(live_world, n=200)
    agreed = cli("verify", str(run.uuid), "--token", viewer)
    assert agreed.returncode == 0, agreed.stderr
    lines = agreed.stdout.splitlines()
    assert lines[0].startswith("200 records from http://") and f"/runs/{run.uuid}/" in lines[0]
    assert any(line.split()[:2] == ["ok", "ttft_ms.p99"] for line in lines)
    assert "largest latency_ms percentile difference" in agreed.stdout
    assert lines[-1] == "every figure agrees"

    summary = dict(run.summary or {})
    summary["requests"] = summary["requests"] + 1
    Run.objects.filter(pk=run.pk).update(summary=summary)
    differs = cli("verify", str(run.uuid), "--token", viewer)
    assert differs.returncode == 1, differs.stderr
    assert any(line.split()[:2] == ["DIFF", "requests"] for line in differs.stdout.splitlines())
    assert differs.stdout.splitlines()[-1] == "1 figures disagree"
    as_json = cli("verify", str(run.uuid), "--json", "--token", viewer)
    assert as_json.returncode == 1
    assert [f["figure"] for f in json.loads(as_json.stdout)["failures"]] == ["requests"]

    queued = run_row(live_world, status=Status.QUEUED)
    refused = _one_line_error(cli("verify", str(queued.uuid), "--token", viewer))
    assert f"GET /api/v1/runs/{queued.uuid}/verify refused (409)" in refused
    assert "no summary yet" in refused
