"""Records reach the sink every RECORD_HANDOFF_S, not only with each snapshot: a worker killed
mid-run loses about a second of answers (what the driver and the sink held unstored), however
long the snapshot interval."""

from __future__ import annotations

import asyncio
from typing import Any

from runner.cluster import ClusterConfig
from runner.mockserver import MockServerConfig, start_mock_server
from runner.replay.scheduler import ReplayConfig
from runner.trace import SyntheticConfig, generate_synthetic
from runner.wallclock import LiveConfig, replay_live


class _Calls:
    """A sink that notes the order of its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def records(self, batch: list[Any]) -> None:
        self.calls.append(("records", len(batch)))

    def snapshot(self, snapshot: Any) -> None:
        self.calls.append(("snapshot", snapshot["requests"]))

    def log(self, level: str, message: str) -> None:
        pass


def test_records_are_handed_over_between_snapshots_and_a_snapshot_never_leads_them() -> None:
    trace = generate_synthetic(SyntheticConfig(seed=3, trees=6, main_turns=(4, 8)))
    sink = _Calls()
    with start_mock_server(
        MockServerConfig(cluster=ClusterConfig(workers=2, time_scale=0.01))
    ) as m:
        config = LiveConfig(
            endpoint=m.url,
            model="mock-model",
            # Two seconds of run, one snapshot every ten: only the final one falls inside.
            replay=ReplayConfig(concurrency=4, duration_s=2.0, speedup=50.0),
            snapshot_interval_s=10.0,
        )
        result = asyncio.run(replay_live([trace], config, sink=sink))  # type: ignore[arg-type]
    snapshots = [i for i, (kind, _n) in enumerate(sink.calls) if kind == "snapshot"]
    assert len(snapshots) == 1 and snapshots[0] == len(sink.calls) - 1
    handed = [n for kind, n in sink.calls if kind == "records"]
    # Before the snapshot: several hand-overs (every 0.25 s of a 2 s run), not one at its end.
    assert len(handed) >= 2, sink.calls
    assert sum(handed) == result.summary["requests"] + result.summary.get("warmup_requests", 0)
