"""Runs on one endpoint never overlap unless a run opts in (issue 20 item 2), through the real
worker (2 slots) and the built-in mock over sockets:

- two runs of one scenario on one endpoint launched together: the second waits (its API
  `waiting` names the first, reason `endpoint`; its log says so), starts only after the first
  has ended and the server has drained, and their [started_at, finished_at] never overlap;
- with allow_overlap on the second, both run at once, and the overlap is recorded on both
  (API `overlaps`, a warning in each log, a line on each run's page).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiperf_web.runs.models import Run, RunLog
from tests.web.conftest import World, final_run


def _launch(world: World, duration_s: float = 3, **extra: Any) -> str:
    response = world.api("teammate").post(
        "/api/v1/runs",
        {
            "scenario": str(world.scenario.uuid),
            "endpoint": str(world.endpoint.uuid),
            "overrides": {"duration_s": duration_s},
            **extra,
        },
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    return str(response.json()["id"])


def _log(run_id: str) -> list[str]:
    return list(
        RunLog.objects.filter(run__uuid=run_id).order_by("pk").values_list("message", flat=True)
    )


def test_two_runs_on_one_endpoint_run_one_after_the_other(
    live_world: World, wait_for: Callable[..., Any]
) -> None:
    first, second = _launch(live_world), _launch(live_world)
    api = live_world.api("viewer")

    def second_waits_for_first() -> Any:
        body = api.get(f"/api/v1/runs/{second}").json()
        waiting = body["waiting"]
        if waiting and waiting["reason"] == "endpoint":
            return waiting
        return None

    waiting = wait_for(second_waits_for_first, timeout_s=30, every_s=0.1)
    assert [h["id"] for h in waiting["waits_for"]] == [first]
    assert live_world.endpoint.name in waiting["message"]
    # While the first runs, the second is still queued: they never run together.
    wait_for(lambda: Run.objects.get(uuid=first).status == "running", timeout_s=30)
    assert Run.objects.get(uuid=second).status == "queued"

    a, b = final_run(first, wait_for), final_run(second, wait_for)
    assert (a.status, b.status) == ("succeeded", "succeeded"), (a.reason, b.reason)
    assert a.finished_at is not None and b.started_at is not None
    assert b.started_at >= a.finished_at, (a.finished_at, b.started_at)
    assert a.overlaps == [] and b.overlaps == []
    lines = _log(second)
    assert any(line.startswith("waits for its endpoint") and first in line for line in lines)
    assert any(line.startswith("drain: ") for line in lines), lines


def test_an_opted_in_overlap_runs_both_and_both_reports_say_so(
    live_world: World, wait_for: Callable[..., Any]
) -> None:
    # The first long enough that the second starts within it on a loaded machine.
    first = _launch(live_world, duration_s=8)
    second = _launch(live_world, allow_overlap=True)

    def both_running() -> bool:
        statuses = {r.status for r in Run.objects.filter(uuid__in=[first, second])}
        return statuses == {"running"}

    try:
        wait_for(both_running, timeout_s=30, every_s=0.05)
    except AssertionError:
        seen = [
            (str(r.uuid), r.status, r.started_at, r.finished_at, r.reason, _log(str(r.uuid)))
            for r in Run.objects.filter(uuid__in=[first, second])
        ]
        raise AssertionError(f"the two runs were never running together: {seen}") from None
    a, b = final_run(first, wait_for), final_run(second, wait_for)
    assert (a.status, b.status) == ("succeeded", "succeeded"), (a.reason, b.reason)
    assert b.allow_overlap and not a.allow_overlap
    assert b.started_at < a.finished_at and a.started_at < b.finished_at
    assert [o["run"] for o in a.overlaps] == [second]
    assert [o["run"] for o in b.overlaps] == [first]

    api = live_world.api("viewer")
    assert api.get(f"/api/v1/runs/{first}").json()["overlaps"][0]["run"] == second
    assert api.get(f"/api/v1/runs/{second}").json()["allow_overlap"] is True
    assert any(line.startswith("overlap: ") and second in line for line in _log(first))
    assert any(line.startswith("overlap: ") and first in line for line in _log(second))
    for own, other in ((first, second), (second, first)):
        page = live_world.client("viewer").get(f"/runs/{own}/").content.decode()
        assert 'id="overlaps"' in page and f'data-overlap-run="{other}"' in page
        assert "Overlapped" in page
