"""The engine against a real Dynamo 1.6.1 (KV router, 2 CPU mocker workers, header affinity
TTL 300 s), and our mock's model of it on the same workload (docs/product.md §4.5, §4.8).

Agent trees with SPAWN children replayed at 8 lanes: lineage (`X-Dynamo-Session-ID` = the root's
id on every request of a tree) keeps every tree on one worker and every child request on its
root's worker; conversation (own ids) splits trees; nvext affinity is refused at preflight with
the advice to use headers. The mock, run as Dynamo 1.6 on the same spec, must place trees the
same way under lineage and split them under conversation."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner import BadInput, ListSink, RecordDict, RunResult, SyntheticConfig, parse_spec, run
from runner.cluster import ClusterConfig
from runner.mockserver import MockServerConfig, start_mock_server
from tests.dynamo import cluster
from tests.dynamo.cluster import DynamoCluster
from tests.infra import unavailable

pytestmark = pytest.mark.dynamo

# Small trees with SPAWN groups on most main turns, short answers: a few seconds per run.
WORKLOAD = SyntheticConfig(
    seed=7,
    trees=8,
    main_turns=(3, 5),
    main_system_tokens=(1_500, 2_500),
    first_prompt_tokens=(100, 300),
    tool_result_median_tokens=200,
    output_tokens=(4, 12),
    output_median_tokens=8,
    think_time_median_s=0.2,
    max_think_time_s=0.5,
    spawn_probability=0.6,
    spawn_fanout=(2, 3),
    subagent_turns=(2, 3),
)


def replay(url: str, model: str, sink: ListSink | None = None, **knobs: Any) -> RunResult:
    spec = parse_spec(
        {
            "workload": {"synthetic": WORKLOAD.model_dump(mode="json")},
            "concurrency": 8,
            "max_trees": 8,
            "speedup": 20,
            "seed": 3,
            "target": {"kind": "endpoint", "url": url, "model": model},
            **knobs,
        }
    )
    return run(spec, sink=sink or ListSink())


def split_trees(records: list[RecordDict]) -> set[int]:
    """Tree ordinals (in order of first request) served by more than one worker."""
    workers: dict[str, set[int]] = defaultdict(set)
    order: dict[str, int] = {}
    for record in records:
        order.setdefault(record["root_id"], len(order))
        if record["inference_worker"] is not None:
            workers[record["root_id"]].add(record["inference_worker"])
    return {order[root] for root, seen in workers.items() if len(seen) > 1}


@pytest.fixture(scope="module")
def mock_16() -> Iterator[str]:
    config = MockServerConfig(
        cluster=ClusterConfig(
            workers=2, router="kv", time_scale=0.01, dynamo_version="1.6", header_affinity_ttl_s=300
        )
    )
    with start_mock_server(config) as server:
        yield server.url


class HeaderRuns:
    """The header-affinity replays on the real Dynamo, one per scope, each made the first time
    a test asks for it and read by every test after: each run is new to the server (prompts
    and session ids carry a per-run salt), so a run shared by four tests shows each of them
    what a run of its own would, at a third of the time (a replay is ~8 s on 2 cores)."""

    def __init__(self, dynamo: DynamoCluster) -> None:
        self.dynamo = dynamo
        self.done: dict[str, tuple[RunResult, ListSink]] = {}

    def __call__(self, scope: str) -> tuple[RunResult, ListSink]:
        if scope not in self.done:
            sink = ListSink()
            knobs = {"affinity": "dynamo-headers", "scope": scope}
            result = replay(self.dynamo.base_url, self.dynamo.model, sink, **knobs)
            self.done[scope] = (result, sink)
        return self.done[scope]


@pytest.fixture(scope="module")
def header_runs(real_dynamo: DynamoCluster) -> HeaderRuns:
    return HeaderRuns(real_dynamo)


def test_preflight_finds_the_header_generation_with_affinity_on(header_runs: HeaderRuns) -> None:
    result, _ = header_runs("lineage")
    assert result.status == "succeeded", result.ended_by


def test_nvext_affinity_stops_at_preflight_naming_dynamo_headers(
    real_dynamo: DynamoCluster,
) -> None:
    for actions in ("bind", "open"):
        with pytest.raises(BadInput) as refused:
            replay(
                real_dynamo.base_url,
                real_dynamo.model,
                affinity="dynamo-nvext",
                affinity_actions=actions,
                scope="lineage",
            )
        message = str(refused.value)
        assert "--affinity dynamo-headers" in message
        assert "unknown field `session_control`" in message  # the server's own words
        assert "expected one of" in message and "`router`" in message  # whole, not cut


def test_lineage_keeps_trees_whole_and_children_on_the_roots_worker(
    header_runs: HeaderRuns,
) -> None:
    lineage = header_runs("lineage")[0].summary
    conversation = header_runs("conversation")[0].summary
    placed = lineage["placement"]
    assert placed is not None and placed["trees"] == 8
    assert placed["trees_split"] == 0
    assert placed["child_requests"] > 0
    assert placed["child_requests_on_root_worker"] == placed["child_requests"]
    assert placed["key_misses"] == 0
    assert lineage["errors"] == 0 and lineage["early_closes"] == 0
    # Dynamo names workers by 64-bit instance ids: records use small indices, mapped here.
    assert len(lineage["inference_worker_ids"]) == 2
    split = conversation["placement"]
    assert split is not None and split["trees_split"] > 0
    assert split["child_requests_on_root_worker"] < split["child_requests"]
    # Dynamo's KV router follows cached prefixes with or without affinity, so on this small
    # workload the two can tie; lineage never loses more than a block's worth of noise.
    assert lineage["prefix_cache_hit_ratio"] >= conversation["prefix_cache_hit_ratio"] - 0.001


def test_the_run_scrapes_the_frontends_metrics(header_runs: HeaderRuns) -> None:
    summary = header_runs("lineage")[0].summary
    metrics = summary["server_metrics"]
    assert metrics.get("available") is not False, metrics
    assert json.dumps(metrics) != "{}"


def test_header_affinity_off_stops_a_header_run_with_the_flag_to_set(tmp_path: Path) -> None:
    if cluster.not_installed() is not None:
        unavailable("real Dynamo not installed: run scripts/dynamo-cpu.sh install")
    off = cluster.start(tmp_path / "no-ttl", affinity_ttl=None)
    try:
        with pytest.raises(BadInput, match="--router-session-affinity-ttl-secs"):
            replay(off.base_url, off.model, affinity="dynamo-headers", scope="lineage")
    finally:
        off.stop()


def test_the_mock_places_trees_as_the_real_dynamo_does(
    header_runs: HeaderRuns, mock_16: str
) -> None:
    """Same workload, seed, lanes and mode on both (each run is new to the server: prompts and
    session ids carry a per-run salt). Lineage: all 8 trees whole and every child request on
    its root's worker, on both. Conversation: both split trees and put children elsewhere."""
    for scope in ("lineage", "conversation"):
        real, real_sink = header_runs(scope)
        mock_sink = ListSink()
        mock = replay(mock_16, "mock-model", mock_sink, affinity="dynamo-headers", scope=scope)
        real_split = split_trees(real_sink.record_list)
        mock_split = split_trees(mock_sink.record_list)
        placements = [result.summary["placement"] for result in (real, mock)]
        assert all(
            p is not None and p["trees"] == 8 and p["child_requests"] > 0 for p in placements
        )
        if scope == "lineage":
            assert real_split == mock_split == set()
            assert all(
                p["child_requests_on_root_worker"] == p["child_requests"] for p in placements
            )
        else:
            assert real_split and mock_split
            assert all(p["child_requests_on_root_worker"] < p["child_requests"] for p in placements)
