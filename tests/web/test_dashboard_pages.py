"""The dashboard as its users meet it (issue 16): the compare picker, labels and launch hints,
the upload's format choice, the scenario history's groups, report wording, the trace page,
favicon and dark mode, and the runs table on a phone."""

from __future__ import annotations

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
    assert 'class="table-scroll whole"' in html


def test_a_named_run_that_is_not_there_is_a_400_on_the_picker(world: World) -> None:
    page = world.client("outsider").get(f"/reports/compare/?runs={world.run.uuid}")
    assert page.status_code == 400 and b"compare-error" in page.content
    assert str(world.run.uuid).encode() in page.content  # named in the error ...
    assert f'value="{world.run.uuid}"'.encode() not in page.content  # ... never offered
