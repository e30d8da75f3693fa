"""`manage.py serve` with AIPERF_REAL_VLLM=1 starts the real vLLM on CPU (scripts/vllm-cpu.sh)
as the built-in endpoint `built-in vLLM (real, CPU)` of every team, supervised; without the
setting nothing of it runs.

The end-to-end test (marked vllm: skipped without `scripts/vllm-cpu.sh install`, a failure
under CI) starts `serve` itself, launches a run of the Claude Code fixture on that endpoint
through the API with fit_context (the fixture's contexts reach ~25,000 of the model's tokens;
its window is 4,096), reads the run page's server-metrics card, then kills the vLLM server:
/healthz answers 503 naming it until serve has started it again.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from aiperf_web.core.mock import free_port
from aiperf_web.endpoints.models import Endpoint, ServerKind
from aiperf_web.stack import vllm as real
from aiperf_web.stack.demo import REAL_VLLM_ENDPOINT, real_vllm_bootstrap
from aiperf_web.teams.models import Team
from tests.fixtures import CLAUDE_CODE_SUBAGENTS
from tests.infra import unavailable
from tests.web.conftest import ROOT

PASSWORD = "real-vllm-test-pw"


def test_every_team_gets_the_endpoint_which_follows_the_server(db: Any) -> None:
    """Created in each team with server kind vLLM; a restart on another port moves them all; a
    team's own endpoint of that name is left alone; a team created later gets it at the next
    start."""
    first, second, own = (Team.objects.create(name=n) for n in ("t1", "t2", "own"))
    mine = Endpoint.objects.create(
        team=own, name=REAL_VLLM_ENDPOINT, base_url="http://10.0.0.9:1", model="m"
    )
    seeded = real_vllm_bootstrap(url="http://127.0.0.1:8090", model="tiny")
    assert sorted(e.team.name for e in seeded) == ["t1", "t2"]
    assert {(e.server_kind, e.is_builtin, e.base_url, e.model) for e in seeded} == {
        (ServerKind.VLLM, True, "http://127.0.0.1:8090", "tiny")
    }
    Team.objects.create(name="later")
    moved = real_vllm_bootstrap(url="http://127.0.0.1:40001", model="tiny")
    assert sorted(e.team.name for e in moved) == ["later", "t1", "t2"]
    assert {e.pk for e in seeded} < {e.pk for e in moved}  # moved, not created again
    assert Endpoint.objects.filter(name=REAL_VLLM_ENDPOINT).count() == 4
    assert {e.base_url for e in moved} == {"http://127.0.0.1:40001"}
    mine.refresh_from_db()
    assert (mine.base_url, mine.is_builtin) == ("http://10.0.0.9:1", False)
    assert first.pk != second.pk


def _serve_env(tmp_path: Path) -> dict[str, str]:
    # The embedded shape (no DATABASE_URL/REDIS_URL): the vLLM child is the same either way.
    return {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")} | {
        "AIPERF_DATA_DIR": str(tmp_path),
        "AIPERF_ADMIN_PASSWORD": PASSWORD,
        "AIPERF_MOCK_PORT": str(free_port()),
        "AIPERF_REAL_VLLM": "1",
        "AIPERF_SAMPLES_DIR": str(tmp_path / "no-samples"),
    }


def _group(pgid: int) -> list[int]:
    """The processes of process group `pgid`."""
    found = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True)
    return [int(pid) for pid in found.stdout.split()]


def _login(base: str) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=30, follow_redirects=True)
    page = client.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token, "the login form carries a CSRF token"
    done = client.post(
        "/accounts/login/",
        data={"username": "admin", "password": PASSWORD, "csrfmiddlewaretoken": token[1]},
        headers={"Referer": f"{base}/accounts/login/"},
    )
    assert done.status_code == 200 and "/accounts/login/" not in str(done.url), done.text[:500]
    return client


@pytest.mark.vllm
@pytest.mark.slow
@pytest.mark.shape_independent  # serve runs in a shape of its own here
@pytest.mark.timeout(2400)  # two starts of the server: 1-2 min each on 2 idle cores, 3-10 busy
def test_serve_runs_the_fixture_on_the_real_vllm_and_restarts_it_when_it_dies(
    tmp_path: Path, wait_for: Callable[..., Any]
) -> None:
    missing = real.real_vllm_missing()
    if missing is not None:
        unavailable(f"real vLLM: {missing}")
    env = _serve_env(tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        serve = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )

    def healthz() -> tuple[int, dict[str, str]] | None:
        try:
            response = httpx.get(f"{base}/healthz", timeout=10)
        except httpx.HTTPError:
            return None
        return response.status_code, response.json()

    def vllm_says(pattern: str, status: int) -> Callable[[], Any]:
        def check() -> Any:
            got = healthz()
            return got if got and got[0] == status and re.match(pattern, got[1]["vllm"]) else None

        return check

    try:
        started = time.monotonic()
        got = wait_for(healthz, timeout_s=120, every_s=0.5)
        assert got[1]["vllm"] in ("starting", "ok"), got  # the site serves meanwhile
        wait_for(vllm_says("ok$", 200), timeout_s=900, every_s=1)
        ready_s = time.monotonic() - started
        text = log.read_text()
        assert f"{REAL_VLLM_ENDPOINT} ready on http://127.0.0.1:" in text, text[-3000:]
        assert f"endpoint {REAL_VLLM_ENDPOINT!r} in 1 team(s)" in text, text[-3000:]

        token = subprocess.run(
            [sys.executable, "manage.py", "create_api_token", "admin"],
            cwd=ROOT, env=env, capture_output=True, text=True, check=True,
        ).stdout.strip().splitlines()[-1]  # fmt: skip
        api = httpx.Client(
            base_url=f"{base}/api/v1", headers={"Authorization": f"Bearer {token}"}, timeout=30
        )
        (endpoint,) = [e for e in api.get("/endpoints").json() if e["name"] == REAL_VLLM_ENDPOINT]
        assert (endpoint["server_kind"], endpoint["is_builtin"]) == ("vllm", True), endpoint
        assert endpoint["model"] == "tiny"
        trace = api.post(
            "/traces",
            files={"file": (CLAUDE_CODE_SUBAGENTS.name, CLAUDE_CODE_SUBAGENTS.read_bytes())},
        )
        assert trace.status_code == 201, trace.text
        scenario = api.post(
            "/scenarios",
            json={
                "name": "claude code on the tiny vLLM",
                "traces": [trace.json()["id"]],
                "spec": {"concurrency": 2, "speedup": 1000, "max_trees": 1},
            },
        )
        assert scenario.status_code == 201, scenario.text
        launched = api.post(
            "/runs",
            json={
                "scenario": scenario.json()["id"],
                "endpoint": endpoint["id"],
                "overrides": {"fit_context": True, "target": {"metrics_interval_s": 1.0}},
            },
        )
        assert launched.status_code == 201, launched.text
        run_id = launched.json()["id"]
        run_started = time.monotonic()
        run = wait_for(
            lambda: (
                (r := api.get(f"/runs/{run_id}").json())["status"]
                in ("succeeded", "failed", "cancelled")
                and r
            ),
            timeout_s=400,
            every_s=1,
        )
        run_s = time.monotonic() - run_started
        assert run["status"] == "succeeded", run
        summary = api.get(f"/runs/{run_id}/summary.json").json()["summary"]
        assert summary["errors"] == 0 and summary["trees_completed"] == 1, summary
        assert summary["requests"] == 61 and 0 < summary["length_scale"] < 0.25, summary
        metrics = summary["server_metrics"]
        assert metrics["available"] and metrics["kind"] == "vllm", metrics
        assert metrics["figures"]["prefix_hit_ratio"]["last"] > 0.5, metrics["figures"]

        # The run page names the server kind and shows its figures.
        page = _login(base).get(f"/runs/{run_id}/")
        assert page.status_code == 200
        assert '<b id="sm-kind">vllm</b>' in page.text
        assert "prefix-cache hits, % of prompt" in page.text

        # The server dies: /healthz names it until serve has started it again, and what the
        # killed server left (its engine core and worker, in its process group) is gone.
        pid = int((tmp_path / "vllm-run" / "vllm-0.pid").read_text())
        assert _group(pid), "the server's engine core runs in its process group"
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        down = wait_for(vllm_says("down for .*lost its vllm-0", 503), timeout_s=60, every_s=0.5)
        assert down[1]["database"] == "ok", down
        wait_for(vllm_says("ok$", 200), timeout_s=900, every_s=1)
        back_s = time.monotonic() - killed
        assert _group(pid) == [], "the killed server's engine core outlived the restart"
        text = log.read_text()
        assert "the real vLLM (CPU) lost its vllm-0" in text, text[-3000:]
        assert "the real vLLM (CPU) started again (restart 1)" in text, text[-3000:]
        again = [e for e in api.get("/endpoints").json() if e["name"] == REAL_VLLM_ENDPOINT]
        assert httpx.get(f"{again[0]['base_url']}/v1/models", timeout=10).status_code == 200
        print(
            f"real vLLM in serve: ready after {ready_s:.0f} s; the fixture (61 requests, "
            f"x{summary['length_scale']:.3f}) in {run_s:.0f} s, 0 errors, prefix hits "
            f"client {summary['prefix_cache_hit_ratio']:.3f} / server "
            f"{metrics['figures']['prefix_hit_ratio']['last']:.3f}; killed, back after "
            f"{back_s:.0f} s"
        )
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=90)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait()
    # Stopping serve stops the vLLM it started.
    assert not list((tmp_path / "vllm-run").glob("*.pid"))
