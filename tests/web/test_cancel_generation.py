"""Cancel during synthetic workload generation (issue 13 item 4): a synthetic workload near
the size limits takes tens of seconds to generate before a run sends anything; the Cancel
button ends the run `cancelled` then and there, through the real worker (a Celery process on
PostgreSQL + Redis, or the embedded worker), instead of after the generation."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from aiperf_web.runs.models import FINAL, Run, RunLog, Status
from aiperf_web.runs.services import run_launch
from aiperf_web.scenarios.services import scenario_create
from tests.web.conftest import World

# ~1.2 million requests of one block each: ~17 s of generation on an idle core, ~60x what the
# worker needs to see the cancel.
TREES = 5_000
BIG_SYNTHETIC = {"trees": TREES, "block_size": 65_536}


@pytest.mark.parametrize("target", ["endpoint", "simulated"])
def test_cancel_ends_a_run_while_its_synthetic_workload_is_still_being_generated(
    live_world: World, wait_for: Callable[..., Any], target: str
) -> None:
    world = live_world
    scenario = scenario_create(
        actor=world.owner,
        team=world.team,
        name="big synthetic",
        spec={"workload": {"synthetic": BIG_SYNTHETIC}, "duration_s": 60, "concurrency": 4},
    )
    run = run_launch(
        actor=world.teammate,
        scenario_id=scenario.uuid,
        endpoint_id=world.endpoint.uuid if target == "endpoint" else "simulated",
    )
    wait_for(lambda: Run.objects.get(pk=run.pk).status == Status.RUNNING, timeout_s=60)

    page = world.client("teammate")
    assert page.post(f"/runs/{run.uuid}/cancel/").status_code == 302
    # Generous: the old worker ended the run only after the whole generation.
    wait_for(lambda: Run.objects.get(pk=run.pk).status in FINAL, timeout_s=120, every_s=0.05)

    run.refresh_from_db()
    assert run.status == Status.CANCELLED, run.reason
    lines = list(
        RunLog.objects.filter(run=run, message__contains="while generating").values_list(
            "message", flat=True
        )
    )
    assert lines, list(RunLog.objects.filter(run=run).values_list("message", flat=True))
    match = re.search(r"at tree ([\d,]+) of ([\d,]+)", lines[0])
    assert match, lines[0]
    assert int(match[1].replace(",", "")) < TREES == int(match[2].replace(",", ""))
    assert run.summary is not None and run.summary["requests"] == 0
    assert run.records_count == 0
    assert page.get(f"/runs/{run.uuid}/").status_code == 200
