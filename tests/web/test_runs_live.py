"""Runs executed for real: the API launches, a real worker (the embedded one, or a separate
`celery -A aiperf_web worker -Q runs` process on PostgreSQL + Redis) claims the run, the engine
replays against the built-in mock over real sockets, the sink stores samples and records."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.core.management import call_command
from django.test import Client

import runner
from aiperf_web.endpoints.services import endpoint_create
from aiperf_web.runs.models import Run, RunRecord, RunSample
from aiperf_web.stack.demo import demo_bootstrap
from tests.fixtures import CLAUDE_CODE_SUBAGENTS
from tests.web.conftest import World, samples_dir_with

# The summary keys of docs/product.md §6 (tests/runner/cli restates the contract itself).
SUMMARY_KEYS = {*runner.SUMMARY_KEYS, *runner.LATENCY_KEYS}
FINAL = {"succeeded", "failed", "cancelled"}


def _launch(api: Client, scenario: Any, endpoint: Any, **overrides: Any) -> dict[str, Any]:
    response = api.post(
        "/api/v1/runs",
        {"scenario": str(scenario), "endpoint": str(endpoint), "overrides": overrides},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    return dict(response.json())


def _final(
    api: Client, run_id: str, wait_for: Callable[..., Any], timeout_s: float = 90
) -> dict[str, Any]:
    def done() -> Any:
        body = api.get(f"/api/v1/runs/{run_id}").json()
        return body if body["status"] in FINAL else None

    return dict(wait_for(done, timeout_s=timeout_s, every_s=0.2))


def test_a_script_runs_the_demo_on_the_builtin_mock_through_the_api(
    live_world: World, mock_url: str, wait_for: Callable[..., Any], settings: Any, tmp_path: Path
) -> None:
    # The demo's Claude Code session is the project's fixture here, on every machine: what
    # the demo replays must not depend on whether the public samples are beside the checkout.
    settings.AIPERF_SAMPLES_DIR = samples_dir_with(
        tmp_path, key="claude-code-subagents", source=CLAUDE_CODE_SUBAGENTS
    )
    demo_bootstrap(mock_url=mock_url)
    out = io.StringIO()
    call_command("create_api_token", "admin", stdout=out)
    api = Client(HTTP_AUTHORIZATION=f"Bearer {out.getvalue().strip()}")

    scenario = next(s for s in api.get("/api/v1/scenarios").json() if s["name"] == "demo")
    endpoint = next(e for e in api.get("/api/v1/endpoints").json() if e["name"] == "built-in mock")
    # Released Dynamo's affinity (the built-in mock speaks 1.6 with header affinity on).
    spec = scenario["spec"]
    assert (spec["affinity"], spec["scope"]) == ("dynamo-headers", "lineage")
    created = _launch(api, scenario["id"], endpoint["id"], duration_s=4)
    assert created["status"] == "queued"

    seen = {created["status"]}

    def finished() -> Any:
        body = api.get(f"/api/v1/runs/{created['id']}").json()
        seen.add(body["status"])
        return body if body["status"] in FINAL else None

    body = wait_for(finished, timeout_s=90, every_s=0.1)
    assert body["status"] == "succeeded", body["reason"]
    assert "running" in seen
    summary = body["summary"]
    assert set(summary) >= SUMMARY_KEYS
    assert summary["requests"] > 0 and summary["errors"] == 0
    assert summary["early_closes"] == 0  # lineage scope never closes early
    assert summary["affinity_binds"] > 0  # the session header went out (preflight: affinity on)
    for key in ("ttft_ms", "itl_ms", "latency_ms"):
        assert {"p50", "p90", "p99"} <= set(summary[key])

    response = api.get(f"/api/v1/runs/{created['id']}/records.jsonl")
    assert response.status_code == 200
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert len(lines) == summary["requests"]
    assert all(json.loads(line)["warmup"] is False for line in lines)
    samples = api.get(f"/api/v1/runs/{created['id']}/samples").json()["items"]
    assert samples and samples[-1]["data"]["progress"] == 1.0


def test_cancel_stops_a_running_run_within_two_seconds_and_keeps_its_data(
    live_world: World, wait_for: Callable[..., Any]
) -> None:
    api = live_world.api("teammate")
    created = _launch(
        api, live_world.scenario.uuid, live_world.endpoint.uuid, duration_s=120, concurrency=4
    )
    run = Run.objects.get(uuid=created["id"])
    wait_for(lambda: RunSample.objects.filter(run=run).count() >= 2, timeout_s=60)

    asked = time.monotonic()
    assert api.post(f"/api/v1/runs/{created['id']}/cancel").status_code == 200
    wait_for(lambda: Run.objects.get(pk=run.pk).status == "cancelled", timeout_s=10, every_s=0.05)
    took = time.monotonic() - asked
    assert took < 2.5, f"cancel took {took:.2f} s"

    run.refresh_from_db()
    assert run.summary is not None and run.summary["requests"] > 0
    assert run.records_count == RunRecord.objects.filter(run=run).count() > 0


def test_a_run_whose_endpoint_fails_preflight_fails_with_its_message(
    live_world: World, mock_url: str, wait_for: Callable[..., Any]
) -> None:
    wrong = endpoint_create(
        actor=live_world.owner,
        team=live_world.team,
        name="wrong model",
        base_url=mock_url,
        model="no-such-model",
        server_kind="dynamo",
    )
    api = live_world.api("owner")
    body = _final(api, _launch(api, live_world.scenario.uuid, wrong.uuid)["id"], wait_for)
    assert body["status"] == "failed"
    assert "no-such-model" in body["reason"]
    assert "Traceback" not in body["reason"] and "\n" not in body["reason"]


def test_a_simulated_run_replays_in_virtual_time_and_stores_the_same_shapes(
    live_world: World, wait_for: Callable[..., Any]
) -> None:
    api = live_world.api("owner")
    created = _launch(api, live_world.scenario.uuid, "simulated", duration_s=300, concurrency=8)
    body = _final(api, created["id"], wait_for)
    assert body["status"] == "succeeded", body["reason"]
    assert set(body["summary"]) >= SUMMARY_KEYS
    run = Run.objects.get(uuid=created["id"])
    assert run.samples_count == RunSample.objects.filter(run=run).count() > 0
    assert (
        run.records_count
        == RunRecord.objects.filter(run=run).count()
        == body["summary"]["requests"]
    )


def test_a_rerun_launches_the_same_spec_again(
    live_world: World, wait_for: Callable[..., Any]
) -> None:
    api = live_world.api("owner")
    first = _final(
        api, _launch(api, live_world.scenario.uuid, "simulated", duration_s=60)["id"], wait_for
    )
    again = api.post(f"/api/v1/runs/{first['id']}/rerun")
    assert again.status_code == 201
    second = _final(api, again.json()["id"], wait_for)
    assert second["status"] == "succeeded"
    assert second["rerun_of"] == first["id"]
    assert second["spec"] == first["spec"]
