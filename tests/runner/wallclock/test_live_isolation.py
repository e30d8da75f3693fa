"""Live and simulated agree on isolation: every replayed tree instance is its own user, even
for traces that carry literal messages (dag_jsonl), unless isolation is turned off."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner import ListSink, parse_spec, run
from runner.cluster import ClusterConfig
from runner.mockserver import MockServerConfig, start_mock_server

# One literal conversation: a long system prompt the instances would share without markers.
_SYSTEM = " ".join(f"rule{i}" for i in range(40))
_TRACE_LINES = [
    {
        "session_id": "agent",
        "turns": [
            {
                "messages": [
                    {"role": "system", "content": _SYSTEM},
                    {"role": "user", "content": "go"},
                ],
                "max_tokens": 4,
            },
            {"messages": [{"role": "user", "content": "more"}], "max_tokens": 4},
        ],
    }
]


@pytest.fixture(scope="module")
def one_worker_mock() -> Iterator[str]:
    # One worker, two-token blocks: any shared prefix shows up as cached tokens.
    config = MockServerConfig(cluster=ClusterConfig(workers=1, block_size_tokens=2, time_scale=0))
    with start_mock_server(config, process=True) as server:
        yield server.url


@pytest.fixture(scope="module")
def literal_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("traces") / "literal.dag.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in _TRACE_LINES))
    return path


def _first_requests(url: str, trace: Path, *, isolate: bool) -> list[dict]:
    spec = parse_spec(
        {
            "workload": {"traces": [str(trace)]},
            "concurrency": 2,
            "max_trees": 6,
            "isolate_trees": isolate,
            "target": {"kind": "endpoint", "url": url, "model": "mock-model"},
        }
    )
    sink = ListSink()
    assert run(spec, sink=sink).status == "succeeded"
    return [r for r in sink.record_list if r["depth"] == 0 and r["turn_index"] == 0]


def test_no_tree_instance_finds_another_instances_literal_prompt_in_cache(
    one_worker_mock, literal_trace
):
    firsts = _first_requests(one_worker_mock, literal_trace, isolate=True)
    assert len(firsts) == 6
    assert [r["cached_tokens"] for r in firsts] == [0] * 6


def test_without_isolation_later_instances_hit_the_first_ones_prefix(
    one_worker_mock, literal_trace
):
    firsts = _first_requests(one_worker_mock, literal_trace, isolate=False)
    assert len(firsts) == 6
    assert sum(1 for r in firsts if (r["cached_tokens"] or 0) > 0) >= 4
