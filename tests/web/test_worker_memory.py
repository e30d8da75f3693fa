"""A worker process does not keep what its runs leave behind (issue 13 item 10): each run
freezes the objects alive at its start (gc.freeze, so the engine's collections skip Django's),
and the last run's workload, cyclic garbage until a full collection, must not be among them."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest

from aiperf_web.runs.executing import run_execute
from aiperf_web.runs.models import Status
from aiperf_web.runs.services import run_launch
from aiperf_web.scenarios.services import scenario_create
from tests.web.conftest import World


@pytest.fixture
def unfreeze_after() -> Iterator[None]:
    yield
    gc.unfreeze()  # the rest of the session collects as usual


def test_a_runs_workload_is_not_frozen_into_the_process_by_the_next_run(
    transactional_db: Any, mock_url: str, unfreeze_after: None
) -> None:
    world = World(mock_url)
    scenario = scenario_create(
        actor=world.owner,
        team=world.team,
        name="memory",
        spec={"workload": {"synthetic": {"trees": 32}}, "concurrency": 8, "duration_s": 600},
    )
    frozen: list[int] = []
    for n in range(3):
        launched = run_launch(
            actor=world.owner, scenario_id=scenario.uuid, endpoint_id="simulated", enqueue=False
        )
        status = run_execute(run_uuid=str(launched.uuid), worker=f"memory-test:{n}")
        assert status == Status.SUCCEEDED
        frozen.append(gc.get_freeze_count())
    # One run's workload and engine are ~11,000 tracked objects; what a run start may freeze
    # of its own (a connection, a cache entry) is a few dozen.
    assert frozen[2] - frozen[1] < 1_000, frozen
