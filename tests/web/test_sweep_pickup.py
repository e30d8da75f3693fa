"""The periodic pickup of stuck sweeps (sweeps/pickup.py): a sweep whose point run ended
without the driver moving it on, or whose driver never ran after the launch, is moved on by
every worker's pickup thread, without another run having to end."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.db import transaction

from aiperf_web.runs.models import Run
from aiperf_web.runs.services import run_cancel
from aiperf_web.sweeps import services
from aiperf_web.sweeps.models import Sweep, SweepPoint
from aiperf_web.sweeps.pickup import (
    PICKUP_EVERY_S,
    SweepPickup,
    start_sweep_pickup,
    sweeps_pick_up,
)
from aiperf_web.sweeps.services import sweep_launch, sweeps_stuck
from tests.web.conftest import ROOT, World

_ARMS = [{"name": "legacy", "overrides": {"policy": "legacy"}}]


def test_every_worker_and_serve_start_the_pickup() -> None:
    from celery.signals import worker_ready

    # Every Celery worker process at worker_ready; `manage.py serve` itself (its embedded
    # worker is a WorkController thread, which sends no worker_ready), beside the reaper.
    assert any(receiver() is start_sweep_pickup for _, receiver in worker_ready.receivers)
    serve = (ROOT / "aiperf_web/stack/management/commands/serve.py").read_text()
    assert "SweepPickup().start()" in serve


def test_a_sweep_whose_driver_never_ran_after_the_launch_is_stuck_until_picked_up(
    world: World,
) -> None:
    # The test's transaction never commits: the launch's on-commit driver call never runs, as
    # when the database went away at that commit.
    sweep = sweep_launch(
        actor=world.teammate,
        scenario_id=world.scenario.uuid,
        endpoint_id="simulated",
        sweep={"concurrency": [1, 2], "arms": _ARMS},
    )
    assert sweep.points.count() == 0
    assert sweeps_stuck() == [sweep.pk]
    assert sweeps_pick_up() == 1
    # Its first batch made: two queued point runs in flight, nothing stuck any more.
    points = list(sweep.points.select_related("run").order_by("seq"))
    assert [(p.load, p.run.status if p.run else None) for p in points] == [
        (1.0, "queued"),
        (2.0, "queued"),
    ]
    assert sweeps_stuck() == []
    assert Sweep.objects.get(pk=sweep.pk).status == "running"
    assert sweeps_pick_up() == 0


@pytest.mark.timeout(300)
def test_a_point_run_ended_without_the_driver_is_moved_on_by_the_workers_pickup(
    live_world: World, wait_for: Any, monkeypatch: pytest.MonkeyPatch, request: Any
) -> None:
    """On the mock endpoint (one point at a time): the first point's run is cancelled while
    queued (no run_ended) and no driver call follows. No other run ends; the worker's pickup
    stores that point's result and makes the next point's run, which the worker runs, and the
    sweep ends."""
    world = live_world
    if settings.EMBEDDED:
        # The embedded worker is a thread of this process and sends no worker_ready: start
        # the pickup as `manage.py serve` does beside it.
        pickup = SweepPickup()
        pickup.start()
        request.addfinalizer(pickup.done.set)
    advance = services.sweep_advance
    with monkeypatch.context() as patch, transaction.atomic():
        # The launch's own driver call at commit does nothing: the state is made by hand.
        patch.setattr(services, "sweep_advance", lambda pk: None)
        sweep = sweep_launch(
            actor=world.teammate,
            scenario_id=world.scenario.uuid,
            endpoint_id=world.endpoint.uuid,
            sweep={"concurrency": [1, 2], "arms": _ARMS},
        )
        advance(sweep.pk)  # the first point's run, queued
        first = SweepPoint.objects.select_related("run").get(sweep=sweep)
        assert first.run is not None
        run_cancel(actor=world.teammate, run_obj=first.run)  # from its page: no signal
    assert Run.objects.get(pk=first.run_id).status == "cancelled"
    assert sweeps_stuck() == [sweep.pk]

    def ended() -> Sweep | None:
        found = Sweep.objects.get(pk=sweep.pk)
        return found if found.status in ("succeeded", "failed", "cancelled") else None

    done: Sweep = wait_for(ended, timeout_s=PICKUP_EVERY_S + 120, every_s=0.5)
    points = list(done.points.select_related("run").order_by("seq"))
    assert [p.load for p in points] == [1.0, 2.0]
    assert points[0].valid is False and points[0].invalid_reason == "cancelled before its end"
    # The second point's run was made by the pickup (no run had ended) and ran to its end.
    second = points[1].run
    assert second is not None and second.status == "succeeded" and points[1].valid is True
    assert done.status == "succeeded" and done.verdict == "fail", done.verdict_message
    assert done.verdict_message.startswith("1 of 2 points invalid")
    assert sweeps_stuck() == []
