"""The figures a run shows where people look (issue 16): requests cut by the stop apart from
errors, token throughput, the runs list's columns, and summary.json as a download."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from aiperf_web.runs.models import Run, Status
from tests.web.conftest import World


def _clean_run_cut_by_its_stop(world: World, **summary: Any) -> Run:
    return Run.objects.create(
        team=world.team,
        scenario=world.scenario,
        scenario_name="cut-scenario",
        endpoint=world.endpoint,
        endpoint_name=world.endpoint.name,
        target_kind="endpoint",
        spec={**world.scenario.spec, "policy": "legacy", "affinity": "dynamo-headers",
              "scope": "lineage"},
        status=Status.SUCCEEDED,
        summary={
            "requests": 120, "errors": 0, "errors_by_category": {}, "cut_by_stop": 3,
            "requests_per_s": 39.24, "output_tokens_per_s": 4321.5,
            "orphaned_session_copies": 7, "ttft_ms": {"p50": 12.5, "p90": 20.0, "p99": 31.0},
            "itl_ms": {"p50": 2.0, "p90": 3.0, "p99": 4.0},
            "latency_ms": {"p50": 200.0, "p90": 300.0, "p99": 400.0},
            "goodput": {"slo_ms": {}, "good_requests": 117, "good_ratio": 1.0,
                        "goodput_per_s": 39.0},
            **summary,
        },
    )  # fmt: skip


def test_the_report_shows_the_requests_cut_by_the_stop_apart_from_errors(world: World) -> None:
    run = _clean_run_cut_by_its_stop(world)
    page = world.client("teammate").get(f"/runs/{run.uuid}/").content.decode()
    assert '<span title="errors">Errors</span><b>0</b>' in page
    assert '<span title="cut by the stop">Cut by the stop</span><b>3</b>' in page
    assert '<span title="output tokens / s">Output tokens / s</span><b>4322</b>' in page
    assert '<span title="requests / s">Requests / s</span><b>39.2</b>' in page
    export = world.client("teammate").get(f"/reports/runs/{run.uuid}/report.html")
    html = export.content
    assert b'<span title="cut by the stop">Cut by the stop</span><b>3</b>' in html


def test_the_runs_list_shows_policy_scope_throughput_orphans_duration_and_cuts(
    world: World,
) -> None:
    run = _clean_run_cut_by_its_stop(world)
    Run.objects.filter(pk=run.pk).update(
        started_at=run.created_at, finished_at=run.created_at + timedelta(seconds=62)
    )
    page = world.client("owner").get("/runs/").content.decode()
    row = page[page.index(f'data-run-id="{run.uuid}"') :]
    row = row[: row.index("</tr>")]
    for cell in (">legacy<", ">lineage<", ">39.2<", ">4322<", ">12.5<", ">7<", ">62 s<"):
        assert cell in row, cell
    assert "+3 cut by the stop" in row
    # A phone keeps status, scenario, req/s, TTFT and created: only the rest is optional.
    head = page[page.index("<th>Status</th><th>Scenario</th><th class=\"opt\">Target</th><th "
                           "class=\"opt\">Policy") :]  # fmt: skip
    head = head[: head.index("</tr>")]
    kept = [th for th in head.split("<th")[1:] if "opt" not in th.split(">")[0]]
    assert [th.split(">")[1].split("<")[0] for th in kept] == [
        "Status", "Scenario", "req/s", "TTFT p50 ms", "Created",
    ]  # fmt: skip


def test_compare_lists_cut_by_the_stop_beside_errors_without_judging_it(world: World) -> None:
    a = _clean_run_cut_by_its_stop(world)
    b = _clean_run_cut_by_its_stop(world, cut_by_stop=0)
    page = world.client("owner").get(f"/reports/compare/?runs={a.uuid},{b.uuid}")
    assert page.status_code == 200
    text = page.content.decode()
    assert "Requests cut by the stop" in text and "Output tokens per second" in text
    body = world.api("owner").get(f"/api/v1/compare?runs={a.uuid},{b.uuid}").json()
    rows = {row["key"]: row for row in body["metrics"]}
    assert [cell["value"] for cell in rows["cut_by_stop"]["cells"]] == [3, 0]
    assert {cell["status"] for cell in rows["cut_by_stop"]["cells"]} == {"n/a"}
    assert [cell["value"] for cell in rows["output_tokens_per_s"]["cells"]] == [4321.5, 4321.5]


@pytest.mark.parametrize(
    ("persona", "status"), [("owner", 200), ("teammate", 200), ("viewer", 200), ("outsider", 404)]
)
def test_summary_json_downloads_as_a_file_for_the_runs_team_only(
    world: World, persona: str, status: int
) -> None:
    response = world.client(persona).get(f"/runs/{world.run.uuid}/summary.json")
    assert response.status_code == status
    if status == 200:
        assert response["Content-Disposition"] == (
            f'attachment; filename="run-{world.run.uuid}-summary.json"'
        )
        assert response.json() == {
            "id": str(world.run.uuid), "status": "succeeded", "summary": world.run.summary,
        }  # fmt: skip


def test_summary_json_of_another_teams_run_is_404_and_anonymous_goes_to_login(
    world: World,
) -> None:
    theirs = Run.objects.create(
        team=world.other_team, scenario_name="beta-run", endpoint_name="simulated cluster",
        target_kind="simulated", spec={}, status=Status.SUCCEEDED, summary={"requests": 1},
    )  # fmt: skip
    assert world.client("owner").get(f"/runs/{theirs.uuid}/summary.json").status_code == 404
    assert world.client("outsider").get(f"/runs/{theirs.uuid}/summary.json").status_code == 200
    anonymous = world.client("anonymous").get(f"/runs/{theirs.uuid}/summary.json")
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/")


def test_the_run_page_links_summary_json_as_a_download(world: World) -> None:
    page = world.client("owner").get(f"/runs/{world.run.uuid}/").content.decode()
    assert f'href="/runs/{world.run.uuid}/summary.json" download' in page
