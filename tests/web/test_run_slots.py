"""Slots under contention (issue 26 item 4) and the endpoint lease in the line (issue 20 item 2),
as the line's rule and the worker's claim apply them (runs.line, runs.claiming.run_claim_next):

- the next free slot goes to a waiting team ahead of the holder's own queue;
- AIPERF_TEAM_SLOT_SHARE caps a team at a share of the worker slots seen: with 2 slots and
  0.5, one team's queue of long runs holds one slot and another team's run starts at once,
  and the waiting run says which runs it waits for and its place in line;
- a launch longer than AIPERF_TEAM_MAX_RUN_S is refused with a 422 naming the limit;
- a queued run on an endpoint another run holds waits for that run (reason `endpoint`, the
  holder named and linked, a line in its log), unless it set allow_overlap.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

from django.utils import timezone

from aiperf_web.endpoints.models import Endpoint
from aiperf_web.runs.claiming import run_claim_next
from aiperf_web.runs.line import lease_log_waiting, queue_line, run_wait
from aiperf_web.runs.models import Run, RunLog, Status
from aiperf_web.runs.presence import presence_beat
from aiperf_web.teams.models import Team
from tests.web.conftest import World


def _run(
    world: World,
    team: Team,
    status: Status,
    *,
    age_s: float,
    endpoint: Endpoint | None = None,
    duration_s: float = 600,
    **fields: Any,
) -> Run:
    at = timezone.now() - dt.timedelta(seconds=age_s)
    run_obj = Run.objects.create(
        team=team,
        scenario=world.scenario,
        scenario_name=f"{team.name}-scenario",
        endpoint=endpoint,
        endpoint_name=endpoint.name if endpoint else "gone",
        target_kind="endpoint",
        spec={**world.scenario.spec, "duration_s": duration_s},
        status=status,
        started_at=at if status == Status.RUNNING else None,
        **fields,
    )
    Run.objects.filter(pk=run_obj.pk).update(created_at=at)
    run_obj.refresh_from_db()
    return run_obj


def _slots(settings: Any, name: str, slots: int) -> None:
    # A queue of this test's own with one worker of `slots` slots beating on it.
    settings.AIPERF_RUNS_QUEUE = f"runs-{name}-{os.getpid()}"
    presence_beat(worker=f"w-{name}@test", queues=[settings.AIPERF_RUNS_QUEUE], slots=slots)


def test_the_next_free_slot_goes_to_the_waiting_team_before_the_holders_queue(
    world: World, settings: Any
) -> None:
    _slots(settings, "fair", 2)
    _run(world, world.team, Status.RUNNING, age_s=60)
    own = [_run(world, world.team, Status.QUEUED, age_s=50 - i) for i in range(3)]
    theirs = _run(world, world.other_team, Status.QUEUED, age_s=1)  # the youngest of all
    claimed = run_claim_next(worker="test:fair")
    assert claimed is not None and claimed.pk == theirs.pk
    wait = run_wait(Run.objects.get(pk=own[0].pk))
    assert wait is not None and (wait.reason, wait.place) == ("slots", 1)


def test_a_team_holds_at_most_its_share_of_the_slots(world: World, settings: Any) -> None:
    _slots(settings, "share", 2)
    settings.AIPERF_TEAM_SLOT_SHARE = 0.5
    # Team alpha: a queue of long runs, the oldest first in line.
    alpha = [_run(world, world.team, Status.QUEUED, age_s=100 - i) for i in range(4)]
    first = run_claim_next(worker="test:share-1")
    assert first is not None and first.pk == alpha[0].pk
    # A slot is free, but alpha has its half: no claim takes alpha's next run.
    assert run_claim_next(worker="test:share-2") is None
    assert queue_line().cap == 1
    # Beta's run, launched later, starts at once on the free slot.
    beta = _run(world, world.other_team, Status.QUEUED, age_s=1)
    assert [q.pk for q in queue_line().startable] == [beta.pk]
    second = run_claim_next(worker="test:share-3")
    assert second is not None and second.pk == beta.pk

    wait = run_wait(Run.objects.get(pk=alpha[1].pk))
    assert wait is not None
    assert wait.reason == "team_cap" and wait.place == 1
    assert [h.id for h in wait.waits_for] == [first.uuid]
    assert "AIPERF_TEAM_SLOT_SHARE = 0.5 of the 2 worker slots" in wait.message
    assert f"{first.scenario_name} on {first.endpoint_name}" in wait.message
    later = run_wait(Run.objects.get(pk=alpha[3].pk))
    assert later is not None and later.place == 3


def test_a_launch_longer_than_the_limit_is_refused_naming_it(world: World, settings: Any) -> None:
    settings.AIPERF_TEAM_MAX_RUN_S = 600
    api = world.api("teammate")
    body = {"scenario": str(world.scenario.uuid), "endpoint": str(world.endpoint.uuid)}
    refused = api.post(
        "/api/v1/runs",
        {**body, "overrides": {"duration_s": 601}},
        content_type="application/json",
    )
    assert refused.status_code == 422, refused.content
    text = refused.content.decode()
    assert "600 s (AIPERF_TEAM_MAX_RUN_S)" in text and "overrides.duration_s" in text
    accepted = api.post(
        "/api/v1/runs", {**body, "overrides": {"duration_s": 600}}, content_type="application/json"
    )
    assert accepted.status_code == 201, accepted.content
    # Simulated runs run in virtual time: the limit is not theirs.
    simulated = api.post(
        "/api/v1/runs",
        {"scenario": str(world.scenario.uuid), "overrides": {"duration_s": 3600}},
        content_type="application/json",
    )
    assert simulated.status_code == 201, simulated.content


def test_a_run_waits_for_the_run_holding_its_endpoint(world: World, settings: Any) -> None:
    _slots(settings, "lease", 4)
    holder = _run(world, world.team, Status.RUNNING, age_s=20, endpoint=world.endpoint)
    queued = _run(world, world.team, Status.QUEUED, age_s=5, endpoint=world.endpoint)
    elsewhere = _run(world, world.team, Status.QUEUED, age_s=2)  # no endpoint lease

    wait = run_wait(queued)
    assert wait is not None and wait.reason == "endpoint"
    assert [h.id for h in wait.waits_for] == [holder.uuid]
    assert f"its endpoint {world.endpoint.name} is in use" in wait.message
    assert "is running on it" in wait.message and "allow_overlap" in wait.message
    assert [q.pk for q in queue_line().startable] == [elsewhere.pk]

    assert lease_log_waiting(world.endpoint.pk) == 1
    assert lease_log_waiting(world.endpoint.pk) == 0  # said once, not at every look
    line = RunLog.objects.filter(run=queued).values_list("message", flat=True).last()
    assert line is not None and str(holder.uuid) in line and "endpoint lease" in line

    claimed = run_claim_next(worker="test:lease")
    assert claimed is not None and claimed.pk == elsewhere.pk
    assert run_claim_next(worker="test:lease") is None  # the lease holds

    page = world.client("viewer").get(f"/runs/{queued.uuid}/").content.decode()
    assert 'data-wait-reason="endpoint"' in page
    assert f'href="/runs/{holder.uuid}/"' in page
    api = world.api("viewer").get(f"/api/v1/runs/{queued.uuid}").json()
    assert api["waiting"]["reason"] == "endpoint"
    assert api["waiting"]["waits_for"][0]["id"] == str(holder.uuid)


def test_two_queued_runs_on_one_endpoint_start_one_at_a_time(world: World, settings: Any) -> None:
    _slots(settings, "pair", 4)
    first = _run(world, world.team, Status.QUEUED, age_s=5, endpoint=world.endpoint)
    second = _run(world, world.other_team, Status.QUEUED, age_s=4, endpoint=world.endpoint)
    line = queue_line()
    assert [q.pk for q in line.startable] == [first.pk]
    assert line.leased == {second.pk: first.pk}
    wait = run_wait(second)
    assert wait is not None and wait.reason == "endpoint"
    assert "ahead of it in line" in wait.message


def test_an_opted_in_run_starts_beside_the_holder_and_both_record_it(
    world: World, settings: Any
) -> None:
    _slots(settings, "overlap", 4)
    holder = _run(world, world.team, Status.RUNNING, age_s=20, endpoint=world.endpoint)
    opted = _run(
        world, world.team, Status.QUEUED, age_s=5, endpoint=world.endpoint, allow_overlap=True
    )
    claimed = run_claim_next(worker="test:overlap")
    assert claimed is not None and claimed.pk == opted.pk
    holder.refresh_from_db()
    claimed.refresh_from_db()
    assert [o["run"] for o in claimed.overlaps] == [str(holder.uuid)]
    assert [o["run"] for o in holder.overlaps] == [str(claimed.uuid)]
    assert claimed.overlaps[0]["at"] == holder.overlaps[0]["at"]
    logs = RunLog.objects.filter(run__in=[holder, claimed], message__startswith="overlap:")
    assert logs.count() == 2
    detail = world.api("viewer").get(f"/api/v1/runs/{holder.uuid}").json()
    assert detail["overlaps"][0]["run"] == str(claimed.uuid)
    assert detail["allow_overlap"] is False


def test_the_launch_page_offers_to_share_the_endpoint(world: World) -> None:
    client = world.client("teammate")
    page = client.get("/runs/new/").content.decode()
    assert 'name="allow_overlap"' in page and "Share the endpoint" in page
    response = client.post(
        "/runs/new/",
        {
            "scenario": str(world.scenario.uuid),
            "target": str(world.endpoint.uuid),
            "more": "{}",
            "allow_overlap": "on",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    launched = Run.objects.filter(status=Status.QUEUED).get()
    assert launched.allow_overlap is True
    shown = client.get(f"/runs/{launched.uuid}/").content.decode()
    assert "It may share its endpoint (allow_overlap)." in shown


def test_compare_says_which_runs_overlapped(world: World, settings: Any) -> None:
    _slots(settings, "compare", 4)
    holder = _run(world, world.team, Status.RUNNING, age_s=20, endpoint=world.endpoint)
    _run(world, world.team, Status.QUEUED, age_s=5, endpoint=world.endpoint, allow_overlap=True)
    opted = run_claim_next(worker="test:compare")
    assert opted is not None
    ids = f"{holder.uuid},{opted.uuid}"
    body = world.api("viewer").get(f"/api/v1/compare?runs={ids}").json()
    assert [[o["run"] for o in r["overlaps"]] for r in body["runs"]] == [
        [str(opted.uuid)],
        [str(holder.uuid)],
    ]
    page = world.client("viewer").get(f"/reports/compare/?runs={ids}").content.decode()
    assert page.count('data-overlaps="1"') == 2 and "Overlapped on its endpoint" in page
