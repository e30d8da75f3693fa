"""Starting and stopping the mock: the CLI's ready line and clean Ctrl-C, bad options, the
subprocess mode of start_mock_server, and a client leaving mid-stream."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from runner.cli import main
from runner.cluster import ClusterConfig
from runner.mockserver import MockServerConfig, start_mock_server
from tests.runner.mockserver.conftest import MockFactory, chat_body, json_chunks

_ROOT = Path(__file__).resolve().parents[3]


def _runner(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "runner", *args],
        cwd=_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(_ROOT)},
    )


def test_cli_prints_one_ready_line_serves_and_stops_cleanly_on_ctrl_c() -> None:
    child = _runner("mock-server", "--port", "0", "--workers", "2", "--model", "cli-model")
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert match, line
        assert "cli-model" in line and "2 workers" in line
        models = httpx.get(match.group(0) + "/v1/models").json()
        assert models["data"][0]["id"] == "cli-model"
        child.send_signal(signal.SIGINT)
        _, stderr = child.communicate(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0
    assert stderr == ""


@pytest.mark.parametrize(
    "args",
    [
        ("--error-rate", "1.5"),
        ("--workers", "0"),
        ("--router", "magic"),
        ("--port", "70000"),
        ("--time-scale", "-1"),
        ("--error-rate", "0.6", "--stall-rate", "0.6"),
    ],
)
def test_cli_bad_options_exit_2_with_one_line(
    args: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(["mock-server", *args])
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    captured = capsys.readouterr()

    assert code == 2
    assert captured.out == ""
    assert len(captured.err.strip().splitlines()) == 1, captured.err


def test_a_taken_port_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    with start_mock_server() as running:
        port = running.url.rsplit(":", 1)[1]
        code = main(["mock-server", "--port", port])
    err = capsys.readouterr().err

    assert code == 2
    assert "cannot listen on 127.0.0.1:" in err
    assert len(err.strip().splitlines()) == 1


def test_process_mode_serves_from_another_process_and_stops() -> None:
    config = MockServerConfig(model="proc", cluster=ClusterConfig(workers=2, time_scale=0.0))
    handle = start_mock_server(config, process=True)
    try:
        assert handle.pid is not None and handle.pid != os.getpid()
        response = httpx.post(
            handle.url + "/v1/chat/completions",
            json={**chat_body("hi", max_tokens=3), "model": "proc"},
        )
        assert json_chunks(response.content)[-1]["usage"]["completion_tokens"] == 3
    finally:
        handle.stop()
    try:
        os.kill(handle.pid, 0)
    except ProcessLookupError:
        pass
    else:
        raise AssertionError("the server process is still running")


def test_a_client_leaving_mid_stream_is_counted_and_frees_the_slot(mock: MockFactory) -> None:
    server = mock(time_scale=1.0, workers=1)
    with server.client.stream(
        "POST", "/v1/chat/completions", json=chat_body("hi", max_tokens=500)
    ) as response:
        for _ in response.iter_raw():
            break  # the first chunk came: now hang up
    deadline = time.monotonic() + 5
    while server.stats()["server"]["client_disconnects"] == 0 and time.monotonic() < deadline:
        time.sleep(0.02)

    stats = server.stats()
    assert stats["server"]["client_disconnects"] == 1
    assert stats["server"]["in_flight"] == 0
    assert stats["cluster"]["totals"]["running"] == 0
