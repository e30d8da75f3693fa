"""The command line's stable surface (docs/product.md §6): subcommands, summary keys, exit codes."""

from __future__ import annotations

import json

import pytest

from runner.cli import main

SUMMARY_KEYS = {
    "requests",
    "sessions",
    "trees",
    "trees_completed",
    "sessions_multi_worker",
    "worker_switches",
    "orphaned_session_copies",
    "peak_session_copies",
    "context_rebuilds",
    "prefix_cache_hit_ratio",
    "affinity_binds",
    "affinity_closes",
    "early_closes",
    "errors",
    "ttft_ms",
    "itl_ms",
    "latency_ms",
}


def test_help_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for command in ("simulate", "replay", "mock-server", "inspect", "bench", "demo", "service"):
        assert command in out


def test_simulate_json_prints_one_object_with_the_stable_keys(capsys):
    code = main(
        [
            "simulate",
            "--synthetic",
            "--synthetic-trees",
            "4",
            "--concurrency",
            "4",
            "--duration",
            "120",
            "--json",
        ]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert set(summary) >= SUMMARY_KEYS
    for name in ("ttft_ms", "itl_ms", "latency_ms"):
        assert {"p50", "p90", "p99"} <= set(summary[name])
    assert summary["requests"] > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["simulate", "--start-window", "0.9:0.1"], "--start-window: 0.9:0.1 is not LO:HI"),
        (["simulate", "--start-window", "half"], "LO:HI"),
        (["simulate", "--client-workers", "0"], "--client-workers: "),
        (["simulate", "--trace", "/nonexistent/trace.jsonl"], "/nonexistent/trace.jsonl"),
        (["simulate", "--server-router", "magic"], "invalid choice"),
        (["replay", "--endpoint", "http://127.0.0.1:9", "--model", "m"], "needs a stop"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_no_traceback(args, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        raise SystemExit(main(args))
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_malformed_trace_names_the_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"session_id": "a", "turns": [{"messages": [{"role": "user"\n')
    assert main(["simulate", "--trace", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and ":1" in err


def test_the_trace_size_limit_is_named_and_can_be_raised(tmp_path, capsys):
    path = tmp_path / "big.jsonl"
    row = {"timestamp": 0, "input_length": 100, "output_length": 10, "hash_ids": [1, 2]}
    path.write_text((json.dumps(row) + "\n") * 2000)  # about 160 KB
    assert main(["inspect", str(path), "--max-trace-mb", "0.1", "--json"]) == 2
    err = capsys.readouterr().err
    assert "over the 104,857 bytes limit" in err and err.count("\n") == 1
    assert main(["inspect", str(path), "--max-trace-mb", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["requests"] == 2000
    assert main(["simulate", "--trace", str(path), "--max-trace-mb", "0.1", "--duration", "1"]) == 2
