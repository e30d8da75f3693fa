"""Arrival traces: Mooncake JSONL (sessions from hash prefixes) and the Azure CSV."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.errors import TraceError
from runner.trace import TraceFormat, load_trace
from tests.runner.trace.helpers import assert_located, write_jsonl


def row(ms: float, tokens: int, ids: list[int], out: int = 10) -> dict[str, Any]:
    return {"timestamp": ms, "input_length": tokens, "output_length": out, "hash_ids": ids}


def sessions_of(path: Path) -> list[list[tuple[int, ...]]]:
    trace = load_trace(path, block_size=4)
    return [[t.hash_ids for t in tree.root.turns] for tree in trace.trees]


def test_request_continues_the_session_whose_full_blocks_it_extends(tmp_path: Path) -> None:
    # Block size 4: a 10-token request has two full blocks (1, 2) and a partial one (3).
    path = write_jsonl(
        tmp_path / "m.jsonl",
        [
            row(0, 10, [1, 2, 3]),
            row(1000, 18, [1, 2, 7, 8, 9]),  # extends (1, 2): the partial 3 was re-hashed
            row(2000, 10, [1, 5, 6]),  # shares one block only: a new session
        ],
    )
    assert sessions_of(path) == [[(1, 2, 3), (1, 2, 7, 8, 9)], [(1, 5, 6)]]


def test_longest_shared_prefix_wins_then_the_most_recent(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "m.jsonl",
        [
            row(0, 8, [1, 2]),  # session A, key (1, 2)
            row(1, 12, [1, 2, 3]),  # continues A, key (1, 2, 3)
            row(2, 8, [1, 2]),  # not a proper extension of (1, 2, 3): session B, key (1, 2)
            row(3, 16, [1, 2, 3, 4]),  # (1, 2, 3) is longer than (1, 2): A
            row(4, 12, [1, 2, 9]),  # only B's (1, 2) fits
        ],
    )
    assert sessions_of(path) == [
        [(1, 2), (1, 2, 3), (1, 2, 3, 4)],
        [(1, 2), (1, 2, 9)],
    ]


def test_equal_keys_go_to_the_most_recently_active_session(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "m.jsonl",
        [
            row(0, 8, [1, 2]),  # A
            row(1, 8, [1, 2]),  # B (equal, not a proper extension)
            row(2, 12, [1, 2, 5]),  # B was active last
            row(3, 12, [1, 2, 6]),  # B moved on; A still ends at (1, 2)
        ],
    )
    assert sessions_of(path) == [[(1, 2), (1, 2, 6)], [(1, 2), (1, 2, 5)]]


def test_mooncake_sessions_keep_their_arrival_times(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "m.jsonl", [row(500, 1024, [1, 2]), row(9500, 2048, [1, 2, 3, 4])]
    )
    trace = load_trace(path)
    assert trace.format is TraceFormat.MOONCAKE
    (tree,) = trace.trees
    assert tree.timestamped and tree.block_size == 512
    first, second = tree.root.turns
    assert (first.t_s, second.t_s) == (0.5, 9.5)
    assert first.delay_s == 0.5  # offset from the trace start
    assert second.delay_s == pytest.approx(9.5 - (0.5 + first.duration_s))


def test_rows_without_hash_ids_stand_alone(tmp_path: Path) -> None:
    lines = [{"timestamp": 0, "input_length": 512, "output_length": 8}] * 3
    trace = load_trace(write_jsonl(tmp_path / "m.jsonl", lines))
    assert [len(t.sessions) for t in trace.trees] == [1, 1, 1]


def test_mooncake_wrong_type_names_line_and_key(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "m.jsonl", [row(0, 10, [1]), row(5, 10, [1]) | {"hash_ids": "x"}])
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert_located(info.value, file=path, line=2, problem="valid list")
    assert info.value.path == "hash_ids"


def test_mooncake_unsupported_key_is_named(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "m.jsonl", [row(0, 10, [1]) | {"text_input": "hi"}])
    with pytest.raises(TraceError) as info:
        load_trace(path, format="mooncake")
    assert_located(info.value, file=path, line=1, problem="unknown key 'text_input'")


AZURE = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def test_azure_rows_are_placed_relative_to_the_first_row(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text(
        AZURE + "2023-11-16 18:15:46.5000000,374,44\n2023-11-16 18:15:48.2500000,100,9\n"
    )
    trace = load_trace(path)
    assert trace.format is TraceFormat.AZURE_CSV
    turns = [tree.root.turns[0] for tree in trace.trees]
    assert [(t.t_s, t.input_tokens, t.output_tokens) for t in turns] == [
        (0.0, 374, 44),
        (1.75, 100, 9),
    ]
    assert all(t.hash_ids == () for t in turns)


def test_azure_bad_number_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text(AZURE + "2023-11-16 18:15:46.5,374,44\n2023-11-16 18:15:47.5,lots,9\n")
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert_located(info.value, file=path, line=3, problem="bad ContextTokens value 'lots'")


def test_azure_cut_row_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text(AZURE + "2023-11-16 18:15:46.5,374,44\n2023-11-16 18:15:4")
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert_located(info.value, file=path, line=3, problem="truncated")


def test_azure_missing_column_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text("TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.5,374\n")
    with pytest.raises(TraceError) as info:
        load_trace(path, format="azure_csv")
    assert_located(info.value, file=path, line=1, problem="missing column 'GeneratedTokens'")
