"""A stop that arrives before a run's driver starts (issue 13 item 4): while a big synthetic
workload is generated, or while the endpoint is checked, the run ends `cancelled` at once,
saying where it was, instead of finishing the generation or waiting out the preflight."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
from collections.abc import Iterator

import pytest

import runner
from runner import ListSink, RunSpec, parse_spec, run, run_async
from runner.ending import EndedBy

# ~300 default trees is the size cap's order of magnitude: seconds of generation; these tests
# stop within the first few trees.
TREES = 300


class _SetAfterChecks(threading.Event):
    """A stop that reads as set from its `checks`-th look on: deterministic "mid-way"."""

    def __init__(self, checks: int) -> None:
        super().__init__()
        self.left = checks

    def is_set(self) -> bool:
        self.left -= 1
        return self.left < 0 or super().is_set()


def _spec(target: dict[str, object]) -> RunSpec:
    return parse_spec(
        {
            "workload": {"synthetic": {"trees": TREES}},
            "concurrency": 4,
            "duration_s": 600,
            "target": target,
        }
    )


def _stopped_at_tree(sink: ListSink) -> int:
    lines = [m for _, m in sink.lines if "while generating the synthetic workload" in m]
    assert lines, sink.lines
    match = re.search(r"at tree ([\d,]+) of ([\d,]+)", lines[0])
    assert match and int(match[2].replace(",", "")) == TREES, lines[0]
    return int(match[1].replace(",", ""))


def test_a_stop_during_synthetic_generation_cancels_a_simulated_run_with_the_workload_unfinished():
    sink = ListSink()
    stop = _SetAfterChecks(200)  # one look per generated turn: a few trees in
    result = run(_spec({"kind": "simulated", "time_scale": 0.1}), sink=sink, stop=stop)
    assert result.status == "cancelled" and result.ended_by.by == EndedBy.CANCELLED
    assert result.ended_by.detail.startswith("cancelled while")
    assert 1 <= _stopped_at_tree(sink) < TREES
    assert result.summary["requests"] == 0 and not sink.snapshots and not sink.record_list


def test_a_stop_set_before_a_live_run_ends_it_during_generation_without_reaching_the_endpoint():
    # Nothing listens there: reaching the preflight would raise EndpointError.
    sink = ListSink()
    stop = threading.Event()
    stop.set()
    spec = _spec({"kind": "endpoint", "url": "http://127.0.0.1:9", "model": "m"})
    result = run(spec, sink=sink, stop=stop)
    assert result.status == "cancelled"
    assert _stopped_at_tree(sink) < TREES
    summary = result.summary
    assert set(runner.SUMMARY_KEYS) | set(runner.LATENCY_KEYS) <= set(summary)
    assert summary["requests"] == 0 and summary["ttft_ms"]["p50"] is None


@pytest.fixture
def silent_endpoint() -> Iterator[socket.socket]:
    """A server that accepts connections and never answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server


def test_a_stop_during_the_preflight_cancels_a_live_run_without_waiting_for_its_timeout(
    silent_endpoint: socket.socket,
):
    port = silent_endpoint.getsockname()[1]
    spec = _spec({"kind": "endpoint", "url": f"http://127.0.0.1:{port}", "model": "m"})
    traces = runner.load_workload(
        parse_spec({"workload": {"synthetic": {"trees": 2}}}).workload, seed=0
    )
    sink = ListSink()

    async def main() -> runner.RunResult:
        stop = asyncio.Event()
        running = asyncio.create_task(run_async(spec, traces=traces, sink=sink, stop=stop))
        loop = asyncio.get_running_loop()
        # The preflight has connected (and waits for an answer that never comes): stop now.
        peer, _ = await loop.run_in_executor(None, silent_endpoint.accept)
        stop.set()
        try:
            return await running
        finally:
            peer.close()

    result = asyncio.run(main())
    assert result.status == "cancelled"
    assert ("info", "cancelled while checking the endpoint") in sink.lines
