"""Placement on the pages: where the server put each agent tree (trees split, child requests on
their root's worker, key misses), live from the snapshots, in the report and its exports, as
rows of the comparison, and the explanation when the server names no serving worker."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.test import Client

from aiperf_web.live.selectors import run_history
from aiperf_web.reports.cards.placement import NOT_REPORTED, placement_card
from aiperf_web.runs.models import Run, RunSample, Status
from aiperf_web.stack.demo import demo_bootstrap
from aiperf_web.teams.services import api_token_create
from tests.web.conftest import World

FINAL = {"succeeded", "failed", "cancelled"}


def _finished(world: World, *, summary: dict[str, Any], scope: str = "lineage") -> Run:
    spec = {**world.scenario.spec, "affinity": "dynamo-headers", "scope": scope}
    return Run.objects.create(
        team=world.team, scenario=world.scenario, scenario_name=world.scenario.name,
        endpoint=world.endpoint, endpoint_name=world.endpoint.name, target_kind="endpoint",
        spec=spec, status=Status.SUCCEEDED, summary=summary,
    )  # fmt: skip


def _placement(trees: int, split: int, children: int, on_root: int, keyed: int, misses: int
               ) -> dict[str, int]:  # fmt: skip
    return {
        "trees": trees, "trees_split": split, "child_requests": children,
        "child_requests_on_root_worker": on_root, "keyed_requests": keyed, "key_misses": misses,
    }  # fmt: skip


def _page_data(html: str) -> dict[str, Any]:
    return dict(
        json.loads(html.split('id="run-data" type="application/json">')[1].split("</script>")[0])
    )


def test_a_run_on_the_builtin_mock_shows_where_the_server_put_its_trees(
    live_world: World, mock_url: str, wait_for: Callable[..., Any]
) -> None:
    boot = demo_bootstrap(mock_url=mock_url)
    admin = boot.scenario.created_by
    api = Client(HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=admin, name='pl')[1]}")
    created = api.post(
        "/api/v1/runs",
        {"scenario": str(boot.scenario.uuid), "endpoint": str(boot.endpoint.uuid),
         "overrides": {"duration_s": 3}},
        content_type="application/json",
    )  # fmt: skip
    assert created.status_code == 201, created.content
    run = Run.objects.get(uuid=created.json()["id"])
    web = Client()
    web.force_login(admin)

    def finished() -> Run | None:
        r = Run.objects.get(pk=run.pk)
        return r if r.status in FINAL else None

    done = wait_for(finished, timeout_s=90, every_s=0.2)
    assert done.status == "succeeded", done.reason
    placement = done.summary["placement"]
    assert placement is not None and placement["trees"] > 0
    # Every snapshot carried it (null only before the first answer) and the history keeps it.
    samples = [s["data"] for s in run_history(run_obj=done)["samples"]]
    assert any(s.get("placement") for s in samples) and "placement" in samples[-1]

    html = web.get(f"/runs/{done.uuid}/").content.decode()
    block = html.split('id="placement"')[1].split("</section>")[0]
    assert 'data-state="reported"' in block and 'data-mode="lineage"' in block
    assert f'data-pl="trees">{placement["trees"]}<' in block
    assert 'data-pl="trees_split"' in block and "expect 0 split" in block
    assert f'data-pl="keyed_requests">{placement["keyed_requests"]}<' in block
    assert 'id="chart-placement"' in block and 'id="placement-note" hidden' in block
    # The report's "All figures" names them; the CSV carries counts and shares.
    assert "trees split across inference workers" in html.lower()
    csv = web.get(f"/runs/{done.uuid}/summary.csv").content.decode()
    assert f"placement.trees_split,{placement['trees_split']}" in csv
    assert "placement.trees_split_pct," in csv
    export = web.get(f"/reports/runs/{done.uuid}/report.html").content.decode()
    assert 'id="placement" data-state="reported"' in export


def test_the_comparison_shows_trees_split_going_from_conversation_to_lineage(
    world: World,
) -> None:
    conversation = _finished(
        world, scope="conversation",
        summary={"requests": 900, "placement": _placement(16, 6, 120, 70, 900, 4)},
    )  # fmt: skip
    lineage = _finished(
        world, summary={"requests": 900, "placement": _placement(16, 0, 120, 120, 900, 0)}
    )
    page = world.client("viewer").get(f"/reports/compare/?runs={conversation.uuid},{lineage.uuid}")
    html = page.content.decode()
    row = html.split('data-placement="placement.trees_split"')[1].split("</tr>")[0]
    assert "Trees split across inference workers" in row
    cells = [c.split(">", 1)[1].split("<")[0] for c in row.split('<td class="num"')[1:]]
    assert cells == ["6", "0"]
    share = html.split('data-placement="placement.child_requests_on_root_worker_pct"')[1]
    share = share.split("</tr>")[0]
    # 58.3 % -> 100 % of child requests: a change in points; one run each, so no colour is
    # claimed (no repeats to judge noise).
    assert "58.3" in share and "100" in share and "+41.7 pts" in share
    assert 'data-verdict="no repeats"' in share and "delta-better" not in share
    assert 'data-placement="placement.key_misses"' in html

    api = world.api("viewer").get(f"/api/v1/compare?runs={conversation.uuid},{lineage.uuid}")
    metrics = {m["key"]: m for m in api.json()["metrics"]}
    assert [c["value"] for c in metrics["placement.trees_split"]["cells"]] == [6.0, 0.0]
    assert metrics["placement.trees_split"]["cells"][1]["status"] == "improved"
    # Compare rows only: the regression verdict keeps its checks.
    verdict = world.api("viewer").get(
        f"/api/v1/runs/{lineage.uuid}/verdict?baseline={conversation.uuid}"
    )
    assert not any(c["key"].startswith("placement") for c in verdict.json()["checks"])


def test_a_run_whose_server_names_no_worker_says_what_to_turn_on(world: World) -> None:
    run = _finished(world, summary={"requests": 50, "placement": None})
    RunSample.objects.create(run=run, seq=0, t_s=1.0, data={"t_s": 1.0, "requests": 50,
                                                            "placement": None})  # fmt: skip
    html = world.client("viewer").get(f"/runs/{run.uuid}/").content.decode()
    block = html.split('id="placement"')[1].split("</section>")[0]
    assert 'data-state="not-reported"' in block
    assert NOT_REPORTED in block and "nvext.extra_fields worker_id" in block
    assert 'id="placement-body" hidden' in block
    csv = world.client("viewer").get(f"/runs/{run.uuid}/summary.csv").content.decode()
    assert "placement,\r\n" in csv
    cmp = world.client("viewer").get(f"/reports/compare/?runs={run.uuid},{world.run.uuid}")
    assert "Placement of A “—”" in cmp.content.decode()


def test_a_live_run_before_its_first_answer_waits_rather_than_blaming_the_server() -> None:
    waiting = placement_card(summary=None, latest={"requests": 0, "placement": None}, spec={})
    missing = placement_card(summary=None, latest={"requests": 9, "placement": None}, spec={})
    old = placement_card(summary={"requests": 9}, latest=None, spec={})
    assert (waiting["state"], missing["state"], old["state"]) == (
        "waiting",
        "not-reported",
        "not-recorded",
    )
    header = placement_card(
        summary={"placement": _placement(4, 1, 10, 9, 0, 0)}, latest=None,
        spec={"affinity": "header", "header_source": "root"},
    )  # fmt: skip
    assert header["mode"] == "lineage" and header["trees_split_pct"] == 25.0
    assert header["key_misses_pct"] is None  # no keyed request: no share, not 0 %


def test_the_report_names_inference_workers_by_the_servers_own_ids(world: World) -> None:
    ids = {"0": "17676039716322150182", "1": "9021551398114003411"}
    run = _finished(
        world,
        summary={"requests": 10, "placement": _placement(2, 0, 4, 4, 10, 0),
                 "inference_worker_ids": ids},
    )  # fmt: skip
    html = world.client("viewer").get(f"/runs/{run.uuid}/").content.decode()
    assert _page_data(html)["inference_worker_ids"] == ids
    export = world.client("viewer").get(f"/reports/runs/{run.uuid}/report.html").content.decode()
    assert '"inference_worker_ids": {"0": "17676039716322150182"' in export
    assert 'page.trees, "inference", page.inference_worker_ids' in export
