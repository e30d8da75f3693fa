"""Sweeps through the service against the built-in mock over real sockets (issue 20's 'done
when'): legacy vs spawn-pin along the load axis, and the slo search against an exhaustive
sweep of the same points. Every point is a real run executed by the real worker, one after
another on the endpoint (its lease and drain between them)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from aiperf_web.core.mock import MockServer, free_port
from aiperf_web.endpoints.services import endpoint_create
from aiperf_web.scenarios.services import scenario_create, trace_upload
from aiperf_web.sweeps.models import Sweep
from aiperf_web.sweeps.selectors import sweep_report
from tests.fixtures import CLAUDE_CODE_SUBAGENTS
from tests.web.conftest import World

# Live points one after another (two sweeps in the slo test): past the suite's 300 s per test
# on a busy machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# The recorded session's span: each lane replays its first tree from 100-300 s into it, where
# the three SPAWN subagents run (tests/fixtures/README.md), as tests/runner/sweep/test_cli.py.
_SPAN_S = 10395.28


def _final(sweep_id: str, wait_for: Any, timeout_s: float) -> Sweep:
    def ended() -> Sweep | None:
        sweep = Sweep.objects.get(uuid=sweep_id)
        return sweep if sweep.status in ("succeeded", "failed", "cancelled") else None

    found: Sweep = wait_for(ended, timeout_s=timeout_s, every_s=0.5)
    return found


def _launch(world: World, **body: Any) -> str:
    response = world.api("teammate").post("/api/v1/sweeps", body, content_type="application/json")
    assert response.status_code == 201, response.content
    return str(response.json()["id"])


def test_legacy_vs_spawn_pin_on_the_mock_orphans_grow_with_load_only_under_legacy(
    live_world: World, wait_for: Any
) -> None:
    world = live_world
    trace = trace_upload(
        actor=world.owner,
        team=world.team,
        filename=CLAUDE_CODE_SUBAGENTS.name,
        chunks=[CLAUDE_CODE_SUBAGENTS.read_bytes()],
        name="claude-code-subagents",
    )
    scenario = scenario_create(
        actor=world.owner,
        team=world.team,
        name="subagents",
        spec={
            "duration_s": 1,
            "speedup": 20000,
            "start_window": [100 / _SPAN_S, 300 / _SPAN_S],
        },
        trace_ids=[trace.uuid],
    )
    sweep_id = _launch(
        world,
        scenario=str(scenario.uuid),
        endpoint=str(world.endpoint.uuid),
        sweep={
            "concurrency": [2, 4, 8, 16],
            "arms": [
                {"name": "legacy", "overrides": {"policy": "legacy"}},
                {"name": "spawn-pin", "overrides": {"policy": "spawn-pin"}},
            ],
            "cooldown_s": 0.5,
        },
    )
    sweep = _final(sweep_id, wait_for, timeout_s=300)
    assert sweep.status == "succeeded", (sweep.reason, sweep.verdict_message)
    report = sweep_report(sweep)
    assert report.runs == 8 and all(p.valid for p in report.points), sweep.verdict_message
    orphans = {
        arm: [row.mean("orphaned_session_copies") for row in report.aggregates if row.arm == arm]
        for arm in ("legacy", "spawn-pin")
    }
    legacy = orphans["legacy"]
    assert None not in legacy and legacy == sorted(legacy), orphans  # type: ignore[type-var]
    assert legacy[-1] > legacy[0], orphans  # type: ignore[operator]
    assert orphans["spawn-pin"] == [0.0, 0.0, 0.0, 0.0], orphans
    # Live: the points never overlapped, each run started after the one before had ended.
    runs = [p.run for p in sweep.points.select_related("run").order_by("seq")]
    for before, after in itertools.pairwise(runs):
        assert before is not None and after is not None
        assert before.finished_at is not None and after.started_at is not None
        assert after.started_at >= before.finished_at
    print(f"legacy vs spawn-pin on the mock: orphaned copies {orphans}")


@pytest.fixture(scope="module")
def one_worker_mock() -> Iterator[str]:
    """A mock of one inference worker, slow enough that TTFT climbs with the lanes."""
    mock = MockServer(port=free_port(), time_scale=0.05, workers=1)
    mock.start()
    yield mock.url
    mock.stop()


_LOADS = [1, 2, 3, 4, 6, 8, 12, 16]
_SLO = {"ttft_ms": 100, "goodput_fraction": 0.8}


def test_slo_mode_on_the_mock_finds_the_exhaustive_sweeps_answer_in_fewer_runs(
    live_world: World, wait_for: Any, one_worker_mock: str
) -> None:
    world = live_world
    endpoint = endpoint_create(
        actor=world.owner,
        team=world.team,
        name="one-worker-mock",
        base_url=one_worker_mock,
        model="mock-model",
        server_kind="dynamo",
    )
    scenario = scenario_create(
        actor=world.owner,
        team=world.team,
        name="synthetic-16",
        spec={"duration_s": 3, "speedup": 20, "workload": {"synthetic": {"trees": 16}}},
        trace_ids=[],
    )
    common = {"scenario": str(scenario.uuid), "endpoint": str(endpoint.uuid)}
    fields = {"concurrency": _LOADS, "slo": _SLO, "cooldown_s": 0.5}
    exhaustive_id = _launch(world, **common, sweep=fields)
    exhaustive = _final(exhaustive_id, wait_for, timeout_s=400)
    assert exhaustive.status == "succeeded", exhaustive.reason
    rows = sweep_report(exhaustive).aggregates
    meeting = [row.load for row in rows if row.verdict is not None and row.verdict.meets]
    assert meeting, [(r.load, r.verdict) for r in rows]

    search_id = _launch(world, **common, sweep={**fields, "mode": "slo"})
    searched = _final(search_id, wait_for, timeout_s=400)
    assert searched.status == "succeeded", searched.reason
    report = sweep_report(searched)
    search = report.searches["base"]
    assert search.done and search.highest_meeting is not None, search.statement
    step = abs(_LOADS.index(round(search.highest_meeting)) - _LOADS.index(round(max(meeting))))
    assert step <= 1, (search.statement, meeting)
    assert search.runs == report.runs < len(_LOADS) == search.exhaustive_runs
    assert search.statement in searched.verdict_message
    print(
        f"slo on the mock: exhaustive {len(_LOADS)} runs, highest meeting c={max(meeting):g}; "
        f"slo {search.runs} runs: {search.statement}"
    )
