"""`manage.py verify_run <run>` and `GET /api/v1/runs/<id>/verify`: a stored run's summary
recomputed from its stored records (runner's verify_checked, printed by verify_text): the
command exits 0 when they agree, 1 on a discrepancy, 2 for a run that is not there; the API
answers the same report to the run's team only, 409 for a run without a summary."""

from __future__ import annotations

import io
import json
import random
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from aiperf_web.runs.models import Run, Status
from aiperf_web.runs.sink import records_insert
from runner.metrics import RequestRecord, RunMetrics
from tests.web.conftest import World


def run_row(world: World, **fields: Any) -> Run:
    """A run of team A's, stored as given (no worker ran it)."""
    return Run.objects.create(
        team=world.team,
        scenario_name="verify",
        target_kind="simulated",
        spec=world.scenario.spec,
        **fields,
    )


def stored_run(world: World, n: int = 400) -> Run:
    rng = random.Random(4)
    metrics = RunMetrics()
    batch = []
    for i in range(n):
        start = i * 0.01
        record = RequestRecord(
            request_id=i,
            session_id=f"s{i // 10}",
            root_id=f"t{i // 40}",
            turn_index=i % 10,
            num_turns=10,
            client_worker=i % 4,
            start_s=start,
            first_token_s=start + rng.lognormvariate(4, 1) / 1000,
            end_s=start + rng.lognormvariate(7, 0.5) / 1000 + 0.2,
            prompt_tokens=1000,
            cached_tokens=rng.randrange(0, 1000),
            output_tokens=50,
            itl_ms=rng.lognormvariate(2, 0.4),
            status=200,
            warmup=i < 8,
        )
        metrics.record(record)
        batch.append(record.to_json_dict())
    summary = json.loads(json.dumps(dict(metrics.summary())))
    run = run_row(world, status=Status.SUCCEEDED, summary=summary, records_count=n)
    records_insert(run_pk=run.pk, first_seq=0, batch=batch)
    return run


def test_verify_run_agrees_with_a_runs_own_records_and_finds_a_tampered_figure(world: World):
    run = stored_run(world)
    out = io.StringIO()
    call_command("verify_run", str(run.uuid), stdout=out)
    assert "400 records" in out.getvalue() and "every figure agrees" in out.getvalue()
    assert "largest ttft_ms percentile difference" in out.getvalue()

    summary = dict(run.summary or {})
    summary["latency_ms"] = {**summary["latency_ms"], "p90": summary["latency_ms"]["p90"] * 1.02}
    Run.objects.filter(pk=run.pk).update(summary=summary)
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_info:
        call_command("verify_run", str(run.uuid), "--json", stdout=out)
    assert exit_info.value.code == 1
    report = json.loads(out.getvalue())
    assert [f["figure"] for f in report["failures"]] == ["latency_ms.p90"]


def test_verify_run_refuses_a_run_that_is_not_there(world: World):
    with pytest.raises(CommandError) as error:
        call_command("verify_run", "00000000-0000-0000-0000-000000000000", stdout=io.StringIO())
    assert error.value.returncode == 2


def _verify(world: World, run: Run, persona: str = "viewer") -> Any:
    return world.api(persona).get(f"/api/v1/runs/{run.uuid}/verify")


def test_the_api_verifies_a_stored_run_for_its_team_and_names_a_tampered_figure(world: World):
    run = stored_run(world)
    response = _verify(world, run)  # a viewer may: it reads, writes nothing
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["id"], body["status"], body["ok"]) == (str(run.uuid), "succeeded", True)
    assert body["records"] == 400 and body["failures"] == []
    error = body["histogram_relative_error"]
    for name in ("ttft_ms", "itl_ms", "latency_ms"):
        largest = body["largest_percentile_difference"][name]
        assert largest is not None and 0 < largest <= error, (name, largest)
    p99 = next(f for f in body["figures"] if f["figure"] == "ttft_ms.p99")
    assert p99["relative"] is True and p99["allowed"] == error and p99["ok"] is True
    assert p99["summary"] == run.summary["ttft_ms"]["p99"]  # type: ignore[index]

    summary = dict(run.summary or {})
    summary["latency_ms"] = {**summary["latency_ms"], "p90": summary["latency_ms"]["p90"] * 1.02}
    # A dict no number apart from the records' (JSON has no Infinity: its difference is null).
    summary["errors_by_category"] = {"timeout": 3}
    Run.objects.filter(pk=run.pk).update(summary=summary)
    body = _verify(world, run).json()
    assert body["ok"] is False
    failed = {f["figure"]: f for f in body["failures"]}
    assert set(failed) == {"latency_ms.p90", "errors_by_category"}
    assert failed["latency_ms.p90"]["difference"] > failed["latency_ms.p90"]["allowed"]
    assert failed["errors_by_category"]["difference"] is None
    assert body["largest_percentile_difference"]["latency_ms"] > error


def test_the_api_refuses_other_teams_anonymous_and_a_run_without_a_summary(world: World):
    run = stored_run(world, n=20)
    assert _verify(world, run, "outsider").status_code == 404
    assert _verify(world, run, "anonymous").status_code == 401
    queued = run_row(world, status=Status.QUEUED)
    refused = _verify(world, queued, "teammate")
    assert refused.status_code == 409, refused.content
    assert refused.json()["errors"][0]["field"] == "status"
    assert "no summary yet" in refused.json()["detail"]


@pytest.mark.shape_independent  # reads the published schema only
def test_the_openapi_declares_verify_with_its_answers(world: World):
    paths = world.api("viewer").get("/api/v1/openapi.json").json()["paths"]
    answers = paths["/api/v1/runs/{run_id}/verify"]["get"]["responses"]
    assert {"200", "401", "404", "409", "503"} <= set(answers)
