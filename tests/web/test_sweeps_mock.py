"""Sweeps through the service against the built-in mock over real sockets (issue 20's 'done
when'): legacy vs spawn-pin along the load axis, every point a real run executed by the real
worker, one after another on the endpoint (its lease and drain between them); and the slo
search against an exhaustive sweep of the same points, through the same worker on one
simulated inference worker."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

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
            "duration_s": 2,
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
    # Grown with load: the most at the highest load, more than at the lowest (between them a
    # busy machine, which answers fewer requests in a point's second, may break the order).
    assert None not in legacy and legacy[-1] == max(legacy), orphans  # type: ignore[type-var]
    assert legacy[-1] > legacy[0], orphans  # type: ignore[operator]
    assert orphans["spawn-pin"] == [0.0, 0.0, 0.0, 0.0], orphans
    # Live: the points never overlapped, each run started after the one before had ended.
    runs = [p.run for p in sweep.points.select_related("run").order_by("seq")]
    for before, after in itertools.pairwise(runs):
        assert before is not None and after is not None
        assert before.finished_at is not None and after.started_at is not None
        assert after.started_at >= before.finished_at
    print(f"legacy vs spawn-pin on the mock: orphaned copies {orphans}")


_LOADS = [1, 2, 3, 4, 6, 8, 12, 16]
_SLO = {"ttft_ms": 400, "goodput_fraction": 0.9}


def test_slo_mode_finds_the_exhaustive_sweeps_answer_in_fewer_runs(
    live_world: World, wait_for: Any
) -> None:
    # On one simulated inference worker, in virtual time: the same load gives the same figures
    # in both sweeps, so the search must find exactly the exhaustive sweep's answer. (On a live
    # mock the host's own load moves TTFT by more than a step of the axis between the two.)
    world = live_world
    scenario = scenario_create(
        actor=world.owner,
        team=world.team,
        name="synthetic-16",
        spec={"duration_s": 120, "workload": {"synthetic": {"trees": 16}}},
        trace_ids=[],
    )
    common = {
        "scenario": str(scenario.uuid),
        "endpoint": "simulated",
        "overrides": {"target": {"workers": 1}},
    }
    fields = {"concurrency": _LOADS, "slo": _SLO}
    exhaustive_id = _launch(world, **common, sweep=fields)
    exhaustive = _final(exhaustive_id, wait_for, timeout_s=400)
    assert exhaustive.status == "succeeded", exhaustive.reason
    rows = sweep_report(exhaustive).aggregates
    verdicts = {row.load: row.verdict.meets for row in rows if row.verdict is not None}
    meeting = [load for load, meets in verdicts.items() if meets]
    assert meeting and len(meeting) < len(verdicts), verdicts  # the limit lies inside the axis

    search_id = _launch(world, **common, sweep={**fields, "mode": "slo"})
    searched = _final(search_id, wait_for, timeout_s=400)
    assert searched.status == "succeeded", searched.reason
    report = sweep_report(searched)
    search = report.searches["base"]
    assert search.done and search.highest_meeting == max(meeting), (search.statement, verdicts)
    assert search.runs == report.runs < len(_LOADS) == search.exhaustive_runs
    assert search.statement in searched.verdict_message
    print(
        f"slo on one simulated worker: exhaustive {len(_LOADS)} runs, highest meeting "
        f"c={max(meeting):g}; slo {search.runs} runs: {search.statement}"
    )
