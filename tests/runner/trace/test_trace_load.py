"""Reading trace files: format detection by content, and located errors for bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.errors import SpecError, TraceError
from runner.trace import TraceFormat, detect_format, load_trace, parse_trace
from tests.runner.trace.helpers import assert_located, write_jsonl

DAG = {"session_id": "r", "turns": [{"messages": [{"role": "user", "content": "hi"}]}]}
NATIVE = {
    "tree_id": "t",
    "sessions": [{"id": "r", "turns": [{"input_tokens": 3, "output_tokens": 1}]}],
}
MOONCAKE = {"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]}
CLAUDE = {
    "id": "c",
    "block_size": 64,
    "requests": [{"t": 0, "type": "n", "in": 5, "out": 1, "api_time": 1.0}],
}


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (json.dumps(DAG) + "\n", TraceFormat.DAG_JSONL),
        (json.dumps(NATIVE) + "\n", TraceFormat.NATIVE),
        (json.dumps(MOONCAKE) + "\n", TraceFormat.MOONCAKE),
        (json.dumps(CLAUDE), TraceFormat.CLAUDE_CODE),
        (json.dumps(CLAUDE, indent=2), TraceFormat.CLAUDE_CODE),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.5,3,1\n",
            TraceFormat.AZURE_CSV,
        ),
    ],
)
def test_format_is_told_from_content_not_extension(
    tmp_path: Path, content: str, expected: TraceFormat
) -> None:
    path = tmp_path / "misleading.csv"  # the extension says CSV whatever the content
    path.write_text(content)
    assert detect_format(path) is expected
    assert load_trace(path).format is expected


def test_explicit_format_skips_detection(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [MOONCAKE])
    assert load_trace(path, format=TraceFormat.MOONCAKE).format is TraceFormat.MOONCAKE
    with pytest.raises(TraceError) as info:
        load_trace(path, format="dag_jsonl")
    assert_located(info.value, file=path, line=1, problem="missing required key 'session_id'")


def test_unknown_format_name_is_a_spec_error(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [MOONCAKE])
    with pytest.raises(SpecError, match="unknown trace format 'csvish'"):
        load_trace(path, format="csvish")
    with pytest.raises(SpecError, match="generated"):
        load_trace(path, format="synthetic")


def test_unrecognisable_content_asks_for_a_format(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", [{"colour": "red"}])
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert_located(info.value, file=path, line=1, problem="cannot tell the trace format")
    assert "--format" in str(info.value)


def test_empty_file_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n\n")
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert_located(info.value, file=path, line=None, problem="the file is empty")


def test_oversize_file_is_refused_before_reading(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "big.jsonl", [MOONCAKE] * 100)
    with pytest.raises(TraceError) as info:
        load_trace(path, max_bytes=1024)
    assert_located(info.value, file=path, line=None, problem="over the 1,024 bytes limit")
    assert load_trace(path).trees  # fine under the default 512 MiB


def test_missing_file_and_directory_are_reported(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such file"):
        load_trace(tmp_path / "nope.jsonl")
    with pytest.raises(TraceError, match="is a directory"):
        load_trace(tmp_path)


def test_binary_file_is_reported_as_not_text(tmp_path: Path) -> None:
    path = tmp_path / "blob.jsonl"
    path.write_bytes(b'{"a": 1}\n\xff\xfe\x00')
    with pytest.raises(TraceError) as info:
        load_trace(path, format="mooncake")
    assert_located(info.value, file=path, line=2, problem="not UTF-8")


def test_line_that_is_not_an_object_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(MOONCAKE) + "\n[1, 2]\n")
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert_located(info.value, file=path, line=2, problem="expected a JSON object")


def test_truncated_single_document_is_still_detected_and_located(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(CLAUDE)[:60])
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert_located(info.value, file=path, line=1, problem="truncated")


def test_text_in_memory_loads_under_a_given_name() -> None:
    trace = parse_trace(json.dumps(DAG) + "\n", source="upload.jsonl")
    assert trace.source == "upload.jsonl" and trace.format is TraceFormat.DAG_JSONL
