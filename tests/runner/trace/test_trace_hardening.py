"""Issue 13 item 5: inputs that used to pass silently or exhaust the machine are refused.

Each test names one hole: huge ids, duplicate JSON keys, loose Azure CSV rows, impossible
timelines. Every refusal is one TraceError naming the file, the line and the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.errors import TraceError
from runner.trace import load_trace
from runner.trace.limits import MAX_ID_BYTES
from tests.runner.trace.helpers import assert_located

TURN = {"input_tokens": 100, "output_tokens": 10}
CALL = {"t": 0.5, "type": "n", "in": 100, "out": 10, "api_time": 1.0}
AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def write(tmp_path: Path, text: str, name: str = "trace") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def refusal(path: Path, **kwargs: Any) -> TraceError:
    with pytest.raises(TraceError) as info:
        load_trace(path, **kwargs)
    return info.value


# ------------------------------------------------------------------------------- ids

LONG = "x" * (MAX_ID_BYTES + 1)
WIDE = "é" * (MAX_ID_BYTES // 2 + 1)  # within the limit in characters, over it in bytes


def native_line(**tree: Any) -> str:
    doc = {"tree_id": "t", "sessions": [{"id": "r", "turns": [TURN]}], **tree}
    return json.dumps(doc) + "\n"


@pytest.mark.parametrize("long_id", [LONG, WIDE], ids=["ascii", "utf-8"])
@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        (lambda i: "\n" + native_line(tree_id=i), 2, "tree_id"),
        (
            lambda i: native_line(sessions=[{"id": i, "turns": [TURN]}]),
            1,
            "sessions[0].id",
        ),
        (
            lambda i: (
                json.dumps(
                    {"session_id": i, "turns": [{"messages": [{"role": "user", "content": "hi"}]}]}
                )
                + "\n"
            ),
            1,
            "session_id",
        ),
        (
            lambda i: json.dumps(
                {
                    "id": "c",
                    "block_size": 64,
                    "requests": [
                        CALL,
                        {"t": 1, "type": "subagent", "agent_id": i, "requests": [CALL]},
                    ],
                }
            ),
            None,
            "requests[1].agent_id",
        ),
        (
            lambda i: json.dumps({"id": i, "block_size": 64, "requests": [CALL]}),
            None,
            "id",
        ),
    ],
    ids=["native tree", "native session", "dag_jsonl", "claude_code agent", "claude_code id"],
)
def test_an_id_over_the_byte_limit_is_refused_naming_its_field(
    tmp_path: Path, text: Any, line: int | None, field: str, long_id: str
) -> None:
    path = write(tmp_path, text(long_id))
    exc = refusal(path)
    assert_located(exc, file=path, line=line, problem=f"at {field}:")
    assert str(MAX_ID_BYTES) in str(exc)
    assert len(str(exc)) < 400


def test_an_id_of_exactly_the_limit_loads(tmp_path: Path) -> None:
    path = write(tmp_path, native_line(tree_id="x" * MAX_ID_BYTES))
    assert load_trace(path).trees[0].id == "x" * MAX_ID_BYTES


def test_a_megabyte_agent_id_is_refused_without_simulating(tmp_path: Path) -> None:
    agent = {"t": 1, "type": "subagent", "agent_id": "a" * 1_000_000, "requests": [CALL]}
    path = write(tmp_path, json.dumps({"id": "c", "block_size": 64, "requests": [CALL, agent]}))
    assert "requests[1].agent_id" in str(refusal(path))


# ------------------------------------------------------------------- duplicate JSON keys


@pytest.mark.parametrize(
    ("text", "line", "key"),
    [
        (
            native_line() + '{"tree_id": "u", "tree_id": "v", "sessions": []}\n',
            2,
            "'tree_id'",
        ),
        (
            '{"session_id": "r", "turns": [{"messages": [{"role": "user", "content": "a",'
            ' "content": "b"}]}]}\n',
            1,
            "'content'",
        ),
        (
            '{"id": "c", "block_size": 64, "requests": [\n'
            ' {"t": 0, "type": "n", "in": 100, "out": 10, "api_time": 1},\n'
            ' {"t": 2, "type": "n", "in": 100, "in": 200, "out": 10, "api_time": 1}\n]}',
            3,
            "'in'",
        ),
        (
            '{"timestamp": 0, "input_length": 600, "output_length": 10}\n'
            '{"timestamp": 5, "input_length": 600, "output_length": 10, "timestamp": 9}\n',
            2,
            "'timestamp'",
        ),
    ],
    ids=["native", "dag_jsonl", "claude_code", "mooncake"],
)
def test_a_key_given_twice_in_one_object_is_refused_with_its_line(
    tmp_path: Path, text: str, line: int, key: str
) -> None:
    path = write(tmp_path, text)
    assert_located(refusal(path), file=path, line=line, problem=f"the key {key} appears twice")


def test_a_key_given_twice_on_the_first_line_is_refused_not_misdetected(tmp_path: Path) -> None:
    path = write(tmp_path, '{"tree_id": "t", "tree_id": "u", "sessions": []}\n')
    assert_located(refusal(path), file=path, line=1, problem="the key 'tree_id' appears twice")


def test_equal_keys_in_different_objects_load(tmp_path: Path) -> None:
    path = write(tmp_path, json.dumps({"id": "c", "block_size": 64, "requests": [CALL, CALL]}))
    assert load_trace(path).trees[0].root.turns[1].input_tokens == 100


# ----------------------------------------------------------------------------- Azure CSV


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens,contexttokens\n"
            "2023-11-16 18:15:46.5,100,10,7\n",
            1,
            "at contexttokens: column 'contexttokens' appears twice in the header",
        ),
        (
            AZURE_HEADER + '2023-11-16 18:15:46.5,100,10\n2023-11-16 18:15:47.5,"5\n",10\n',
            3,
            "at ContextTokens: a quoted field holds a line break: '5\\n'",
        ),
        (
            AZURE_HEADER + "2023-11-16 18:15:46.5,100,10\n2023-11-16 18:15:47.5,100,10,99\n",
            3,
            "expected 3 columns, found 4: extra field '99'",
        ),
        (
            AZURE_HEADER + '2023-11-16 18:15:46.5,"100\r\n",10\n',
            2,
            "at ContextTokens: a quoted field holds a line break",
        ),
    ],
    ids=["duplicate column", "quoted line break", "extra field", "quoted crlf"],
)
def test_an_ambiguous_azure_row_is_refused_with_line_and_field(
    tmp_path: Path, text: str, line: int, problem: str
) -> None:
    path = write(tmp_path, text, "trace.csv")
    assert_located(refusal(path), file=path, line=line, problem=problem)


def test_an_azure_row_after_a_blank_line_is_still_named_by_its_own_line(tmp_path: Path) -> None:
    text = AZURE_HEADER + "2023-11-16 18:15:46.5,100,10\n\n2023-11-16 18:15:47.5,1x,10\n"
    path = write(tmp_path, text, "trace.csv")
    assert_located(refusal(path), file=path, line=4, problem="bad ContextTokens value '1x'")


# ---------------------------------------------------------------------------- timelines


def timed(t_s: float, **turn: Any) -> dict[str, Any]:
    return {**TURN, "t_s": t_s, "duration_s": 1.0, **turn}


@pytest.mark.parametrize(
    ("sessions", "field", "problem"),
    [
        (
            [{"id": "r", "turns": [timed(0.0), timed(5.0), timed(3.0)]}],
            "sessions[0].turns[2].t_s",
            "turn 2 starts at 3 s, before turn 1 (5 s)",
        ),
        (
            [
                {
                    "id": "r",
                    "turns": [
                        timed(0.0),
                        timed(5.0, branches=[{"mode": "spawn", "children": ["c"]}]),
                    ],
                },
                {"id": "c", "turns": [timed(4.0)]},
            ],
            "sessions[1].turns[0].t_s",
            "session 'c' starts at 4 s, before its declaring turn 1 of 'r' (5 s)",
        ),
    ],
    ids=["turn backwards", "child before its turn"],
)
def test_an_impossible_native_timeline_is_refused_with_its_line(
    tmp_path: Path, sessions: list[dict[str, Any]], field: str, problem: str
) -> None:
    path = write(tmp_path, native_line() + native_line(tree_id="u", sessions=sessions))
    assert_located(refusal(path), file=path, line=2, problem=f"at {field}: {problem}")


def test_an_untimed_native_tree_has_no_timeline_to_refuse(tmp_path: Path) -> None:
    sessions = [
        {"id": "r", "turns": [{**TURN, "branches": [{"mode": "spawn", "children": ["c"]}]}]},
        {"id": "c", "turns": [TURN, TURN]},
    ]
    assert len(load_trace(write(tmp_path, native_line(sessions=sessions))).trees) == 1


def claude_text(*requests: dict[str, Any]) -> str:
    # One request per line, as the recorded files are written, so lines can be named.
    body = ",\n".join(json.dumps(r) for r in requests)
    return '{"id": "c", "block_size": 64, "requests": [\n' + body + "\n]}"


@pytest.mark.parametrize(
    ("requests", "field", "problem"),
    [
        (
            [dict(CALL, t=0), dict(CALL, t=9), dict(CALL, t=4)],
            "requests[2].t",
            "request starts at t=4 s, before the previous request (t=9 s)",
        ),
        (
            [
                dict(CALL, t=2),
                {"t": 1, "type": "subagent", "agent_id": "a", "requests": [dict(CALL, t=0)]},
            ],
            "requests[1].t",
            "subagent 'a' starts at t=1 s, before the first request of its parent (t=2 s)",
        ),
        (
            [
                dict(CALL, t=0),
                {
                    "t": 1,
                    "type": "subagent",
                    "agent_id": "a",
                    "requests": [dict(CALL, t=3), dict(CALL, t=2)],
                },
            ],
            "requests[1].requests[1].t",
            "request starts at t=2 s, before the previous request (t=3 s)",
        ),
    ],
    ids=["main chain backwards", "subagent before its parent", "subagent backwards"],
)
def test_an_impossible_claude_code_timeline_is_refused_at_its_path(
    tmp_path: Path, requests: list[dict[str, Any]], field: str, problem: str
) -> None:
    # A whole-document format: the JSON path names the request, as for every other error.
    path = write(tmp_path, claude_text(*requests))
    assert_located(refusal(path), file=path, line=None, problem=f"at {field}: {problem}")


def test_a_repeated_key_in_a_pretty_printed_document_names_the_line_its_object_closes_on(
    tmp_path: Path,
) -> None:
    text = json.dumps({"id": "c", "block_size": 64, "requests": [CALL, CALL]}, indent=1)
    # The second request gets "out" twice; strings holding braces must not shift the count.
    text = text.replace('"id": "c"', '"id": "c}{"', 1)
    second = text.rindex('"out": 10')
    text = text[:second] + '"out": 10,\n   "out": 11' + text[second + len('"out": 10') :]
    closing = text.count("\n", 0, text.index("}", second)) + 1
    path = write(tmp_path, text)
    assert_located(
        refusal(path),
        file=path,
        line=closing,
        problem="the key 'out' appears twice in one object (the one that closes on this line)",
    )
