"""A live run ends at its duration: idle gaps are not waited out, stalled answers get a grace."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner import ListSink, parse_spec, run
from runner.cluster import ClusterConfig
from runner.mockserver import FaultConfig, MockServerConfig, start_mock_server
from runner.replay.scheduler import ReplayConfig
from runner.trace import SyntheticConfig, generate_synthetic
from runner.wallclock import LiveConfig, replay_live
from runner.wallclock.replay import DRAIN_GRACE_S


@pytest.fixture(scope="module")
def mock() -> Iterator[str]:
    config = MockServerConfig(cluster=ClusterConfig(workers=4, time_scale=0.0))
    with start_mock_server(config, process=True) as server:
        yield server.url


def _spec(url: str, **knobs: object) -> object:
    data: dict[str, object] = {
        "concurrency": 8,
        "snapshot_interval_s": 0.5,
        "target": {"kind": "endpoint", "url": url, "model": "mock-model"},
    }
    data.update(knobs)
    return parse_spec(data)


@pytest.mark.parametrize("seed", [0, 7])
def test_a_claude_code_replay_with_idle_gaps_ends_at_its_duration(
    mock: str, claude_code_trace: Path, seed: int
) -> None:
    # The trace's sessions pause for minutes between turns: before the fix the run sat at
    # 100 % with nothing in flight until the next far credit came due.
    spec = _spec(
        mock,
        workload={"traces": [str(claude_code_trace)]},
        concurrency=16,
        duration_s=3.0,
        speedup=50.0,
        start_window=[0, 0.02],
        seed=seed,
    )
    started = time.perf_counter()
    result = run(spec)  # type: ignore[arg-type]
    wall_s = time.perf_counter() - started
    assert result.status == "succeeded" and result.summary["requests"] > 0
    assert result.summary["elapsed_s"] < 3.0 + 0.5
    assert wall_s < 3.0 + 5.0  # preflight, probe and process start included


def test_answers_still_stalled_at_the_duration_are_cancelled_after_the_grace() -> None:
    # Every answer stalls for a minute mid-stream. Driven below the run call: its preflight
    # would (rightly) refuse such an endpoint.
    faults = FaultConfig(stall_rate=1.0, stall_s=60.0)
    config = MockServerConfig(cluster=ClusterConfig(workers=2, time_scale=0.0), faults=faults)
    with start_mock_server(config, process=True) as server:
        sink = ListSink()
        live = LiveConfig(
            endpoint=server.url,
            model="mock-model",
            replay=ReplayConfig(concurrency=4, duration_s=1.0, speedup=100.0),
            snapshot_interval_s=0.5,
        )
        started = time.perf_counter()
        result = asyncio.run(
            replay_live([generate_synthetic(SyntheticConfig(trees=4))], live, sink=sink)
        )
        wall_s = time.perf_counter() - started
    summary = result.summary
    assert 1.0 + DRAIN_GRACE_S - 0.1 < summary["elapsed_s"] < 1.0 + DRAIN_GRACE_S + 1.0
    assert wall_s < 1.0 + DRAIN_GRACE_S + 2.0
    # Cut by the stop, counted apart: the run was clean (issue 16).
    assert summary["cut_by_stop"] >= 1 and summary["requests"] >= summary["cut_by_stop"]
    assert summary["errors"] == 0 and "cancelled" not in summary["errors_by_category"]
    assert summary["goodput"]["good_requests"] == 0 and summary["goodput"]["good_ratio"] is None
    final = sink.snapshots[-1]
    assert final["in_flight"] == 0
    assert final["cut_by_stop"] == summary["cut_by_stop"] and final["errors"] == 0
