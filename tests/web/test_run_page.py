"""The run page on its own URLconf (reports/run_urls.py, namespace `run`) at the path it always
had, and what a run with nothing measured yet shows: no green "no leak" badge."""

from __future__ import annotations

import pytest
from django.urls import NoReverseMatch, resolve, reverse

from aiperf_web.reports.cards.placement import placement_card
from aiperf_web.runs.leaks import leak_assess
from aiperf_web.runs.models import Run, Status
from tests.web.conftest import World


def _run(world: World, status: str) -> Run:
    return Run.objects.create(
        team=world.team, scenario=world.scenario, scenario_name=world.scenario.name,
        endpoint=world.endpoint, endpoint_name=world.endpoint.name, target_kind="endpoint",
        spec=world.scenario.spec, status=status,
    )  # fmt: skip


def test_the_run_page_has_its_own_namespace_at_the_path_it_always_had(world: World) -> None:
    run = _run(world, Status.SUCCEEDED)
    path = reverse("run:page", args=[run.uuid])
    assert path == f"/runs/{run.uuid}/"
    match = resolve(path)
    assert (match.app_name, match.url_name) == ("run", "page")
    # The runs app's pages stay in theirs, /runs/new/ the launch form (not a run called "new").
    assert resolve("/runs/new/").app_name == "runs" and reverse("runs:new") == "/runs/new/"
    with pytest.raises(NoReverseMatch):
        reverse("runs:detail", args=[run.uuid])
    page = world.client("owner").get(path)
    assert page.status_code == 200
    # The navigation still marks Runs on a run's page.
    assert 'href="/runs/" class="on"' in page.content.decode()


def test_a_queued_run_says_nothing_is_measured_yet_not_no_leak(world: World) -> None:
    verdict = leak_assess([])
    assert (verdict["level"], verdict["badge"]) == ("unmeasured", "nothing measured yet")
    run = _run(world, Status.QUEUED)
    html = world.client("owner").get(f"/runs/{run.uuid}/").content.decode()
    section = html.split('<section id="leak"')[1].split("</section>")[0]
    assert 'class="leak leak-unmeasured' in section
    assert "nothing measured yet" in section and "no leak" not in section


def test_a_summary_stored_before_the_engine_gave_percentages_still_shows_them() -> None:
    old = {
        "trees": 4, "trees_split": 1, "child_requests": 3, "child_requests_on_root_worker": 3,
        "keyed_requests": 0, "key_misses": 0,
    }  # fmt: skip
    card = placement_card(summary={"placement": old}, latest=None, spec={})
    assert (card["trees_split_pct"], card["child_requests_on_root_worker_pct"]) == (25.0, 100.0)
    assert card["key_misses_pct"] is None  # no keyed request: no share, not 0 %
    # A new summary's own percentages are read, not divided again.
    new = {**old, "trees_split_pct": 12.5, "child_requests_on_root_worker_pct": 50.0,
           "key_misses_pct": None}  # fmt: skip
    assert (
        placement_card(summary={"placement": new}, latest=None, spec={})["trees_split_pct"] == 12.5
    )
