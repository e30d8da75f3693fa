"""`length_scale` and `fit_context` in a run (runner/run.py): a live replay against the mock
sends the scaled lengths, a simulated one shrinks too, fit_context refuses an endpoint that
does not say its window and a simulated target. The fit itself on a real 4,096-token window
is tests/vllm/test_fit_context_real.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runner import BadInput, ListSink, SpecError, parse_spec, run
from runner.cluster import ClusterConfig
from runner.mockserver import MockServerConfig, start_mock_server
from runner.trace import load_trace
from runner.trace.scale import scale_trace
from tests.fixtures import CLAUDE_CODE_SUBAGENTS


@pytest.fixture(scope="module")
def mock() -> Iterator[str]:
    config = MockServerConfig(cluster=ClusterConfig(workers=2, time_scale=0.0))
    with start_mock_server(config, process=True) as server:
        yield server.url


def spec(target: dict[str, object], **knobs: object) -> dict[str, object]:
    return {
        "workload": {"traces": [str(CLAUDE_CODE_SUBAGENTS)]},
        "concurrency": 1,
        "max_requests": 12,
        "speedup": 1000,
        "target": target,
        **knobs,
    }


def test_a_live_run_sends_the_scaled_lengths(mock: str) -> None:
    """The mock counts a prompt's words as its tokens: each request's usage is the scaled
    trace's own count, and the answers are the scaled output lengths."""
    endpoint = {"kind": "endpoint", "url": mock, "model": "mock-model"}
    sink = ListSink()
    result = run(parse_spec(spec(endpoint, length_scale=0.25)), sink=sink)
    assert result.status == "succeeded" and result.summary["errors"] == 0
    assert result.summary["length_scale"] == 0.25
    scaled = scale_trace(load_trace(CLAUDE_CODE_SUBAGENTS), 0.25).trees[0]
    lengths = {
        (session.id, turn.index): (turn.input_tokens, turn.output_tokens)
        for session in scaled.sessions.values()
        for turn in session.turns
    }
    assert len(sink.record_list) == 12
    for record in sink.record_list:
        key = (record["session_id"].split(":", 1)[1], record["turn_index"])
        assert (record["prompt_tokens"], record["output_tokens"]) == lengths[key]


def test_a_simulated_run_shrinks_the_same_way() -> None:
    target = {"kind": "simulated", "workers": 2, "time_scale": 0}
    full = run(parse_spec(spec(target))).summary
    quarter = run(parse_spec(spec(target, length_scale=0.25))).summary
    assert quarter["length_scale"] == 0.25 and "length_scale" not in full
    assert quarter["requests"] == full["requests"] == 12
    assert quarter["input_tokens_per_s"] < full["input_tokens_per_s"]


def test_fit_context_refuses_an_endpoint_that_does_not_say_its_window(mock: str) -> None:
    endpoint = {"kind": "endpoint", "url": mock, "model": "mock-model"}
    with pytest.raises(BadInput) as refused:
        run(parse_spec(spec(endpoint, fit_context=True)))
    message = str(refused.value)
    assert f"{mock}/v1/models does not give a max_model_len for model 'mock-model'" in message
    assert "give length_scale as a factor instead" in message


def test_fit_context_needs_a_live_endpoint_and_length_scale_a_shrinking_factor() -> None:
    with pytest.raises(SpecError, match="a simulated run has none"):
        parse_spec({"fit_context": True})
    for factor in (0, 1.5):
        with pytest.raises(SpecError, match="length_scale"):
            parse_spec({"length_scale": factor})
