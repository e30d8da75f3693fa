"""The mock and the simulated cluster against a real prefix cache (issue 22 item 3).

The real vLLM serves the tiny model with the `words` tokenizer (one token per word of the
project's synthesized prompts, a chat template that adds nothing), so its prompt tokens are
the mock's and the trace's. The mock and the simulated cluster are configured as that one vLLM
worker: 128-token blocks (vLLM's CPU default) and 16,384 of them (the 2 GiB KV cache). The
same trace, seed, lanes and timing then go to all three.

Where requests of a tree never overlap (one subagent at a time, every join strict), the three
agree on every request's prompt and cached tokens. Where siblings are spawned together they
differ, on those siblings' first turns only: vLLM schedules a request that arrives during an
engine step at the next step, after the step has cached the first sibling's prefix, so later
siblings hit it; the mock and the simulator admit simultaneous siblings at once and count a
block as cached only once a prefill finished. Measured here (8 trees, 4 lanes, 206 requests,
spawn groups of 2-3 and background forks): 196 requests equal, the 10 others later siblings
with 4-5 blocks (their shared subagent prefix) cached on vLLM and none on the mock; hit ratios
0.723 real, 0.696 mock, 0.695 simulated. That case is timing (two shared cores), so it is
stated here, not asserted."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest

from runner import ListSink, RecordDict, RunResult, SyntheticConfig, Trace, parse_spec, run
from runner.cluster import ClusterConfig
from runner.mockserver import MockServerConfig, start_mock_server
from runner.trace import generate_synthetic
from tests.vllm.server import VllmServers

pytestmark = pytest.mark.vllm

BLOCK = 128  # vLLM's CPU default block size, in tokens
CACHE_BLOCKS = 16_384  # VLLM_CPU_KVCACHE_SPACE=2 GiB of this model: 2,097,152 tokens

# Agent trees whose requests never overlap: one subagent per spawn, the parent waiting for it.
# One lane per tree: each lane replays its own tree once, whatever the servers' speeds (with
# fewer lanes a fast lane would start a tree again before a slow one took its second).
SEQUENTIAL = SyntheticConfig(
    seed=21,
    trees=8,
    main_turns=(3, 6),
    main_system_tokens=(600, 1_000),
    first_prompt_tokens=(30, 80),
    tool_result_median_tokens=150,
    max_context_tokens=3_000,
    compacted_tokens=500,
    output_tokens=(4, 32),
    output_median_tokens=12,
    think_time_median_s=0.2,
    max_think_time_s=0.5,
    spawn_probability=0.5,
    spawn_fanout=(1, 1),
    join_strict_probability=1.0,
    subagent_turns=(2, 3),
    subagent_prefix_tokens=(500, 700),
    subagent_task_tokens=(20, 60),
    subagent_tool_result_median_tokens=150,
    subagent_think_time_median_s=0.2,
    fork_probability=0.0,
)


def unique(trace: Trace) -> Trace:
    """The trace under a hash scope of its own: its text is new to a server that has seen other
    runs (tree markers are one unknown token to the words tokenizer, so they do not keep runs
    apart there as they do on a real tokenizer)."""
    return dataclasses.replace(trace, meta={**trace.meta, "hash_scope": uuid.uuid4().hex})


def replay(
    trace: Trace, target: dict[str, Any]
) -> tuple[RunResult, dict[tuple[str, int], RecordDict]]:
    spec = parse_spec(
        {
            "concurrency": SEQUENTIAL.trees,
            "max_trees": SEQUENTIAL.trees,
            "speedup": 5,
            "seed": 3,
            "joins": "strict",
            "target": target,
        }
    )
    sink = ListSink()
    result = run(spec, traces=[trace], sink=sink)
    # Tree instances are numbered in start order; the template's session id names a request.
    by_request = {(r["session_id"].split(":", 1)[1], r["turn_index"]): r for r in sink.record_list}
    assert len(by_request) == len(sink.record_list)
    return result, by_request


def test_one_request_at_a_time_per_tree_the_mock_and_the_simulator_match_vllm(
    words_vllm: VllmServers,
) -> None:
    trace = unique(generate_synthetic(SEQUENTIAL))
    real, real_records = replay(
        trace, {"kind": "endpoint", "url": words_vllm.base_url, "model": words_vllm.model}
    )
    cluster = ClusterConfig(workers=1, block_size_tokens=BLOCK, capacity_blocks=CACHE_BLOCKS)
    with start_mock_server(MockServerConfig(cluster=cluster), process=True) as mock_server:
        mock, mock_records = replay(
            trace, {"kind": "endpoint", "url": mock_server.url, "model": "mock-model"}
        )
    simulated, sim_records = replay(
        trace,
        {"kind": "simulated", "workers": 1, "block_size": BLOCK, "cache_blocks": CACHE_BLOCKS},
    )
    requests = sum(tree.requests for tree in trace.trees)
    for result in (real, mock, simulated):
        assert result.status == "succeeded" and result.summary["errors"] == 0
        assert result.summary["requests"] == requests
    assert real_records.keys() == mock_records.keys() == sim_records.keys()
    hits = 0
    for key, record in real_records.items():
        for other in (mock_records[key], sim_records[key]):
            assert record["prompt_tokens"] == other["prompt_tokens"], key
            assert record["cached_tokens"] == other["cached_tokens"], key
        hits += bool(record["cached_tokens"])
    assert hits > requests // 2  # most requests extend a cached prefix: this compared hits
    ratio = real.summary["prefix_cache_hit_ratio"]
    assert (
        ratio
        == mock.summary["prefix_cache_hit_ratio"]
        == simulated.summary["prefix_cache_hit_ratio"]
    )
    assert abs(real.summary["server_metrics"]["figures"]["prefix_hit_ratio"]["last"] - ratio) < 1e-4
