"""Live replay over real sockets against the built-in mock cluster (docs/product.md §4.6–4.9)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from runner import ListSink, parse_spec, run
from runner.affinity.emitters import AffinityConfig, AffinityKind
from runner.cluster import ClusterConfig
from runner.mockserver import FaultConfig, MockServerConfig, start_mock_server
from runner.replay.engine import EngineConfig
from runner.replay.scheduler import ReplayConfig
from runner.routing.router import Policy
from runner.sim.simulator import SimConfig, simulate
from runner.trace import SyntheticConfig, Trace, generate_synthetic, load_trace
from runner.wallclock import LiveConfig, replay_live

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def mock() -> Iterator[str]:
    # Zero latency: routing and prefix caching are what these tests look at, and streaming
    # every token at scaled-down intervals would only cost CPU time on both sides.
    config = MockServerConfig(cluster=ClusterConfig(workers=8, time_scale=0.0))
    # Its own process: a server sharing the test's interpreter would share its GIL too.
    with start_mock_server(config, process=True) as server:
        yield server.url


def live(traces: list[Trace], url: str, **kw) -> dict:
    replay = kw.pop("replay")
    engine = kw.pop("engine", EngineConfig())
    config = LiveConfig(endpoint=url, model="mock-model", replay=replay, engine=engine, **kw)
    return asyncio.run(replay_live(traces, config)).summary


def small_synthetic() -> Trace:
    return generate_synthetic(
        SyntheticConfig(seed=3, trees=6, main_turns=(4, 8), subagent_turns=(2, 4))
    )


def test_live_replay_agrees_with_the_simulator_on_routing(mock):
    trace = small_synthetic()
    replay = ReplayConfig(concurrency=6, max_trees=6, speedup=200.0)
    live_summary = live([trace], mock, replay=replay)
    simulated = simulate(trace.trees, SimConfig(replay=replay)).summary
    for key in (
        "requests",
        "sessions",
        "trees_completed",
        "worker_switches",
        "sessions_multi_worker",
        "orphaned_session_copies",
    ):
        assert live_summary[key] == simulated[key], key
    assert live_summary["worker_switches"] == 0 and live_summary["errors"] == 0


@pytest.fixture(scope="module")
def agent_trace(claude_code_trace) -> Trace:
    return load_trace(claude_code_trace)


def agent_run(
    trace: Trace, url: str, *, scope: str = "conversation", policy: Policy = Policy.SPAWN_PIN
) -> dict:
    # Each lane replays one tree to its end from t* in 100-300 s, around the subagents' run
    # (spawned at 120-170 s, turn 2 at 185 s without them): the same requests every run,
    # whatever the timing.
    span_s = trace.trees[0].span_s
    return live(
        [trace],
        url,
        replay=ReplayConfig(
            concurrency=8,
            max_trees=8,
            start_window=(100.0 / span_s, 300.0 / span_s),
            speedup=5000.0,
            seed=2,
        ),
        engine=EngineConfig(
            policy=policy, affinity=AffinityConfig(kind=AffinityKind.DYNAMO_NVEXT, scope=scope)
        ),
    )


def test_lineage_reuses_more_prefix_than_conversation_against_round_robin(agent_trace):
    # 16 round-robin workers: a subagent's unbound first request rarely lands by luck on the
    # worker that holds its siblings' prefix.
    config = MockServerConfig(cluster=ClusterConfig(workers=16, time_scale=0.0))
    with start_mock_server(config, process=True) as server:
        conversation = agent_run(agent_trace, server.url, scope="conversation")
        httpx.post(f"{server.url}/admin/reset")
        lineage = agent_run(agent_trace, server.url, scope="lineage")
    assert lineage["requests"] == conversation["requests"]
    assert lineage["child_first_turn_hit_ratio"] > conversation["child_first_turn_hit_ratio"] + 0.3
    assert lineage["prefix_cache_hit_ratio"] > conversation["prefix_cache_hit_ratio"]
    assert lineage["early_closes"] == 0 and lineage["errors"] == 0 == conversation["errors"]


def test_legacy_bounces_subagents_whose_parent_is_gone_and_spawn_pin_does_not(agent_trace, mock):
    legacy = agent_run(agent_trace, mock, policy=Policy.LEGACY)
    fixed = agent_run(agent_trace, mock, policy=Policy.SPAWN_PIN)
    assert legacy["worker_switches"] > 0 and legacy["orphaned_session_copies"] > 0
    assert fixed["worker_switches"] == 0 and fixed["orphaned_session_copies"] == 0


def test_a_replay_with_injected_faults_completes_and_counts_what_the_server_injected():
    faults = FaultConfig(error_rate=0.05, disconnect_rate=0.03, seed=7)
    config = MockServerConfig(cluster=ClusterConfig(workers=4, time_scale=0.005), faults=faults)
    with start_mock_server(config) as server:
        summary = live(
            [small_synthetic()],
            server.url,
            replay=ReplayConfig(concurrency=8, max_requests=600, speedup=500.0),
        )
        stats = httpx.get(f"{server.url}/stats").json()["server"]
    injected = stats["faults_injected"]
    assert summary["requests"] == 600
    assert summary["errors_by_category"].get("http_5xx", 0) == injected["error"] > 0
    assert summary["errors_by_category"].get("stream_broken", 0) == injected["disconnect"] > 0
    assert summary["stopped_reason"] is None


# ---------------------------------------------------------------------- the command line


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runner", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_an_unreachable_endpoint_fails_fast_with_one_line():
    result = cli(
        "replay",
        "--endpoint",
        "http://127.0.0.1:9",
        "--model",
        "m",
        "--synthetic",
        "--requests",
        "5",
        "--quiet",
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "127.0.0.1:9" in result.stderr


def test_a_wrong_model_name_fails_fast_and_names_the_served_models(mock):
    result = cli(
        "replay", "--endpoint", mock, "--model", "nope", "--synthetic", "--requests", "5", "--quiet"
    )
    assert result.returncode == 2
    assert "mock-model" in result.stderr and "nope" in result.stderr


def test_a_run_where_everything_fails_stops_early_with_the_reason():
    config = MockServerConfig(
        cluster=ClusterConfig(workers=2, time_scale=0.0), faults=FaultConfig(error_rate=1.0)
    )
    with start_mock_server(config) as server:
        # Preflight would see the 500 too: the run must be the one to give up.
        summary = live(
            [small_synthetic()],
            server.url,
            failure_threshold=20,
            replay=ReplayConfig(concurrency=4, max_requests=5000, speedup=100.0),
        )
    assert summary["stopped_reason"].startswith("20 requests in a row failed")
    assert summary["requests"] < 200


def test_ctrl_c_stops_promptly_and_prints_the_partial_summary(mock, tmp_path):
    records = tmp_path / "records.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runner",
            "replay",
            "--endpoint",
            mock,
            "--model",
            "mock-model",
            "--synthetic",
            "--concurrency",
            "8",
            "--duration",
            "600",
            "--json",
            "--quiet",
            "--records",
            str(records),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + 30.0  # a slow machine may take a while to start
    while time.monotonic() < deadline and not (records.exists() and records.read_text()):
        time.sleep(0.1)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    started = time.monotonic()
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - started < 5.0
    assert proc.returncode == 130, err
    summary = json.loads(out)
    assert summary["stopped_reason"] == "cancelled" and summary["requests"] > 0
    assert len(records.read_text().splitlines()) == summary["requests"] + summary["warmup_requests"]


@pytest.mark.parametrize("suffix", [".json", ".csv"])
def test_the_summary_and_records_files_hold_the_run(mock, tmp_path, suffix):
    summary_path = tmp_path / f"summary{suffix}"
    records = tmp_path / "records.jsonl"
    result = cli(
        "replay",
        "--endpoint",
        mock,
        "--model",
        "mock-model",
        "--synthetic",
        "--synthetic-trees",
        "4",
        "--concurrency",
        "4",
        "--requests",
        "60",
        "--speedup",
        "100",
        "--quiet",
        "--json",
        "--summary",
        str(summary_path),
        "--records",
        str(records),
    )
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    assert len(lines) == printed["requests"] == 60
    assert {"session_id", "client_worker", "inference_worker", "ttft_ms"} <= set(lines[0])
    text = summary_path.read_text()
    if suffix == ".json":
        assert json.loads(text)["requests"] == 60
    else:
        rows = dict(line.split(",", 1) for line in text.splitlines()[1:])
        assert rows["requests"] == "60" and "ttft_ms.p99" in rows


def test_a_summary_file_with_an_unknown_suffix_is_refused_before_the_run():
    result = cli(
        "replay",
        "--endpoint",
        "http://127.0.0.1:9",
        "--model",
        "m",
        "--synthetic",
        "--requests",
        "5",
        "--summary",
        "out.txt",
    )
    assert result.returncode == 2 and ".json or .csv" in result.stderr


def test_the_snapshot_sink_streams_what_the_live_dashboard_shows(mock):
    sink = ListSink()
    spec = parse_spec(
        {
            "workload": {"synthetic": {"trees": 8}},
            "concurrency": 8,
            "duration_s": 2.0,
            "speedup": 50.0,
            "snapshot_interval_s": 0.2,
            "target": {"kind": "endpoint", "url": mock, "model": "mock-model"},
        }
    )
    result = run(spec, sink=sink)
    summary = result.summary
    snapshots = sink.snapshots
    assert result.status == "succeeded"
    assert len(snapshots) >= 5  # about one per interval, plus the final one
    last = snapshots[-1]
    workers = last["client_workers"]
    for key in workers:
        assert len(workers[key]) == 8, key
    assert {"binds", "closes", "early_closes", "keys_bound"} == set(last["affinity"])
    assert last["ttft_ms"]["p50"] is not None and last["recent"]
    assert last["requests"] == summary["requests"] > 0
    assert len(sink.record_list) == summary["requests"] + summary["warmup_requests"]
    assert sum(last["inference_workers"]["requests"]) == summary["requests"]
    assert [s["t_s"] for s in snapshots] == sorted(s["t_s"] for s in snapshots)
    assert 0 < snapshots[0]["progress"] <= last["progress"] == 1.0
    assert last["rss_bytes"] > 10_000_000


def test_binding_against_dynamo_12_fails_fast_and_names_the_option_to_use():
    config = MockServerConfig(
        cluster=ClusterConfig(workers=2, time_scale=0.0, dynamo_version="1.2")
    )
    with start_mock_server(config, process=True) as server:
        run = (
            "replay",
            "--endpoint",
            server.url,
            "--model",
            "mock-model",
            "--synthetic",
            "--requests",
            "20",
            "--affinity",
            "dynamo-nvext",
            "--quiet",
            "--json",
        )
        refused = cli(*run)
        opened = cli(*run, "--affinity-actions", "open")
    assert refused.returncode == 2 and "--affinity-actions open" in refused.stderr
    assert refused.stderr.count("\n") == 1
    assert opened.returncode == 0 and json.loads(opened.stdout)["errors"] == 0
