"""`python -m runner sweep`: a real simulated sweep through the CLI, its bad input, and a live
sweep against the built-in mock server over real sockets."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner import EndpointTarget
from runner.cli import main
from tests.fixtures import CLAUDE_CODE_SUBAGENTS

ROOT = Path(__file__).resolve().parents[3]


def test_a_simulated_sweep_prints_points_as_they_finish_and_writes_json_and_csv(tmp_path, capsys):
    report_path, csv_path = tmp_path / "sweep.json", tmp_path / "sweep.csv"
    code = main(
        [
            "sweep",
            "--simulate",
            "--synthetic-trees",
            "4",
            "--concurrencies",
            "1..2",
            "--duration",
            "120",
            "--arm",
            "legacy:policy=legacy",
            "--arm",
            "spawn-pin",
            "--repeats",
            "2",
            "--slo-ttft-ms",
            "2000",
            "--goodput-fraction",
            "0.5",
            "--json",
            str(report_path),
            "--csv",
            str(csv_path),
            "--quiet",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert re.search(r"^\[1\] (legacy|spawn-pin) c=1 #\d \(list, ", out, re.M)
    assert "sweep completed: 8 runs in " in out
    assert "frontier legacy: c=" in out and "headline: " in out
    report = json.loads(report_path.read_text("utf-8"))
    assert report["status"] == "completed" and len(report["points"]) == 8
    assert report["sweep"]["arms"][0] == {"name": "legacy", "overrides": {"policy": "legacy"}}
    assert report["sweep"]["slo"]["goodput_fraction"] == 0.5
    with csv_path.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["arm"], r["label"], r["repeats"]) for r in rows] == [
        ("legacy", "c=1", "2"),
        ("legacy", "c=2", "2"),
        ("spawn-pin", "c=1", "2"),
        ("spawn-pin", "c=2", "2"),
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--concurrencies", "1,2"], "give --endpoint URL (a live sweep) or --simulate"),
        (
            ["--simulate", "--endpoint", "http://127.0.0.1:9", "--concurrencies", "1"],
            "one of the two",
        ),
        (["--simulate", "--concurrencies", "1,x"], "is not a list of loads"),
        (["--simulate", "--concurrencies", "1,2", "--concurrency", "4"], "leave out --concurrency"),
        (["--simulate", "--rates", "1,2", "--timing", "closed"], "leave out --timing closed"),
        (["--simulate", "--concurrencies", "1", "--arm", "x:policy"], "--arm 'x:policy': write"),
        (
            ["--simulate", "--concurrencies", "1,4", "--arm", "x:policy=magic"],
            "arm 'x' at c=1: policy: Input should be",
        ),
        (["--simulate", "--concurrencies", "1", "--mode", "slo"], "mode slo needs slo"),
        (["--simulate", "--concurrencies", "1", "--repeats", "0"], "--repeats: Input should be"),
        (["--simulate", "--concurrencies", "1", "--goodput-fraction", "0.9"], "need an --slo-"),
        (["--endpoint", "http://127.0.0.1:9", "--concurrencies", "1"], "needs --model NAME"),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_flag(args, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        raise SystemExit(main(["sweep", *args]))
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.fixture(scope="module")
def mock_url() -> Iterator[str]:
    """`python -m runner mock-server` as its own process, answering at once."""
    options = ["--port", "0", "--workers", "4", "--time-scale", "0"]
    child = subprocess.Popen(
        [sys.executable, "-m", "runner", "mock-server", *options],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert match, line
        yield match.group(0)
    finally:
        child.send_signal(signal.SIGINT)
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def test_a_live_legacy_vs_spawn_pin_sweep_runs_point_after_point_against_the_mock(
    mock_url, tmp_path, capsys
):
    # Each lane replays its first tree from 100-300 s into the recorded session, where the
    # three SPAWN subagents run (tests/fixtures/README.md): more lanes, more subagents whose
    # parent's entry legacy routing has lost.
    span_s = 10395.28
    report_path = tmp_path / "live.json"
    code = main(
        [
            "sweep",
            "--endpoint",
            mock_url,
            "--model",
            "mock-model",
            "--trace",
            str(CLAUDE_CODE_SUBAGENTS),
            "--speedup",
            "20000",
            "--start-window",
            f"{100 / span_s}:{300 / span_s}",
            "--duration",
            "1",
            "--concurrencies",
            "2,4,8,16",
            "--arm",
            "legacy:policy=legacy",
            "--arm",
            "spawn-pin:policy=spawn-pin",
            "--json",
            str(report_path),
        ]
    )
    assert code == 0
    report = json.loads(report_path.read_text("utf-8"))
    points = report["points"]
    assert [(p["point"]["arm"], p["point"]["load"]) for p in points] == [
        (arm, load) for load in (2, 4, 8, 16) for arm in ("legacy", "spawn-pin")
    ]
    assert all(p["valid"] for p in points)
    # One after another: the points' own times add up to no more than the sweep's.
    assert sum(p["wall_s"] for p in points) <= report["wall_s"]
    orphans: dict[str, list[float]] = {"legacy": [], "spawn-pin": []}
    for row in report["aggregates"]:
        orphans[row["arm"]].append(row["figures"]["orphaned_session_copies"]["mean"])
    legacy = orphans["legacy"]
    assert legacy == sorted(legacy) and legacy[-1] > legacy[0]
    assert orphans["spawn-pin"] == [0, 0, 0, 0]
    err = capsys.readouterr().err
    # The mock shows its running and queued requests: the sweep drains by them, no cool-down.
    assert "cooling down" not in err
    assert "[legacy c=16 #1] preflight passed" in err


def test_between_points_a_server_without_metrics_gets_the_cool_down(mock_url):
    from runner.sweep import wait_until_drained

    lines: list[str] = []
    stop = threading.Event()
    target = EndpointTarget(url=mock_url, model="mock-model", metrics_url="off")
    wait_until_drained(
        target, timeout_s=5, cooldown_s=0.2, stop=stop, log=lambda _, m: lines.append(m)
    )
    assert lines == ["no running/queued figures (no metrics URL): cooling down 0.2 s"]
    lines.clear()
    idle = EndpointTarget(url=mock_url, model="mock-model")
    wait_until_drained(
        idle, timeout_s=5, cooldown_s=0.2, stop=stop, log=lambda _, m: lines.append(m)
    )
    assert lines == []  # drained at once: nothing running, nothing queued


def test_before_a_point_the_sweep_waits_until_the_server_has_nothing_running():
    import httpx

    from runner.cluster import ClusterConfig
    from runner.mockserver import MockServerConfig, start_mock_server
    from runner.sweep import wait_until_drained

    config = MockServerConfig(cluster=ClusterConfig(workers=1, time_scale=1.0))
    with start_mock_server(config, process=True) as server:
        body = {
            "model": "mock-model",
            "messages": [{"role": "user", "content": "hello"}],
            "max_tokens": 200,
        }
        answered = threading.Event()

        def ask() -> None:
            httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=60)
            answered.set()

        asker = threading.Thread(target=ask)
        asker.start()
        target = EndpointTarget(url=server.url, model="mock-model")
        lines: list[str] = []
        stop = threading.Event()
        try:
            # The request streams for a second or more: a short wait gives up, saying so.
            while not lines and not answered.is_set():
                wait_until_drained(
                    target, timeout_s=0.0, cooldown_s=0, stop=stop, log=lambda _, m: lines.append(m)
                )
            assert lines and lines[0].startswith("the server still has 1 running and 0 queued")
            # A long wait returns once the request is over, without a warning.
            lines.clear()
            wait_until_drained(
                target, timeout_s=60, cooldown_s=0, stop=stop, log=lambda _, m: lines.append(m)
            )
            assert lines == []
            asker.join(timeout=10)
            assert answered.is_set()
        finally:
            asker.join(timeout=60)
