"""Why a run ended is the engine's typed answer (`RunResult.ended_by`, runner.ending), set
where the run ends: each reason here from a real run, its status from the one table. The
error-share stop is tests/runner/test_presets.py's, the stalled simulated clock
tests/runner/sim/test_simulator_stops.py's, every client worker lost
tests/runner/fleet/test_fleet.py's, a cancel before the drivers start
tests/runner/test_cancel_before_start.py's."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from runner import EndedBy, Ending, parse_spec, run
from runner.cluster import ClusterConfig
from runner.mockserver import FaultConfig, MockServerConfig, start_mock_server
from runner.replay.scheduler import ReplayConfig
from runner.sim.simulator import SimConfig, simulate
from runner.trace import SyntheticConfig, generate_synthetic
from runner.wallclock import LiveConfig, replay_live

_SIMULATED = {
    "target": {"kind": "simulated", "workers": 2},
    "workload": {"synthetic": {"trees": 4}},
}


def _simulated(**spec: Any) -> Any:
    return run(parse_spec({**_SIMULATED, **spec}))


def test_every_reason_has_a_status() -> None:
    expected = {
        EndedBy.COMPLETED: "succeeded",
        EndedBy.DURATION: "succeeded",
        EndedBy.MAX_REQUESTS: "succeeded",
        EndedBy.MAX_TREES: "succeeded",
        EndedBy.CANCELLED: "cancelled",
        EndedBy.FAILURES_IN_A_ROW: "failed",
        EndedBy.ERROR_SHARE: "failed",
        EndedBy.WORKERS_LOST: "failed",
        EndedBy.CLOCK_STALLED: "failed",
    }
    assert set(expected) == set(EndedBy)
    for by, status in expected.items():
        ending = Ending(by, "why")
        assert ending.status == status
        assert ending.stopped_reason == (None if status == "succeeded" else "why")


@pytest.mark.parametrize(
    ("spec", "by", "detail"),
    [
        ({"duration_s": 30}, EndedBy.DURATION, "its duration (30 s) was reached"),
        (
            {"duration_s": 3600, "max_requests": 20},
            EndedBy.MAX_REQUESTS,
            "its request count (20) was reached",
        ),
        ({"duration_s": 3600, "max_trees": 3}, EndedBy.MAX_TREES, "its tree count (3) was reached"),
        (
            {"duration_s": 60, "timing": "rate", "rate_per_s": 0.5},
            EndedBy.DURATION,
            "its duration (60 s) was reached",
        ),
    ],
)
def test_a_run_that_reaches_its_own_limit_succeeds_and_says_which(
    spec: dict[str, Any], by: EndedBy, detail: str
) -> None:
    result = _simulated(**spec)
    assert result.ended_by == Ending(by, detail)
    assert result.status == "succeeded" and not result.ended_by.early
    assert result.summary["status"] == "succeeded" and result.summary["stopped_reason"] is None
    assert result.summary["ended_by"] == {"by": by.value, "detail": detail, "early": False}
    if by is EndedBy.MAX_REQUESTS:
        assert result.summary["requests"] == 20


def test_a_workload_that_runs_out_before_the_duration_succeeds_early_and_says_when() -> None:
    # Schedule timing starts each tree once: four trees end long before ten hours.
    result = _simulated(timing="schedule", duration_s=36000)
    ended = result.ended_by
    assert (ended.by, ended.status, ended.early) == (EndedBy.COMPLETED, "succeeded", True)
    elapsed = dict(result.summary)["elapsed_s"]
    assert elapsed < 36000
    assert ended.detail == (
        f"the workload ran out at {elapsed:.1f} s, {result.summary['requests']} requests and "
        "4 trees in, before its duration (36000 s)"
    )


def test_a_workload_with_no_limit_runs_to_its_end() -> None:
    trees = generate_synthetic(SyntheticConfig(seed=1, trees=3)).trees
    result = simulate(trees, SimConfig(replay=ReplayConfig(timing="schedule")))
    assert result.ended_by == Ending(EndedBy.COMPLETED, "the workload ran to its end")
    assert result.summary["trees_completed"] == 3


def test_a_stop_mid_run_is_cancelled() -> None:
    stop = threading.Event()

    class StopAtFirstSnapshot:
        def log(self, level: str, message: str) -> None:
            pass

        def records(self, batch: Any) -> None:
            pass

        def snapshot(self, snapshot: Any) -> None:
            stop.set()

    spec = parse_spec({**_SIMULATED, "duration_s": 3600, "snapshot_interval_s": 1})
    result = run(spec, sink=StopAtFirstSnapshot(), stop=stop)
    assert result.ended_by == Ending(EndedBy.CANCELLED, "cancelled")
    assert result.status == "cancelled" and result.summary["stopped_reason"] == "cancelled"
    assert 0 < dict(result.summary)["elapsed_s"] < 3600


def test_failures_in_a_row_fail_the_run_with_the_last_error() -> None:
    config = MockServerConfig(
        cluster=ClusterConfig(workers=2, time_scale=0.0), faults=FaultConfig(error_rate=1.0)
    )
    trace = generate_synthetic(SyntheticConfig(seed=3, trees=4, main_turns=(4, 8)))
    with start_mock_server(config) as server:
        live = LiveConfig(
            endpoint=server.url,
            model="mock-model",
            replay=ReplayConfig(concurrency=4, max_requests=5000, speedup=100.0),
            failure_threshold=10,
        )
        result = asyncio.run(replay_live([trace], live))
    ended = result.ended_by
    assert (ended.by, ended.status) == (EndedBy.FAILURES_IN_A_ROW, "failed")
    assert ended.detail.startswith("10 requests in a row failed (last: http_5xx")
    assert result.summary["stopped_reason"] == ended.detail


def test_the_early_end_counts_one_tree_in_the_singular() -> None:
    trees = generate_synthetic(SyntheticConfig(seed=1, trees=1)).trees
    result = simulate(trees, SimConfig(replay=ReplayConfig(timing="schedule", duration_s=36000)))
    assert result.ended_by.early and " requests and 1 tree in, " in result.ended_by.detail
