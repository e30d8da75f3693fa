"""`manage.py verify_run <run>`: a stored run's summary recomputed from its stored records
(runner's verify), exit 0 when they agree, 1 on a discrepancy, 2 for a run that is not there."""

from __future__ import annotations

import io
import json
import random

import pytest
from django.core.management import CommandError, call_command

from aiperf_web.runs.models import Run, Status
from aiperf_web.runs.sink import records_insert
from runner.metrics import RequestRecord, RunMetrics
from tests.web.conftest import World


def _stored_run(world: World, n: int = 400) -> Run:
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
    run = Run.objects.create(
        team=world.team,
        scenario_name="verify",
        target_kind="simulated",
        spec=world.scenario.spec,
        status=Status.SUCCEEDED,
        summary=summary,
        records_count=n,
    )
    records_insert(run_pk=run.pk, first_seq=0, batch=batch)
    return run


def test_verify_run_agrees_with_a_runs_own_records_and_finds_a_tampered_figure(world: World):
    run = _stored_run(world)
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
