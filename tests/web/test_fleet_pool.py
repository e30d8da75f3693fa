"""Several runs whose client workers are processes, at once, through the service: they share
one pool of real `celery -A aiperf_web worker -Q <hosts>` processes (three, tests/web/conftest.py
hosts_worker), over real Redis, against the real mock. A run that finds the pool busy waits
for its turn (runner/fleet/line.py) instead of failing, says so in its log, and can be
cancelled while it waits."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from aiperf_web.runs.models import Run
from tests.web.conftest import World, final_run


def _log(run_id: str) -> str:
    return "\n".join(Run.objects.get(uuid=run_id).log_lines.values_list("message", flat=True))


def test_a_run_waits_for_a_busy_host_pool_and_can_be_cancelled_meanwhile(
    live_world: World, hosts_worker: str, wait_for: Callable[..., Any]
) -> None:
    holder = live_world.launch_fleet_run(client_workers=3, duration_s=60)
    wait_for(lambda: "answering on" in _log(holder), timeout_s=60, every_s=0.2)
    # Sharing the endpoint on purpose: this is the host pool's wait, not the endpoint lease's.
    waiting = live_world.launch_fleet_run(client_workers=2, duration_s=3, allow_overlap=True)
    wait_for(lambda: "the host pool is busy" in _log(waiting), timeout_s=30, every_s=0.2)
    assert Run.objects.get(uuid=waiting).status == "running"

    api = live_world.api("teammate")
    asked = time.monotonic()
    assert api.post(f"/api/v1/runs/{waiting}/cancel").status_code == 200
    run = final_run(waiting, wait_for, timeout_s=10)
    took = time.monotonic() - asked
    assert run.status == "cancelled" and took < 2.5, (run.status, took)
    assert "cancelled while waiting for client-worker hosts" in _log(waiting)

    assert api.post(f"/api/v1/runs/{holder}/cancel").status_code == 200
    assert final_run(holder, wait_for, timeout_s=15).status == "cancelled"


def test_two_runs_wanting_the_whole_pool_both_run_one_after_the_other(
    live_world: World, hosts_worker: str, wait_for: Callable[..., Any]
) -> None:
    first = live_world.launch_fleet_run(client_workers=3, duration_s=4)
    wait_for(lambda: "answering on" in _log(first), timeout_s=60, every_s=0.2)
    second = live_world.launch_fleet_run(client_workers=3, duration_s=2, allow_overlap=True)
    for run_id in (first, second):
        run = final_run(run_id, wait_for)
        assert run.status == "succeeded", (run_id, run.reason)
        assert run.summary["requests"] > 0 and run.summary["fleet"]["lost"] == []
    # The second could not have had a host before the first's left: it waited, and said so.
    assert "the host pool is busy" in _log(second)
