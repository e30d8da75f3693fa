"""`python -m runner inspect`: JSON with --json, a table otherwise, exit 2 on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.cli import main
from tests.fixtures import CLAUDE_CODE_SUBAGENTS
from tests.runner.trace.helpers import write_jsonl

ROOT = Path(__file__).resolve().parents[3]

DAG_ROWS = [
    {
        "session_id": "r",
        "turns": [{"messages": [{"role": "user", "content": "hi"}], "spawns": ["s"]}],
    },
    {"session_id": "s", "turns": [{"messages": [{"role": "user", "content": "yo"}]}]},
]


def test_inspect_json_prints_one_object_with_the_stable_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", DAG_ROWS)
    assert main(["inspect", str(path), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    for key in (
        "format",
        "trees",
        "sessions",
        "requests",
        "fork_children",
        "spawn_children",
        "max_depth",
    ):
        assert key in stats
    assert (stats["format"], stats["sessions"], stats["spawn_children"]) == ("dag_jsonl", 2, 1)


def test_inspect_prints_a_readable_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", DAG_ROWS)
    assert main(["inspect", str(path), "--format", "dag_jsonl"]) == 0
    out = capsys.readouterr().out
    assert "spawn_children" in out and "dag_jsonl" in out and not out.startswith("{")


def test_inspect_bad_file_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [{"session_id": "r", "turns": []}])
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}:1" in err and "turns" in err


def test_inspect_claude_code_sample(
    shared_traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = shared_traces / "weka_claude_code" / "trace_0282.json"
    assert main(["inspect", str(path), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["format"], stats["trees"], stats["sessions"]) == ("claude_code", 1, 4)
    assert (stats["spawn_children"], stats["requests"]) == (3, 103)


def test_inspect_claude_code_fixture(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(CLAUDE_CODE_SUBAGENTS), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["format"], stats["trees"], stats["sessions"]) == ("claude_code", 1, 4)
    assert (stats["spawn_children"], stats["requests"]) == (3, 61)


def test_inspect_into_a_closed_pipe_exits_quietly(tmp_path: Path) -> None:
    """`inspect --json FILE | head -c 10`: the reader leaves early; no traceback, exit 141."""
    path = write_jsonl(tmp_path / "t.jsonl", DAG_ROWS)
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before a byte is written: EPIPE every time
    try:
        done = subprocess.run(
            [sys.executable, "-m", "runner", "inspect", "--json", str(path)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    assert done.stderr.decode() == ""
    assert done.returncode == 141
