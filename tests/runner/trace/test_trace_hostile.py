"""Hostile trace files, generated: every loader answers with statistics or one clean line.

The contract (docs/product.md §6, §8): `python -m runner inspect FILE --json` exits 0 with one
strict JSON object, or exits 2 with exactly one line on stderr that names the file; never a
traceback, never exit 1. Each class of attack from issue 9 gets a property: nesting, deep
trees, magnitudes, NaN/Infinity, lone surrogates, long fields, fan-out, special files.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from runner.cli import main
from runner.trace import DEFAULT_MAX_BYTES
from runner.trace.limits import MAX_JSON_DEPTH, MAX_SECONDS, MAX_TOKENS

ROOT = Path(__file__).resolve().parents[3]
# No example database: the tests leave nothing behind in the working tree.
FAST = settings(
    max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)

# One valid record per format, as (file text builder, the numeric fields a value may replace).
NATIVE_TURN = {"input_tokens": 100, "output_tokens": 10, "t_s": 1.0, "duration_s": 2.0}
CLAUDE_CALL = {"t": 0.5, "type": "n", "in": 100, "out": 10, "api_time": 1.0}


def native(turn: dict[str, Any] | None = None, **tree: Any) -> str:
    doc = {"tree_id": "t", "sessions": [{"id": "r", "turns": [turn or NATIVE_TURN]}], **tree}
    return json.dumps(doc) + "\n"


def dag(turn: dict[str, Any] | None = None, **conv: Any) -> str:
    doc = {
        "session_id": "r",
        "turns": [turn or {"messages": [{"role": "user", "content": "hi there"}]}],
        **conv,
    }
    return json.dumps(doc) + "\n"


def claude(call: dict[str, Any] | None = None, **doc: Any) -> str:
    return json.dumps({"id": "c", "block_size": 64, "requests": [call or CLAUDE_CALL], **doc})


def mooncake(**row: Any) -> str:
    base = {"timestamp": 0, "input_length": 600, "output_length": 10, "hash_ids": [1, 2]}
    return json.dumps({**base, **row}) + "\n"


def azure(timestamp: str = "2023-11-16 18:15:46.5", context: str = "100", out: str = "10") -> str:
    return f"TIMESTAMP,ContextTokens,GeneratedTokens\n{timestamp},{context},{out}\n"


@contextlib.contextmanager
def trace_file(text: str, name: str = "trace") -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(text, encoding="utf-8")
        yield path


def inspect(path: Path | str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `python -m runner inspect PATH --json`, in process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["inspect", str(path), "--json"])
    return code, out.getvalue(), err.getvalue()


def strict_json(text: str) -> Any:
    def refuse(constant: str) -> Any:
        raise AssertionError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def assert_contract(path: Path | str, code: int, out: str, err: str) -> dict[str, Any] | str:
    """Statistics (exit 0) or the one error line (exit 2); anything else fails the test."""
    assert code in (0, 2), (code, err)
    if code == 0:
        stats = strict_json(out)
        assert isinstance(stats, dict)
        return stats
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith(f"error: {path}"), err
    assert "Traceback" not in err
    assert len(err) < 1000, err
    return err


def check(text: str, name: str = "trace") -> dict[str, Any] | str:
    with trace_file(text, name) as path:
        return assert_contract(path, *inspect(path))


def nested(depth: int, leaf: str = "1") -> str:
    kinds = ["[", '{"k":']
    opens = "".join(kinds[i % 2] for i in range(depth))
    closes = "".join("]" if i % 2 == 0 else "}" for i in reversed(range(depth)))
    return opens + leaf + closes


# ------------------------------------------------------------------------------ nesting

DEEP_PLACES = [
    lambda v: native().replace('"t_s": 1.0', f'"t_s": {v}'),
    lambda v: native().replace('"sessions"', f'"extra": {v}, "sessions"'),
    lambda v: dag().replace('"content": "hi there"', f'"content": {v}'),
    lambda v: dag({"messages": [{"role": "user", "content": "x"}], "extra": {"deep": 0}}).replace(
        '{"deep": 0}', v
    ),
    lambda v: claude().replace('"id"', f'"junk": {v}, "id"'),
    lambda v: mooncake().replace('"hash_ids"', f'"x": {v}, "hash_ids"'),
]


@FAST
@given(
    place=st.sampled_from(range(len(DEEP_PLACES))),
    depth=st.integers(min_value=MAX_JSON_DEPTH - 8, max_value=3000),
)
def test_deep_nesting_is_refused_past_the_limit_and_never_recurses(place: int, depth: int) -> None:
    result = check(DEEP_PLACES[place](nested(depth)))
    # The records themselves add a few levels, so past the limit it must be refused by name.
    if depth > MAX_JSON_DEPTH:
        assert isinstance(result, str) and f"more than {MAX_JSON_DEPTH} levels" in result


def test_a_deep_file_gives_one_line_through_the_real_command_too() -> None:
    with trace_file(claude().replace('"id"', f'"junk": {nested(5000)}, "id"')) as path:
        done = subprocess.run(
            [sys.executable, "-m", "runner", "inspect", str(path), "--json"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "levels deep" in done.stderr


# ---------------------------------------------------------------------------- deep trees


@settings(max_examples=8, deadline=None, database=None)
@given(length=st.integers(min_value=1, max_value=6000), fmt=st.sampled_from(["dag", "native"]))
@example(length=6000, fmt="dag")  # deeper than hypothesis raises the recursion limit
@example(length=6000, fmt="native")
def test_a_chain_of_sessions_each_spawning_the_next_loads_at_any_depth(
    length: int, fmt: str
) -> None:
    if fmt == "dag":
        text = "".join(
            json.dumps(
                {
                    "session_id": f"s{i}",
                    "turns": [
                        {"messages": [{"role": "user", "content": "x"}]}
                        | ({"spawns": [f"s{i + 1}"]} if i + 1 < length else {})
                    ],
                }
            )
            + "\n"
            for i in range(length)
        )
    else:
        sessions = [
            {
                "id": f"s{i}",
                "turns": [
                    {"input_tokens": 1, "output_tokens": 1}
                    | (
                        {"branches": [{"mode": "spawn", "children": [f"s{i + 1}"]}]}
                        if i + 1 < length
                        else {}
                    )
                ],
            }
            for i in range(length)
        ]
        text = json.dumps({"tree_id": "t", "sessions": sessions}) + "\n"
    stats = check(text)
    assert isinstance(stats, dict), stats
    assert (stats["sessions"], stats["max_depth"]) == (length, length - 1)


@settings(max_examples=5, deadline=None, database=None)
@given(children=st.integers(min_value=1, max_value=20_000))
def test_a_root_with_a_huge_fan_out_loads(children: int) -> None:
    ids = [f"c{i}" for i in range(children)]
    text = dag({"messages": [{"role": "user", "content": "go"}], "spawns": ids}, session_id="r")
    text += "".join(
        json.dumps({"session_id": c, "turns": [{"messages": [{"role": "user", "content": "x"}]}]})
        + "\n"
        for c in ids
    )
    stats = check(text)
    assert isinstance(stats, dict), stats
    assert stats["spawn_children"] == children


# ---------------------------------------------------------------------- magnitudes, NaN

NUMBERS = st.one_of(
    st.integers(min_value=-(10**40), max_value=10**40),
    st.sampled_from(["1" + "0" * 309, "1" * 5000, "1e309", "-1e400", "4.5e-400", "0.0"]),
    st.sampled_from(["NaN", "Infinity", "-Infinity"]),
    st.floats(allow_nan=False, allow_infinity=False),
).map(str)

NUMERIC_PLACES = {
    "native input_tokens": lambda v: native().replace(
        '"input_tokens": 100', f'"input_tokens": {v}'
    ),
    "native t_s": lambda v: native().replace('"t_s": 1.0', f'"t_s": {v}'),
    "native block_size": lambda v: native(block_size=0).replace(
        '"block_size": 0', f'"block_size": {v}'
    ),
    "dag max_tokens": lambda v: dag(
        {"messages": [{"role": "user", "content": "a"}], "max_tokens": 0}
    ).replace('"max_tokens": 0', f'"max_tokens": {v}'),
    "dag delay": lambda v: dag(
        {"messages": [{"role": "user", "content": "a"}], "delay": 0}
    ).replace('"delay": 0', f'"delay": {v}'),
    "claude t": lambda v: claude().replace('"t": 0.5', f'"t": {v}'),
    "claude in": lambda v: claude().replace('"in": 100', f'"in": {v}'),
    "claude block_size": lambda v: claude().replace('"block_size": 64', f'"block_size": {v}'),
    "mooncake timestamp": lambda v: mooncake().replace('"timestamp": 0', f'"timestamp": {v}'),
    "mooncake input_length": lambda v: mooncake().replace(
        '"input_length": 600', f'"input_length": {v}'
    ),
    "azure context": lambda v: azure(context=v),
    "azure fraction": lambda v: azure(timestamp=f"2023-11-16 18:15:46.{v}"),
}


@settings(max_examples=60, deadline=None, database=None)
@given(place=st.sampled_from(sorted(NUMERIC_PLACES)), value=NUMBERS)
def test_any_number_in_any_numeric_field_loads_within_limits_or_is_refused(
    place: str, value: str
) -> None:
    result = check(NUMERIC_PLACES[place](value))
    if isinstance(result, dict):
        # Whatever loaded stays inside the documented limits, so every figure is finite.
        assert result["input_tokens"]["max"] <= MAX_TOKENS
        assert result["span_s"] <= 10 * MAX_SECONDS
    elif value in ("NaN", "Infinity", "-Infinity", "1e309", "-1e400"):
        assert "not finite" in result or "bad TIMESTAMP" in result or "bad ContextTokens" in result


@pytest.mark.parametrize(
    "text",
    [
        native(dict(NATIVE_TURN, t_s="Infinity")).replace('"Infinity"', "Infinity"),
        mooncake(timestamp=0).replace('"timestamp": 0', '"timestamp": Infinity'),
        dag({"messages": [{"role": "user", "content": "a"}], "delay": 1}).replace("1}", "NaN}"),
        claude(dict(CLAUDE_CALL, api_time=1)).replace('"api_time": 1', '"api_time": Infinity'),
        azure(timestamp="2023-11-16 18:15:46.5e400"),
    ],
    ids=["native t_s", "mooncake timestamp", "dag delay", "claude api_time", "azure fraction"],
)
def test_infinity_and_nan_are_refused_in_every_format(text: str) -> None:
    result = check(text)
    assert isinstance(result, str), "a non-finite time was accepted"


# --------------------------------------------------------------------- strings, surrogates

SURROGATE = st.integers(min_value=0xD800, max_value=0xDFFF).map(lambda c: f"\\u{c:04x}")
STRING_PLACES = {
    "dag content": lambda s: dag().replace("hi there", s),
    "dag session_id": lambda s: dag().replace('"session_id": "r"', f'"session_id": "{s}"'),
    "native id": lambda s: native().replace('"id": "r"', f'"id": "{s}"'),
    "claude id": lambda s: claude().replace('"id": "c"', f'"id": "{s}"'),
    "claude type": lambda s: claude().replace('"type": "n"', f'"type": "{s}"'),
}
JSON_STRING_BODY = st.text(max_size=60).map(lambda s: json.dumps(s)[1:-1])


@FAST
@given(place=st.sampled_from(sorted(STRING_PLACES)), before=JSON_STRING_BODY, lone=SURROGATE)
def test_a_lone_surrogate_anywhere_is_refused(place: str, before: str, lone: str) -> None:
    result = check(STRING_PLACES[place](before + lone))
    if place != "claude type":  # a bad type is refused for its value before its text
        assert isinstance(result, str) and "surrogate" in result


@FAST
@given(
    place=st.sampled_from(sorted(STRING_PLACES)), body=JSON_STRING_BODY, repeat=st.integers(1, 2000)
)
def test_any_string_value_gives_one_short_line_or_loads(place: str, body: str, repeat: int) -> None:
    check(STRING_PLACES[place](body * repeat))


@settings(max_examples=6, deadline=None, database=None)
@given(length=st.integers(min_value=131_000, max_value=400_000), column=st.integers(0, 2))
def test_an_overlong_csv_field_is_refused_with_the_limit(length: int, column: int) -> None:
    cells = ["2023-11-16 18:15:46.5", "100", "10"]
    cells[column] = '"' + "1" * length + '"'
    result = check("TIMESTAMP,ContextTokens,GeneratedTokens\n" + ",".join(cells) + "\n")
    assert isinstance(result, str)
    if length > 131_072:
        assert "131072" in result or "131,072" in result


# ------------------------------------------------------------------------------- fuzzing

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
KEYS = {
    "native": ["tree_id", "sessions", "block_size", "timestamped", "version"],
    "dag": ["session_id", "turns", "pre_session_spawns", "context_mode"],
    "claude": ["id", "block_size", "requests", "hash_id_scope"],
    "mooncake": ["timestamp", "input_length", "output_length", "hash_ids"],
}
BASES = {"native": native(), "dag": dag(), "claude": claude(), "mooncake": mooncake()}


@settings(max_examples=80, deadline=None, database=None)
@given(fmt=st.sampled_from(sorted(KEYS)), data=st.data())
def test_records_with_any_values_under_known_keys_load_or_give_one_line(
    fmt: str, data: st.DataObject
) -> None:
    doc = json.loads(BASES[fmt].splitlines()[0] if fmt != "claude" else BASES[fmt])
    for key in data.draw(st.lists(st.sampled_from(KEYS[fmt]), max_size=3)):
        doc[key] = data.draw(JSON_VALUES)
    text = json.dumps(doc)
    check(text if fmt == "claude" else text + "\n")


@FAST
@given(text=st.text(max_size=300))
def test_arbitrary_text_loads_or_gives_one_line(text: str) -> None:
    check(text)


# -------------------------------------------------------------------------- special files


def test_special_files_are_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    sock_path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    try:
        for path, kind in [
            (fifo, "FIFO"),
            (sock_path, "socket"),
            (tmp_path, "directory"),
            (Path("/dev/zero"), "device"),
        ]:
            code, out, err = inspect(path)
            assert assert_contract(path, code, out, err) == err and kind in err
    finally:
        server.close()


def test_a_fifo_does_not_hang_the_real_command(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done = subprocess.run(
        [sys.executable, "-m", "runner", "inspect", str(fifo)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "FIFO" in done.stderr and done.stderr.count("\n") == 1


def test_a_file_over_the_upload_limit_is_refused_by_size(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    with path.open("w") as f:
        f.truncate(DEFAULT_MAX_BYTES + 1)
    code, out, err = inspect(path)
    assert assert_contract(path, code, out, err) == err and "limit" in err


# -------------------------------------------------------------------------------- simulate


@pytest.mark.parametrize(
    "text",
    [
        native(dict(NATIVE_TURN, input_tokens=10**12)),
        native(block_size=10**9),
        mooncake(input_length=10**309),
        claude().replace('"id"', f'"junk": {nested(2000)}, "id"'),
    ],
    ids=["tokens", "block size", "huge number", "nesting"],
)
def test_simulate_refuses_hostile_traces_with_exit_2(text: str) -> None:
    with trace_file(text) as path:
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["simulate", "--trace", str(path), "--duration", "5", "--json"])
    assert code == 2 and err.getvalue().count("\n") == 1


def test_a_file_name_holding_a_line_break_still_gives_one_line(tmp_path: Path) -> None:
    path = tmp_path / "two\nlines.jsonl"
    path.write_text('{"tree_id": 5}\n')
    code, _, err = inspect(path)
    assert code == 2 and err.count("\n") == 1 and "two\\nlines.jsonl" in err
