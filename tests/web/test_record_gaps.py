"""A run's inter-chunk gaps in the service (issue 23 item 4): a real run on the mock stores
each record's gaps in RunRecord.chunk_gaps (bytes, 4 a gap, not inside the JSON), the records
export puts them back as `chunk_gaps_us`, and `GET /api/v1/runs/<id>/verify` recomputes the
summary's inter-chunk percentiles exactly from every stored gap; rows stored before gaps were
kept make those percentiles unchecked, never passed."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiperf_web.runs.models import RunRecord
from runner.metrics.gaps import GAP_BYTES, gaps_from_text
from tests.web.conftest import World, final_run


def test_a_live_run_stores_its_gaps_and_verify_recomputes_the_inter_chunk_percentiles(
    live_world: World, wait_for: Callable[..., Any]
) -> None:
    world = live_world
    response = world.api("teammate").post(
        "/api/v1/runs",
        {
            "scenario": str(world.scenario.uuid),
            "endpoint": str(world.endpoint.uuid),
            "overrides": {"duration_s": 4},
        },
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    run = final_run(str(response.json()["id"]), wait_for)
    assert run.status == "succeeded", run.reason
    summary = run.summary
    samples = summary["inter_chunk_samples"]
    assert samples > 0 and summary["inter_chunk_ms"]["p99"] is not None

    rows = RunRecord.objects.filter(run=run, chunk_gaps__isnull=False)
    stored = sum(len(bytes(gaps)) for gaps in rows.values_list("chunk_gaps", flat=True))
    assert stored >= samples * GAP_BYTES  # warmup records keep theirs too
    assert not RunRecord.objects.filter(run=run, data__has_key="chunk_gaps_us").exists()

    export = world.api("viewer").get(f"/api/v1/runs/{run.uuid}/records.jsonl")
    assert export.status_code == 200
    lines = [json.loads(line) for line in b"".join(export.streaming_content).splitlines()]
    with_gaps = [line for line in lines if line.get("chunk_gaps_us")]
    assert with_gaps and all(
        len(gaps_from_text(line["chunk_gaps_us"])) % GAP_BYTES == 0 for line in with_gaps
    )

    body = world.api("viewer").get(f"/api/v1/runs/{run.uuid}/verify").json()
    assert body["ok"] is True, body["failures"]
    assert body["unchecked"] == []
    assert body["inter_chunk"]["samples"] == samples
    assert body["inter_chunk"]["itl_mean_mismatches"] == 0
    figures = {f["figure"]: f for f in body["figures"]}
    for key in ("p50", "p90", "p99"):
        figure = figures[f"inter_chunk_ms.{key}"]
        assert figure["ok"] and figure["difference"] <= figure["allowed"], figure
    assert figures["inter_chunk_samples"]["difference"] == 0

    # Rows as they were stored before gaps were kept: verify says it cannot check them.
    RunRecord.objects.filter(run=run).update(chunk_gaps=None)
    body = world.api("viewer").get(f"/api/v1/runs/{run.uuid}/verify").json()
    assert [u["figure"] for u in body["unchecked"]] == ["inter_chunk_ms"]
    assert not any(f["figure"].startswith("inter_chunk_ms.") for f in body["figures"])
