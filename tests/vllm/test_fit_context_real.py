"""The Claude Code fixture on the tiny model's 4,096-token context: refused as recorded (its
prompts reach 7,109 words, about 25,000 of the model's tokens), replayed whole with
`fit_context`, which reads max_model_len from /v1/models, measures the server's tokens per
word and shrinks every length by one factor, blocks included."""

from __future__ import annotations

import pytest

from runner import ListSink, parse_spec, run
from tests.fixtures import CLAUDE_CODE_SUBAGENTS
from tests.vllm.server import VllmServers

pytestmark = pytest.mark.vllm


def fixture_spec(vllm: VllmServers, **knobs: object) -> dict[str, object]:
    return {
        "workload": {"traces": [str(CLAUDE_CODE_SUBAGENTS)]},
        "concurrency": 2,
        "speedup": 1000,
        "target": {"kind": "endpoint", "url": vllm.base_url, "model": vllm.model},
        **knobs,
    }


def test_as_recorded_the_fixture_does_not_fit(real_vllm: VllmServers) -> None:
    spec = parse_spec(fixture_spec(real_vllm, max_requests=1))
    result = run(spec.with_overrides({"target": {"failure_threshold": 1}}))
    assert result.status == "failed"
    assert "maximum context length is 4096 tokens" in result.ended_by.detail


def test_fit_context_replays_the_whole_fixture_without_an_error(real_vllm: VllmServers) -> None:
    """Two instances of the tree (122 requests, three Explore subagents each): every request
    answered, none over the window, the prefix structure intact (the server's own counters
    see the same hit ratio as the client)."""
    sink = ListSink()
    result = run(parse_spec(fixture_spec(real_vllm, max_trees=2, fit_context=True)), sink=sink)
    summary = result.summary
    assert result.status == "succeeded", result.ended_by
    assert summary["errors"] == 0 and summary["trees_completed"] == 2
    assert summary["requests"] == 122 == len(sink.record_list)
    assert 0.1 < summary["length_scale"] < 0.2
    fitted = [m for level, m in sink.lines if m.startswith("fit_context: lengths x")]
    assert fitted and "in the endpoint's 4096 tokens" in fitted[0]
    used = max(r["prompt_tokens"] + r["output_tokens"] for r in sink.record_list)
    assert 0.6 * real_vllm.max_model_len < used <= real_vllm.max_model_len
    # The main chain's turns still extend each other, the subagents share their prefix.
    assert summary["prefix_cache_hit_ratio"] > 0.7
    server = summary["server_metrics"]["figures"]["prefix_hit_ratio"]["last"]
    assert abs(summary["prefix_cache_hit_ratio"] - server) < 0.0001
