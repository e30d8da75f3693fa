"""Runs that must not hurt the service (issue 13 items 3 and 4): specs that used to break runs
are refused or still cancel within 2 s keeping what they measured, each team has caps on its
queued and running runs, and workers start runs in fair order between teams."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from aiperf_web.runs.claiming import run_claim_next
from aiperf_web.runs.models import Run, RunRecord, Status
from aiperf_web.scenarios.services import scenario_create
from runner import MAX_DURATION_S
from tests.web.conftest import World


def _launch(api: Client, scenario: Any, endpoint: Any, **overrides: Any) -> Any:
    return api.post(
        "/api/v1/runs",
        {"scenario": str(scenario), "endpoint": str(endpoint), "overrides": overrides},
        content_type="application/json",
    )


# -- specs that broke runs --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        (
            {"timing": "rate", "arrival": "gamma", "burstiness": 1e-320, "rate_per_s": 5},
            "burstiness",
        ),
        ({"duration_s": 1e308}, "duration_s"),
        ({"target": {"time_scale": 1e-300}}, "target.time_scale"),
        ({"concurrency": 100_000}, "concurrency"),
    ],
)
def test_a_spec_that_broke_runs_is_refused_at_launch_naming_the_field(
    world: World, overrides: dict[str, Any], field: str
) -> None:
    response = _launch(world.api("teammate"), world.scenario.uuid, "simulated", **overrides)
    assert response.status_code == 422, response.content
    assert any(e["field"] == f"overrides.{field}" for e in response.json()["errors"])


def test_an_absurd_simulated_run_still_accepted_cancels_promptly_keeping_results(
    live_world: World, wait_for: Callable[..., Any]
) -> None:
    # A zero-latency cluster under closed timing for the longest duration and the most
    # requests a spec takes: the records outran the database and a cancel waited for them.
    api = live_world.api("teammate")
    response = _launch(
        api,
        live_world.scenario.uuid,
        "simulated",
        duration_s=MAX_DURATION_S,
        timing="closed",
        max_requests=10**8,
        target={"time_scale": 0},
    )
    assert response.status_code == 201, response.content
    run = Run.objects.get(uuid=response.json()["id"])
    # Long enough for the writer to have been behind the engine many times over: 30,000 stored
    # is three times the sink's bound (2 batches of 5,000); the bound itself is pinned by
    # test_records_waiting_for_the_database_are_bounded_so_a_cancel_never_waits_for_them.
    wait_for(lambda: RunRecord.objects.filter(run=run).count() > 30_000, timeout_s=90)

    asked = time.monotonic()
    assert api.post(f"/api/v1/runs/{run.uuid}/cancel").status_code == 200
    wait_for(lambda: Run.objects.get(pk=run.pk).status != "running", timeout_s=120, every_s=0.05)
    took = time.monotonic() - asked
    run.refresh_from_db()
    assert run.status == "cancelled", run.reason
    # Cancel's 2 s target is measured by `manage.py bench_live` (cancel click to cancelled
    # badge), not here: on a machine shared with the suite's other processes the same cancel
    # takes 2-3.5 s. What this bound catches is the bug itself, a cancel waiting for the
    # tens of thousands of records the writer was behind (far longer).
    print(f"cancel took {took:.2f} s")
    assert took < 10, f"cancel took {took:.2f} s"
    assert run.summary is not None and run.summary["requests"] > 0
    assert run.records_count == RunRecord.objects.filter(run=run).count() > 0


# -- per-team caps ------------------------------------------------------------------------------


def test_a_launch_over_the_teams_queued_cap_gets_429_naming_the_cap_and_the_count(
    world: World, settings: Any
) -> None:
    settings.AIPERF_TEAM_MAX_QUEUED = 2
    api = world.api("teammate")
    for _ in range(2):
        assert _launch(api, world.scenario.uuid, "simulated").status_code == 201
    refused = _launch(api, world.scenario.uuid, "simulated")
    assert refused.status_code == 429, refused.content
    detail = refused.json()["detail"]
    assert "2 runs queued" in detail and "AIPERF_TEAM_MAX_QUEUED = 2" in detail
    assert Run.objects.filter(team=world.team, status=Status.QUEUED).count() == 2


def test_the_launch_page_shows_the_queued_cap_as_a_form_error(world: World, settings: Any) -> None:
    settings.AIPERF_TEAM_MAX_QUEUED = 1
    assert _launch(world.api("owner"), world.scenario.uuid, "simulated").status_code == 201
    page = world.client("owner").post(
        "/runs/new/", {"scenario": str(world.scenario.uuid), "target": "simulated"}
    )
    assert page.status_code == 200
    assert b"1 runs queued" in page.content and b"AIPERF_TEAM_MAX_QUEUED" in page.content


def _queued(world: World, team: Any, scenario: Any, n: int) -> list[Run]:
    return [
        Run.objects.create(
            team=team,
            scenario=scenario,
            scenario_name=scenario.name,
            endpoint_name="simulated cluster",
            target_kind="simulated",
            spec=scenario.spec,
        )
        for _ in range(n)
    ]


def test_a_worker_claims_the_oldest_run_of_the_team_with_fewest_running(
    world: World, settings: Any
) -> None:
    settings.AIPERF_TEAM_MAX_RUNNING = 10
    beta = scenario_create(
        actor=world.outsider, team=world.other_team, name="beta", spec={"duration_s": 5}
    )
    a1, a2, a3 = _queued(world, world.team, world.scenario, 3)
    (b1,) = _queued(world, world.other_team, beta, 1)
    order = [run_claim_next(worker="w") for _ in range(4)]
    assert [r.pk for r in order if r is not None] == [a1.pk, b1.pk, a2.pk, a3.pk]


def test_a_team_at_its_running_cap_is_passed_over_until_a_run_ends(
    world: World, settings: Any
) -> None:
    settings.AIPERF_TEAM_MAX_RUNNING = 1
    first, second = _queued(world, world.team, world.scenario, 2)
    assert run_claim_next(worker="w") == first
    assert run_claim_next(worker="w") is None  # alpha runs 1 of 1
    Run.objects.filter(pk=first.pk).update(status=Status.SUCCEEDED)
    assert run_claim_next(worker="w") == second


# -- fairness with a real worker ----------------------------------------------------------------


def test_a_short_run_of_another_team_starts_before_a_teams_third_long_run(
    live_world: World, wait_for: Callable[..., Any]
) -> None:
    # The worker runs two at once: alpha's first two take it, then alpha's third and beta's
    # run wait. When alpha's first ends (its second still runs), beta (no run running) goes
    # first, not FIFO's alpha. The first two end apart: two slots freed at one instant would
    # leave alpha with none running, and its third, the older run, would rightly go first.
    api = live_world.api("teammate")
    alpha = [
        _launch(api, live_world.scenario.uuid, live_world.endpoint.uuid, duration_s=d).json()["id"]
        for d in (2, 8, 2)
    ]
    beta_scenario = scenario_create(
        actor=live_world.outsider,
        team=live_world.other_team,
        name="beta-short",
        spec={"duration_s": 5, "workload": {"synthetic": {"trees": 2}}},
    )
    response = _launch(live_world.api("outsider"), beta_scenario.uuid, "simulated")
    assert response.status_code == 201, response.content
    beta = response.json()["id"]

    def started(run_id: str) -> Any:
        return Run.objects.get(uuid=run_id).started_at

    wait_for(lambda: started(alpha[2]) and started(beta), timeout_s=90, every_s=0.2)
    reasons = {r: Run.objects.get(uuid=r).reason for r in [*alpha, beta]}
    assert started(beta) < started(alpha[2]), reasons
    for run_id in [*alpha, beta]:
        wait_for(lambda r=run_id: Run.objects.get(uuid=r).status in ("succeeded",), timeout_s=60)


# -- the sink's backlog ---------------------------------------------------------------------------


# The records' database writes are replaced by a slow stand-in: the same in every shape.
@pytest.mark.shape_independent
def test_records_waiting_for_the_database_are_bounded_so_a_cancel_never_waits_for_them(
    world: World, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from aiperf_web.runs import sink as sink_module

    settings.AIPERF_RECORD_BATCH = 100

    def slow_insert(*, run_pk: int, first_seq: int, batch: Any) -> int:
        time.sleep(0.05)  # a database slower than the simulator, as every database is
        return len(batch)

    monkeypatch.setattr(sink_module, "records_insert", slow_insert)
    stop = threading.Event()
    sink = sink_module.RunSink(run=world.run, stop=stop)
    for i in range(60):
        sink.records([{"request_id": i * 100 + j} for j in range(100)])  # type: ignore[misc]
    stop.set()  # cancel
    asked = time.monotonic()
    sink.close()
    assert time.monotonic() - asked < 1.0
    assert sink.records_written == 6000
