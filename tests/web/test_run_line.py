"""Health that tells the truth, and a queued run that says why it waits (issue 26 item 2).

- /healthz answers 503 naming the worker when no worker consumed the runs queue within
  AIPERF_STALE_RUN_S while runs wait; no worker while nothing waits is reported, not a fault.
- A real worker (the session's: a process in the production shape, a thread in the embedded
  one) says it is there, with its slots, from its consumer (runs.presence).
- run_wait: no worker, an A/B partner, the team's cap, every slot taken (by which runs; other
  teams' runs counted, never named), and the place in line, which is the order the worker's
  claim follows (runs.line is the one rule for both).
- The API's `waiting` and the run page say it.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from typing import Any

from django.test import Client
from django.utils import timezone

from aiperf_web.endpoints.models import Endpoint
from aiperf_web.runs.claiming import run_claim_next
from aiperf_web.runs.line import run_wait
from aiperf_web.runs.models import Run, Status
from aiperf_web.runs.presence import presence_beat, workers_seen
from aiperf_web.teams.models import Team
from tests.web.conftest import World


def _run(
    world: World,
    team: Team,
    status: Status,
    *,
    age_s: float,
    endpoint: Endpoint | None = None,
    **fields: Any,
) -> Run:
    """A run of `team` created `age_s` ago (and started then, when running), 60 s long; on
    `endpoint` (its lease), else on an endpoint since deleted (no lease)."""
    at = timezone.now() - dt.timedelta(seconds=age_s)
    run_obj = Run.objects.create(
        team=team,
        scenario=world.scenario,
        scenario_name=f"{team.name}-scenario",
        endpoint=endpoint,
        endpoint_name="mock",
        target_kind="endpoint",
        spec={**world.scenario.spec, "duration_s": 60},
        status=status,
        started_at=at if status == Status.RUNNING else None,
        **fields,
    )
    Run.objects.filter(pk=run_obj.pk).update(created_at=at)  # auto_now_add ignores a value
    run_obj.refresh_from_db()
    return run_obj


def _own_queue(settings: Any, name: str) -> str:
    # A queue no worker of this machine consumes, so presence starts empty.
    settings.AIPERF_RUNS_QUEUE = f"runs-{name}-{os.getpid()}"
    return str(settings.AIPERF_RUNS_QUEUE)


def test_healthz_is_503_naming_the_worker_only_while_runs_wait_and_none_consumes(
    world: World, settings: Any
) -> None:
    queue = _own_queue(settings, "health")
    window = settings.AIPERF_STALE_RUN_S
    response = Client().get("/healthz")
    assert response.status_code == 200, response.json()
    assert response.json()["worker"] == f"none seen in {window} s"

    _run(world, world.team, Status.QUEUED, age_s=1)
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json()["worker"] == f"none seen in {window} s while 1 queued run(s) wait"
    assert response.json()["database"] == "ok" and response.json()["broker"] == "ok"

    presence_beat(worker="w@test", queues=[queue], slots=2)
    response = Client().get("/healthz")
    assert response.status_code == 200 and response.json()["worker"] == "ok"


def test_a_real_worker_says_it_consumes_the_runs_queue_with_its_slots(
    live_world: World, settings: Any, wait_for: Callable[..., Any]
) -> None:
    seen = wait_for(
        lambda: workers_seen(settings.AIPERF_RUNS_QUEUE, within_s=settings.AIPERF_STALE_RUN_S),
        timeout_s=30,
    )
    assert [p.slots for p in seen] == [2]


def test_a_queued_run_says_no_worker_takes_runs(world: World, settings: Any) -> None:
    queue = _own_queue(settings, "none")
    queued = _run(world, world.team, Status.QUEUED, age_s=1)
    wait = run_wait(queued)
    assert wait is not None
    assert (wait.reason, wait.place, wait.workers, wait.slots) == ("no_worker", 1, 0, 0)
    assert f"-Q {queue}" in wait.message
    assert run_wait(world.run) is None  # a finished run waits for nothing


def test_every_slot_taken_names_own_runs_and_only_counts_other_teams(
    world: World, settings: Any
) -> None:
    queue = _own_queue(settings, "slots")
    presence_beat(worker="w@test", queues=[queue], slots=2)
    theirs = _run(world, world.other_team, Status.RUNNING, age_s=10)
    ours = _run(world, world.team, Status.RUNNING, age_s=30)
    queued = _run(world, world.team, Status.QUEUED, age_s=1)
    wait = run_wait(queued)
    assert wait is not None
    assert (wait.reason, wait.place, wait.slots, wait.running) == ("slots", 1, 2, 2)
    # The soonest to end first: ours (60 s long, 30 s in), then theirs; theirs anonymous.
    assert [h.id for h in wait.waits_for] == [ours.uuid, None]
    assert wait.waits_for[1].name == "a run of another team"
    assert wait.waits_for[0].ends_in_s is not None and wait.waits_for[0].ends_in_s <= 30
    assert "1 run(s) of other teams" in wait.message
    assert theirs.scenario_name not in wait.message
    assert "it is next in line" in wait.message


def test_the_team_cap_names_the_team_runs_it_waits_for(world: World, settings: Any) -> None:
    queue = _own_queue(settings, "cap")
    settings.AIPERF_TEAM_MAX_RUNNING = 1
    presence_beat(worker="w@test", queues=[queue], slots=4)
    running = _run(world, world.team, Status.RUNNING, age_s=5)
    queued = _run(world, world.team, Status.QUEUED, age_s=1)
    other = _run(world, world.other_team, Status.QUEUED, age_s=0.5)
    wait = run_wait(queued)
    assert wait is not None
    assert wait.reason == "team_cap"
    assert [h.id for h in wait.waits_for] == [running.uuid]
    assert "AIPERF_TEAM_MAX_RUNNING" in wait.message
    # The other team's younger run goes first: a slot is free and its team is under the cap.
    assert wait.place == 2
    other_wait = run_wait(other)
    assert other_wait is not None
    assert (other_wait.reason, other_wait.place) == ("starting", 1)


def test_the_place_in_line_is_the_order_workers_claim_in(world: World, settings: Any) -> None:
    queue = _own_queue(settings, "line")
    presence_beat(worker="w@test", queues=[queue], slots=1)
    a1 = _run(world, world.team, Status.QUEUED, age_s=30)
    a2 = _run(world, world.team, Status.QUEUED, age_s=20)
    b1 = _run(world, world.other_team, Status.QUEUED, age_s=10)
    b2 = _run(world, world.other_team, Status.QUEUED, age_s=5, after=b1)
    places = {r.pk: run_wait(r) for r in (a1, a2, b1, b2)}
    # a1 first (oldest), then b1 (its team runs none, a1's team one), then a2; b2 waits for b1.
    assert [(w.reason, w.place) for w in places.values() if w] == [
        ("starting", 1),
        ("line", 3),
        ("line", 2),
        ("partner", 4),
    ]
    partner_wait = places[b2.pk]
    assert partner_wait is not None and [h.id for h in partner_wait.waits_for] == [b1.uuid]

    claimed = [run_claim_next(worker="test:1"), run_claim_next(worker="test:2")]
    assert [r.pk if r else None for r in claimed] == [a1.pk, b1.pk]
    after = run_wait(Run.objects.get(pk=a2.pk))
    assert after is not None and (after.reason, after.place) == ("slots", 1)


def test_the_api_and_the_page_say_why_a_queued_run_waits(world: World, settings: Any) -> None:
    _own_queue(settings, "api")
    queued = _run(world, world.team, Status.QUEUED, age_s=1)
    body = world.api("viewer").get(f"/api/v1/runs/{queued.uuid}").json()
    assert body["waiting"]["reason"] == "no_worker"
    assert body["waiting"]["place"] == 1 and body["waiting"]["waits_for"] == []
    assert body["waiting"]["message"].startswith("no worker has taken runs")
    done = world.api("viewer").get(f"/api/v1/runs/{world.run.uuid}").json()
    assert done["waiting"] is None

    page = world.client("viewer").get(f"/runs/{queued.uuid}/")
    assert page.status_code == 200
    text = page.content.decode()
    assert 'data-wait-reason="no_worker"' in text
    assert "Queued, next in line: no worker has taken runs" in text
