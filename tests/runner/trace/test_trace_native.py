"""The native format: one tree per line, a published schema, strict validation, round trips."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.errors import TraceError
from runner.trace import (
    BranchMode,
    SyntheticConfig,
    TraceFormat,
    dump_native,
    generate_synthetic,
    load_trace,
    native_json_schema,
)
from tests.runner.trace.helpers import assert_located, write_jsonl

SCHEMA_FILE = Path(__file__).resolve().parents[3] / "docs" / "native-trace.schema.json"


def t(tokens: int = 100, **extra: Any) -> dict[str, Any]:
    return {"input_tokens": tokens, "output_tokens": 10} | extra


def tree(*sessions: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"tree_id": "t1", "sessions": list(sessions)} | top


def error(tmp_path: Path, rows: list[dict[str, Any]]) -> tuple[Path, TraceError]:
    path = write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(TraceError) as info:
        load_trace(path)
    return path, info.value


def test_published_schema_matches_the_validating_models() -> None:
    assert json.loads(SCHEMA_FILE.read_text()) == native_json_schema()


def test_first_session_is_the_root_and_branches_make_the_children(tmp_path: Path) -> None:
    row = tree(
        {
            "id": "main",
            "turns": [
                t(branches=[{"mode": "spawn", "children": ["a", "b"], "join_turn": 1}]),
                t(200, delay_s=2.5, branches=[{"mode": "fork", "children": ["f"]}]),
            ],
        },
        {"id": "a", "subagent_type": "Explore", "turns": [t(), t()]},
        {"id": "b", "turns": [t(branches=[{"mode": "fork", "children": ["g"]}])]},
        {"id": "f", "turns": [t()]},
        {"id": "g", "turns": [t()]},
        block_size=32,
    )
    trace = load_trace(write_jsonl(tmp_path / "n.jsonl", [row]))
    assert trace.format is TraceFormat.NATIVE
    (only,) = trace.trees
    assert (only.id, only.root_id, only.block_size) == ("t1", "main", 32)
    depth = {s.id: (s.parent_id, s.mode, s.depth) for s in only.sessions.values()}
    assert depth == {
        "main": (None, None, 0),
        "a": ("main", BranchMode.SPAWN, 1),
        "b": ("main", BranchMode.SPAWN, 1),
        "f": ("main", BranchMode.FORK, 1),
        "g": ("b", BranchMode.FORK, 2),
    }
    assert only.sessions["a"].subagent_type == "Explore"


def test_untimed_trees_get_nominal_times(tmp_path: Path) -> None:
    row = tree({"id": "r", "turns": [t(), t(delay_s=3.0)]})
    only = load_trace(write_jsonl(tmp_path / "n.jsonl", [row])).trees[0]
    first, second = only.root.turns
    assert not only.timestamped and first.duration_s > 0
    assert second.t_s == pytest.approx(first.duration_s + 3.0)


def test_recorded_times_are_kept(tmp_path: Path) -> None:
    row = tree(
        {"id": "r", "turns": [t(t_s=0.0, duration_s=1.0), t(t_s=7.0, duration_s=2.0, delay_s=6.0)]},
        timestamped=True,
    )
    only = load_trace(write_jsonl(tmp_path / "n.jsonl", [row])).trees[0]
    assert only.timestamped
    assert [(x.t_s, x.duration_s) for x in only.root.turns] == [(0.0, 1.0), (7.0, 2.0)]


def test_messages_model_and_extra_body_are_carried(tmp_path: Path) -> None:
    msg = [{"role": "user", "content": "hi there"}]
    row = tree(
        {"id": "r", "turns": [t(2, messages=msg, model="m1", extra_body={"nvext": {"a": 1}})]}
    )
    first = load_trace(write_jsonl(tmp_path / "n.jsonl", [row])).trees[0].root.turns[0]
    assert first.messages == tuple(msg) and first.model == "m1"
    assert first.extra_body == {"nvext": {"a": 1}}


def test_native_round_trip_preserves_every_tree(tmp_path: Path) -> None:
    trace = generate_synthetic(SyntheticConfig(trees=3, seed=5, fork_probability=0.3))
    path = tmp_path / "syn.jsonl"
    path.write_text(dump_native(trace))
    again = load_trace(path)
    assert again.format is TraceFormat.NATIVE
    assert again.trees == trace.trees


def test_unknown_key_is_rejected_with_its_path(tmp_path: Path) -> None:
    path, exc = error(tmp_path, [tree({"id": "r", "turns": [t(colour="red")]})])
    assert_located(exc, file=path, line=1, problem="unknown key 'colour'")
    assert exc.path == "sessions[0].turns[0]"


def test_wrong_type_is_rejected_on_its_line(tmp_path: Path) -> None:
    good = tree({"id": "r", "turns": [t()]})
    bad = tree({"id": "r", "turns": [t() | {"input_tokens": "100"}]}, tree_id="t2")
    path, exc = error(tmp_path, [good, bad])
    assert_located(exc, file=path, line=2, problem="valid integer")
    assert exc.path == "sessions[0].turns[0].input_tokens"


def test_negative_delay_is_rejected(tmp_path: Path) -> None:
    path, exc = error(tmp_path, [tree({"id": "r", "turns": [t(delay_s=-1.0)]})])
    assert_located(exc, file=path, line=1, problem="greater than or equal to 0")
    assert exc.path == "sessions[0].turns[0].delay_s"


def test_non_positive_block_size_is_rejected(tmp_path: Path) -> None:
    path, exc = error(tmp_path, [tree({"id": "r", "turns": [t()]}, block_size=0)])
    assert_located(exc, file=path, line=1, problem="greater than 0")
    assert exc.path == "block_size"


def test_empty_session_is_rejected(tmp_path: Path) -> None:
    path, exc = error(tmp_path, [tree({"id": "r", "turns": []})])
    assert_located(exc, file=path, line=1, problem="at least 1 item")
    assert exc.path == "sessions[0].turns"


def test_missing_key_is_named(tmp_path: Path) -> None:
    path, exc = error(tmp_path, [tree({"id": "r", "turns": [{"input_tokens": 5}]})])
    assert_located(exc, file=path, line=1, problem="missing required key 'output_tokens'")


def test_unknown_child_is_rejected(tmp_path: Path) -> None:
    row = tree({"id": "r", "turns": [t(branches=[{"mode": "spawn", "children": ["nope"]}])]})
    path, exc = error(tmp_path, [row])
    assert_located(exc, file=path, line=1, problem="unknown child session 'nope'")
    assert exc.path == "sessions[0].turns[0].branches[0].children[0]"


def test_cycle_back_to_the_root_is_rejected(tmp_path: Path) -> None:
    row = tree(
        {"id": "r", "turns": [t(branches=[{"mode": "spawn", "children": ["a"]}])]},
        {"id": "a", "turns": [t(branches=[{"mode": "spawn", "children": ["r"]}])]},
    )
    path, exc = error(tmp_path, [row])
    assert_located(exc, file=path, line=1, problem="cycle")


def test_unreachable_session_is_rejected(tmp_path: Path) -> None:
    row = tree({"id": "r", "turns": [t()]}, {"id": "lost", "turns": [t()]})
    path, exc = error(tmp_path, [row])
    assert_located(exc, file=path, line=1, problem="'lost' is not reachable from the root 'r'")


def test_fork_target_of_two_parents_is_rejected(tmp_path: Path) -> None:
    fork = {"mode": "fork", "children": ["c"]}
    row = tree(
        {"id": "r", "turns": [t(branches=[{"mode": "spawn", "children": ["a"]}, fork])]},
        {"id": "a", "turns": [t(branches=[fork])]},
        {"id": "c", "turns": [t()]},
    )
    path, exc = error(tmp_path, [row])
    assert_located(exc, file=path, line=1, problem="'c' is the FORK target of two parents")


def test_join_turn_outside_the_session_is_rejected(tmp_path: Path) -> None:
    row = tree(
        {"id": "r", "turns": [t(branches=[{"mode": "spawn", "children": ["a"], "join_turn": 5}])]},
        {"id": "a", "turns": [t()]},
    )
    path, exc = error(tmp_path, [row])
    assert_located(exc, file=path, line=1, problem="join turn 5 must come after")


def test_duplicate_session_and_tree_ids_are_rejected(tmp_path: Path) -> None:
    row = tree({"id": "r", "turns": [t()]}, {"id": "r", "turns": [t()]})
    path, exc = error(tmp_path, [row])
    assert_located(exc, file=path, line=1, problem="duplicate session id 'r'")
    one = tree({"id": "r", "turns": [t()]})
    path, exc = error(tmp_path, [one, one])
    assert_located(exc, file=path, line=2, problem="duplicate tree id 't1'")


def test_times_on_some_turns_only_are_rejected(tmp_path: Path) -> None:
    row = tree({"id": "r", "turns": [t(t_s=0.0, duration_s=1.0), t()]})
    path, exc = error(tmp_path, [row])
    assert_located(exc, file=path, line=1, problem="lacks them")
    assert exc.path == "sessions[0].turns[1]"
