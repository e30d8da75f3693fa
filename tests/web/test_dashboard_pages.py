"""The dashboard as its users meet it (issue 16): the compare picker, labels and launch hints,
the upload's format choice, the scenario history's groups, report wording, the trace page,
favicon and dark mode, and the runs table on a phone."""

from __future__ import annotations

import re
from typing import Any

from aiperf_web.runs.models import Run, Status
from tests.web.conftest import World


def _finished(world: World, *, spec: dict[str, Any] | None = None, **summary: Any) -> Run:
    return Run.objects.create(
        team=world.team, scenario=world.scenario, scenario_name=world.scenario.name,
        endpoint=world.endpoint, endpoint_name=world.endpoint.name, target_kind="endpoint",
        spec={**world.scenario.spec, **(spec or {})}, status=Status.SUCCEEDED,
        summary={"requests": 10, "errors": 0, **summary},
    )  # fmt: skip


# -- 1. compare ----------------------------------------------------------------------------------


def test_the_bare_compare_url_is_the_picker_with_a_hint_not_an_error(world: World) -> None:
    page = world.client("viewer").get("/reports/compare/")
    html = page.content.decode()
    assert page.status_code == 200
    assert 'id="compare-hint"' in html and "Tick two or more runs" in html
    assert f'value="{world.run.uuid}"' in html and "compare-error" not in html


def test_one_picked_run_stays_ticked_and_asks_for_another(world: World) -> None:
    page = world.client("viewer").get(f"/reports/compare/?runs={world.run.uuid}")
    html = page.content.decode()
    assert page.status_code == 200 and "tick at least one more" in html
    assert f'value="{world.run.uuid}" id="pick-{world.run.uuid}" checked' in html


def test_picking_two_runs_opens_the_comparison_with_its_figures_unboxed(world: World) -> None:
    other = _finished(world, spec={"policy": "legacy"})
    # The picker's form sends one `runs` parameter per ticked box.
    page = world.client("viewer").get(
        "/reports/compare/", {"runs": [str(world.run.uuid), str(other.uuid)]}
    )
    html = page.content.decode()
    assert page.status_code == 200 and 'id="delta-table"' in html
    # Every figure row is on the page, not in a height-capped scroll box.
    assert 'class="table-scroll whole scroll-shadow"' in html


def test_a_named_run_that_is_not_there_is_a_400_on_the_picker(world: World) -> None:
    page = world.client("outsider").get(f"/reports/compare/?runs={world.run.uuid}")
    assert page.status_code == 400 and b"compare-error" in page.content
    assert str(world.run.uuid).encode() in page.content  # named in the error ...
    assert f'value="{world.run.uuid}"'.encode() not in page.content  # ... never offered


# -- 2. labels, the launch form's scenario values, the upload's format ---------------------------


def _options(html: str, select_id: str) -> list[str]:
    block = html.split(f'id="{select_id}"', 1)[1].split("</select>", 1)[0]
    return [part.split(">", 1)[1].split("<", 1)[0] for part in block.split("<option")[1:]]


def test_one_teams_choices_carry_no_team_and_two_teams_say_team(world: World) -> None:
    from aiperf_web.teams.models import Membership, Role

    html = world.client("owner").get("/runs/new/").content.decode()
    assert _options(html, "id_scenario") == ["alpha-scenario"]
    assert not any("alpha" in o for o in _options(html, "id_target")[:-1] if "(" in o)
    Membership.objects.create(team=world.other_team, user=world.teammate, role=Role.MEMBER)
    from aiperf_web.scenarios.services import scenario_create

    scenario_create(actor=world.outsider, team=world.other_team, name="beta-scenario",
                    spec={"duration_s": 5}, trace_ids=[])  # fmt: skip
    html = world.client("teammate").get("/runs/new/").content.decode()
    assert sorted(_options(html, "id_scenario")) == [
        "alpha-scenario · team alpha", "beta-scenario · team beta"
    ]  # fmt: skip
    detail = world.client("owner").get(f"/scenarios/{world.scenario.uuid}/").content.decode()
    assert "<small>team alpha</small>" in detail


def test_the_launch_form_shows_the_scenarios_values_not_the_engines_defaults(
    world: World,
) -> None:
    html = world.client("owner").get("/runs/new/").content.decode()
    # The scenario runs 2 lanes for 2 s at 50x: each blank input shows it.
    assert re.search(r'<input[^>]*name="concurrency"[^>]*placeholder="2"', html)
    assert re.search(r'<input[^>]*name="speedup"[^>]*placeholder="50"', html)
    assert _options(html, "id_policy")[0] == "scenario: spawn-pin"
    assert "(default 16)" not in html and "a blank field keeps the scenario" in html
    values = html.split('id="scenario-values" type="application/json">')[1].split("</script>")[0]
    assert f'"{world.scenario.uuid}"' in values and '"duration_s": "2"' in values


def test_an_undetectable_upload_asks_for_the_format_list_not_a_cli_flag(world: World) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    form = world.client("owner").get("/traces/").content.decode()
    assert _options(form, "id_upload-format")[0].startswith("auto")
    assert {"native", "dag_jsonl", "claude_code", "mooncake", "azure_csv"} <= set(
        _options(form, "id_upload-format")
    )
    page = world.client("owner").post("/traces/", {
        "action": "upload", "upload-file": SimpleUploadedFile("odd.txt", b"hello\n"),
    })  # fmt: skip
    text = page.content.decode()
    assert page.status_code == 200 and "choose its format in the Format list" in text
    assert "--format" not in text


def test_a_format_chosen_at_upload_is_the_one_the_worker_loads(world: World) -> None:
    import tempfile
    from pathlib import Path

    from django.core.files.uploadedfile import SimpleUploadedFile

    from aiperf_web.scenarios.models import Trace
    from aiperf_web.scenarios.services import trace_content
    from runner import inspect_trace, load_trace
    from tests.fixtures import DAG_SPAWN

    page = world.client("owner").post("/traces/", {
        "action": "upload", "upload-format": "dag_jsonl", "upload-name": "chosen",
        "upload-file": SimpleUploadedFile("spawn.txt", DAG_SPAWN.read_bytes()),
    })  # fmt: skip
    assert page.status_code == 302
    trace = Trace.objects.get(name="chosen")
    assert trace.format == "dag_jsonl" and trace.stats["format_chosen"] is True
    filename, content = trace_content(trace_id=trace.uuid)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / filename
        path.write_bytes(content)
        loaded = inspect_trace(load_trace(path))  # detected from the content, as the worker does
    assert loaded["format"] == "native"
    assert {k: loaded[k] for k in ("trees", "sessions", "requests", "spawn_children")} == {
        k: trace.stats[k] for k in ("trees", "sessions", "requests", "spawn_children")
    }


# -- 3. scenario history -------------------------------------------------------------------------


def test_the_history_draws_one_line_per_configuration_over_dates(world: World) -> None:
    import json

    legacy = _finished(world, spec={"policy": "legacy", "affinity": "dynamo-headers",
                                    "scope": "lineage"}, worker_switches=3)  # fmt: skip
    pinned = _finished(world, spec={"policy": "spawn-pin", "affinity": "dynamo-headers",
                                    "scope": "lineage"}, worker_switches=0)  # fmt: skip
    plain = _finished(world, spec={"policy": "spawn-pin", "affinity": "none",
                                   "scope": "conversation"})  # fmt: skip
    html = world.client("viewer").get(f"/reports/scenarios/{world.scenario.uuid}/history/")
    text = html.content.decode()
    data = json.loads(text.split('id="history-data" type="application/json">')[1].split("<")[0])
    by_id = {p["id"]: p for p in data["points"]}
    # One line per configuration, named by the fields that differ (policy, affinity, scope).
    assert by_id[str(legacy.uuid)]["group"] == "legacy · affinity dynamo-headers · lineage"
    assert by_id[str(pinned.uuid)]["group"] == "spawn-pin · affinity dynamo-headers · lineage"
    assert by_id[str(plain.uuid)]["group"] == "spawn-pin · no affinity"
    # x is the run's date, not its position in the list.
    assert by_id[str(pinned.uuid)]["created_at"] == pinned.created_at.isoformat()
    assert 'id="trend-legend"' in text and "one line per configuration" in text


# -- 5. the trace page ---------------------------------------------------------------------------


def test_the_trace_page_draws_its_trees_and_sorts_their_statistics(world: World) -> None:
    from aiperf_web.scenarios.services import trace_upload
    from tests.fixtures import DAG_FORK_FANOUT

    fork = trace_upload(actor=world.owner, team=world.team, filename=DAG_FORK_FANOUT.name,
                        chunks=[DAG_FORK_FANOUT.read_bytes()], name="forks")  # fmt: skip
    for trace, kind in ((world.trace, "spawn"), (fork, "fork")):
        page = world.client("owner").get(f"/traces/{trace.uuid}/")
        html = page.content.decode()
        assert page.status_code == 200
        drawing = html.split('id="agent-trees"')[1].split("</section>")[0]
        # Each drawn tree starts at its root; children are marked by kind and indented.
        assert drawing.count('class="node-root"') >= 1 and f'class="node-{kind}"' in drawing
        assert 'style="--d: 1"' in drawing and re.search(r"\d+ turns?</span>", drawing)
        for table in ("tree-table", "agent-table"):
            head = html.split(f'id="{table}"')[1].split("</thead>")[0]
            assert 'class="list compact sortable"' in html and 'data-sort="num"' in head
        assert f'href="/scenarios/new/?trace={trace.uuid}"' in html
    # Rows come sorted by turns, most first (the script re-sorts on a click).
    agents = world.client("owner").get(f"/traces/{world.trace.uuid}/").content.decode()
    body = agents.split('id="agent-table"')[1].split("</tbody>")[0]
    rows = [r for r in re.findall(r"<tr>(.*?)</tr>", body) if "<td" in r]
    # Depth then turns are a row's first two plain numeric cells.
    turns = [int(re.findall(r'<td class="num">(\d+)</td>', row)[1]) for row in rows]
    assert len(turns) == world.trace.stats["sessions"] and turns == sorted(turns, reverse=True)


def test_new_scenario_from_a_trace_opens_the_form_with_it_ticked(world: World) -> None:
    html = world.client("teammate").get(f"/scenarios/new/?trace={world.trace.uuid}")
    text = html.content.decode()
    assert re.search(rf'value="{world.trace.uuid}"[^>]*checked', text)
    assert f'value="{world.trace.name}"' in text
    # A viewer sees the trace, not the button; another team's id ticks nothing.
    viewer = world.client("viewer").get(f"/traces/{world.trace.uuid}/").content.decode()
    assert "New scenario from this trace" not in viewer
    other = world.client("outsider").get(f"/scenarios/new/?trace={world.trace.uuid}")
    assert str(world.trace.uuid) not in other.content.decode()


# -- 4. report wording ---------------------------------------------------------------------------


def test_figures_read_in_words_and_ratios_as_percentages() -> None:
    from aiperf_web.reports.wording import figure_label, figure_text

    assert figure_label("prefix_cache_hit_ratio") == "Prefix-cache hit ratio"
    assert figure_label("ttft_ms.p99") == "Time to first token (ms) · p99"
    assert figure_label("drain.copies_of_cut_sessions").startswith("Drain · copies of sessions")
    assert figure_label("some_new_wait_ms") == "Some new wait (ms)"  # an unknown key, in words
    assert figure_text("prefix_cache_hit_ratio", 0.936) == "93.6 %"
    assert figure_text("goodput.good_ratio", 1.0) == "100.0 %"
    assert figure_text("requests", 123456) == "123,456"
    assert figure_text("ttft_ms.p50", 5984.62) == "5,984.6" and figure_text("errors", None) == "—"


def test_the_report_and_its_export_name_figures_and_say_virtual_time(world: World) -> None:
    summary: dict[str, Any] = {"prefix_cache_hit_ratio": 0.936, "child_first_turn_hit_ratio": 0.5,
               "worker_switches": 2, "ttft_ms": {"p50": 10.0, "p90": 20.0, "p99": 30.0},
               "sessions_multi_worker": 1}  # fmt: skip
    sim = _finished(world, **summary)
    Run.objects.filter(pk=sim.pk).update(target_kind="simulated", endpoint=None,
                                         endpoint_name="simulated cluster")  # fmt: skip
    other = _finished(world, **{**summary, "prefix_cache_hit_ratio": 0.9})
    owner = world.client("owner")
    page = owner.get(f"/runs/{sim.uuid}/").content.decode()
    report = page.split('id="report"')[1]
    assert "93.6 %" in report and "Prefix-cache hit ratio" in report
    assert ">prefix_cache_hit_ratio<" not in report and ">0.936<" not in report
    assert ">ttft_ms<" not in report and "Time to first token (ms)" in report
    figures = report.split('id="all-figures"')[1].split("</table>")[0]
    assert "Child first-turn hit ratio" in figures and "50.0 %" in figures
    assert "Sessions on more than one client worker" in report  # a headline figure
    assert 'id="virtual-time"' in page and "virtual time" in report.split("</table>")[0]
    export = owner.get(f"/reports/runs/{sim.uuid}/report.html").content.decode()
    head = export.split("<body>")[1][:3000]
    assert "virtual time" in head and "93.6 %" in export
    live = owner.get(f"/runs/{other.uuid}/").content.decode()
    assert 'id="virtual-time"' not in live  # a run against an endpoint runs on the wall clock
    cmp = owner.get(f"/reports/compare/?runs={other.uuid},{sim.uuid}").content.decode()
    table = cmp.split('id="delta-table"')[1].split("</table>")[0]
    assert "90.0 %" in table and "93.6 %" in table and "+3.6 pts" in table
    assert "(virtual time)" in cmp
