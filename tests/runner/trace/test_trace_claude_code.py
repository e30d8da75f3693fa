"""Claude Code session traces: subagents become SPAWN children with recorded timing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.errors import TraceError
from runner.trace import BranchMode, TraceFormat, load_trace
from tests.runner.trace.helpers import assert_located


def call(t: float, *, api: float = 2.0, tokens: int = 200, out: int = 50) -> dict[str, Any]:
    blocks = tokens // 64
    return {
        "t": t,
        "type": "n",
        "model": "m",
        "in": tokens,
        "out": out,
        "hash_ids": list(range(1, blocks + 1)),
        "input_types": ["text"],
        "output_types": ["text"],
        "stop": "tool_use",
        "api_time": api,
        "think_time": 0.0,
    }


def subagent(t: float, agent_id: str, *, duration_ms: float, inner: list[Any]) -> dict[str, Any]:
    return {
        "t": t,
        "type": "subagent",
        "agent_id": agent_id,
        "subagent_type": "Explore",
        "duration_ms": duration_ms,
        "total_tokens": 0,
        "tool_use_count": 0,
        "status": "completed",
        "requests": inner,
        "models": ["m"],
        "tool_tokens": 0,
        "system_tokens": 0,
    }


def session_file(tmp_path: Path, requests: list[Any], **top: Any) -> Path:
    doc = {
        "id": "sess",
        "models": ["m"],
        "block_size": 64,
        "hash_id_scope": "local",
        "tool_tokens": 0,
        "system_tokens": 0,
        "totals": {},
        "requests": requests,
    } | top
    path = tmp_path / "cc.json"
    path.write_text(json.dumps(doc))
    return path


def sample(tmp_path: Path) -> Path:
    # main: 0-2, 10-12, 20-22, 30-32; "a" spawned at 13 for 5 s; "b" at 21 for 100 s.
    return session_file(
        tmp_path,
        [
            call(0),
            call(10),
            subagent(13, "a", duration_ms=5000, inner=[call(0, api=1), call(3, api=1)]),
            call(20),
            subagent(21, "b", duration_ms=100_000, inner=[call(0)]),
            call(30),
        ],
    )


def test_subagent_is_declared_on_the_last_request_started_before_it(tmp_path: Path) -> None:
    tree = load_trace(sample(tmp_path)).trees[0]
    assert tree.root_id == "sess"
    branches = [(t.index, b.mode, b.children) for t in tree.root.turns for b in t.branches]
    assert branches == [(1, BranchMode.SPAWN, ("a",)), (2, BranchMode.SPAWN, ("b",))]
    assert tree.sessions["a"].parent_id == "sess" and tree.sessions["a"].depth == 1


def test_subagent_first_delay_runs_from_the_declaring_request_end(tmp_path: Path) -> None:
    tree = load_trace(sample(tmp_path)).trees[0]
    a = tree.sessions["a"].turns
    assert a[0].delay_s == pytest.approx(13 - (10 + 2))
    assert a[1].delay_s == pytest.approx(16 - (13 + 1))
    assert [t.t_s for t in a] == [13, 16]  # inner t is relative to the subagent's start


def test_inter_turn_delay_is_end_to_start_and_never_negative(tmp_path: Path) -> None:
    path = session_file(tmp_path, [call(0, api=5), call(3), call(10)])
    turns = load_trace(path).trees[0].root.turns
    assert [t.delay_s for t in turns] == [0.0, 0.0, pytest.approx(5.0)]
    assert [t.duration_s for t in turns] == [5.0, 2.0, 2.0]


def test_join_is_the_first_parent_request_after_the_subagent_ends(tmp_path: Path) -> None:
    tree = load_trace(sample(tmp_path)).trees[0]
    joins = {b.children[0]: b.join_turn for t in tree.root.turns for b in t.branches}
    assert joins["a"] == 2  # ends at 18, the request at 20 is first after
    assert joins["b"] is None  # ends at 121, after the parent's last request


def test_claude_code_trace_is_timestamped_with_its_block_size(tmp_path: Path) -> None:
    trace = load_trace(session_file(tmp_path, [call(0, tokens=256)], block_size=32))
    assert trace.format is TraceFormat.CLAUDE_CODE
    assert trace.trees[0].timestamped and trace.trees[0].block_size == 32


def test_unhashed_tail_is_kept_and_surplus_hash_ids_are_dropped(tmp_path: Path) -> None:
    over = call(0, tokens=100) | {"hash_ids": [1, 2, 3]}  # 100 tokens hold two blocks
    tail = call(5, tokens=190) | {"hash_ids": [1, 2]}  # 62 tokens past the blocks
    trace = load_trace(session_file(tmp_path, [over, tail]))
    turns = trace.trees[0].root.turns
    assert turns[0].hash_ids == (1, 2) and turns[1].hash_ids == (1, 2)
    assert trace.meta["warning_count"] == 1


def test_duplicate_subagent_ids_are_rejected(tmp_path: Path) -> None:
    path = session_file(
        tmp_path,
        [
            call(0),
            subagent(1, "x", duration_ms=1, inner=[call(0)]),
            subagent(2, "x", duration_ms=1, inner=[call(0)]),
        ],
    )
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert_located(info.value, file=path, line=None, problem="duplicate session id 'x'")
    assert info.value.path == "requests[2].agent_id"


def test_a_session_without_model_requests_is_rejected(tmp_path: Path) -> None:
    path = session_file(tmp_path, [])
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert_located(info.value, file=path, line=None, problem="has no model requests")


def test_wrong_type_names_the_json_path(tmp_path: Path) -> None:
    path = session_file(tmp_path, [call(0) | {"in": "many"}])
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert_located(info.value, file=path, line=None, problem="valid integer")
    assert info.value.path == "requests[0].in"


def test_negative_time_is_rejected(tmp_path: Path) -> None:
    path = session_file(tmp_path, [call(0), call(-4)])
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert_located(info.value, file=path, line=None, problem="greater than or equal to 0")


def test_truncated_session_file_names_the_line_and_the_cut(tmp_path: Path) -> None:
    path = sample(tmp_path)
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert_located(info.value, file=path, line=1, problem="truncated")


def test_non_positive_block_size_is_rejected(tmp_path: Path) -> None:
    path = session_file(tmp_path, [call(0)], block_size=0)
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert_located(info.value, file=path, line=None, problem="greater than 0")
    assert info.value.path == "block_size"
