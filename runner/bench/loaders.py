"""Trace loaders: seconds against input size, per format and per known worst shape.

Generates files of each format at a few sizes (typical content, plus the shapes that used to
be quadratic: Mooncake rows sharing one prefix, a Claude Code session with thousands of
subagents, a dag_jsonl root with a huge fan-out, a chain of sessions each spawning the next)
and times `load_trace` + `inspect_trace` on each, in this process. Linear loaders show a flat
`s_per_mib` across sizes. Figures only; nothing here passes or fails.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from runner.trace import DEFAULT_MAX_BYTES, inspect_trace, load_trace

__all__ = ["SHAPES", "bench_loaders", "generate"]

_MIB = 1 << 20


def _jsonl(rows: Iterator[dict[str, Any]], size: int) -> str:
    out: list[str] = []
    total = 0
    for row in rows:
        line = json.dumps(row, separators=(",", ":")) + "\n"
        out.append(line)
        total += len(line)
        if total >= size:
            break
    return "".join(out)


def _native(size: int) -> str:
    def rows() -> Iterator[dict[str, Any]]:
        i = 0
        while True:
            base = list(range(i * 1000, i * 1000 + 40))
            yield {
                "tree_id": f"t{i}",
                "sessions": [
                    {
                        "id": "main",
                        "turns": [
                            {
                                "input_tokens": 64 * (40 + k),
                                "output_tokens": 200,
                                "hash_ids": base + list(range(900_000, 900_000 + k)),
                                "delay_s": 1.5,
                                **(
                                    {"branches": [{"mode": "spawn", "children": ["sub"]}]}
                                    if k == 0
                                    else {}
                                ),
                            }
                            for k in range(8)
                        ],
                    },
                    {"id": "sub", "turns": [{"input_tokens": 900, "output_tokens": 50}]},
                ],
            }
            i += 1

    return _jsonl(rows(), size)


def _dag_jsonl(size: int) -> str:
    def rows() -> Iterator[dict[str, Any]]:
        i = 0
        words = " ".join(f"w{n}" for n in range(80))
        while True:  # the child first: a file cut after it is still valid
            yield {
                "session_id": f"c{i}",
                "turns": [{"messages": [{"role": "user", "content": "go"}]}],
            }
            yield {
                "session_id": f"r{i}",
                "turns": [
                    {"messages": [{"role": "user", "content": words}], "spawns": [f"c{i}"]},
                    {"messages": [{"role": "user", "content": words}], "max_tokens": 64},
                ],
            }
            i += 1

    return _jsonl(rows(), size)


def _mooncake(size: int) -> str:
    def rows() -> Iterator[dict[str, Any]]:
        i = 0
        while True:  # conversations of four growing turns
            conv = [i * 100 + k for k in range(20)]
            for turn in range(4):
                ids = [0, 1, *conv[: 8 + 4 * turn]]
                yield {
                    "timestamp": i * 10 + turn,
                    "input_length": 512 * len(ids),
                    "output_length": 100,
                    "hash_ids": ids,
                }
            i += 1

    return _jsonl(rows(), size)


def _mooncake_shared_prefix(size: int) -> str:
    # Half the rows are sessions with one shared two-block key, the other half continue them:
    # the old candidate scan over every session with that key, and list.remove, were
    # quadratic in these.
    n = max(1, size // 150)
    rows = [
        {"timestamp": i, "input_length": 1024, "output_length": 10, "hash_ids": [1, 2]}
        for i in range(n)
    ] + [
        {
            "timestamp": n + i,
            "input_length": 1600,
            "output_length": 10,
            "hash_ids": [1, 2, 3 + i, 10**7 + i],
        }
        for i in range(n)
    ]
    return _jsonl(iter(rows), size)


def _claude_code(size: int, *, subagents: bool = False) -> str:
    requests: list[dict[str, Any]] = []
    total = 0
    i = 0
    while total < size:
        if subagents:
            entry: dict[str, Any] = {
                "t": 1 + i * 0.001,
                "type": "subagent",
                "agent_id": f"a{i}",
                "requests": [{"t": 0, "type": "n", "in": 5, "out": 1, "api_time": 0.5}],
            }
        else:
            entry = {
                "t": i * 2.0,
                "type": "n",
                "in": 64 * 30 + 10,
                "out": 300,
                "hash_ids": [*range(30), 1000 + i],
                "api_time": 1.5,
            }
        requests.append(entry)
        total += len(json.dumps(entry)) + 1
        i += 1
    if subagents:
        requests.insert(0, {"t": 0, "type": "n", "in": 10, "out": 1, "api_time": 1.0})
    return json.dumps({"id": "bench", "block_size": 64, "requests": requests})


def _azure(size: int) -> str:
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens\n"]
    total = 0
    i = 0
    while total < size:
        stamp = f"2023-11-16 18:{i // 3600 % 60:02d}:{i % 60:02d}.{i % 1000:03d}0000"
        line = f"{stamp},{1000 + i % 500},{i % 300}\n"
        lines.append(line)
        total += len(line)
        i += 1
    return "".join(lines)


def _dag_fanout(size: int) -> str:
    n = max(1, size // 80)
    root = {
        "session_id": "r",
        "turns": [
            {"messages": [{"role": "user", "content": "hi"}], "spawns": [f"c{i}" for i in range(n)]}
        ],
    }
    children = (
        {"session_id": f"c{i}", "turns": [{"messages": [{"role": "user", "content": "x"}]}]}
        for i in range(n)
    )
    return json.dumps(root) + "\n" + _jsonl(children, size)


def _dag_chain(size: int) -> str:
    def rows() -> Iterator[dict[str, Any]]:
        i = 0
        while True:
            yield {
                "session_id": f"s{i}",
                "turns": [
                    {"messages": [{"role": "user", "content": "x"}], "spawns": [f"s{i + 1}"]}
                ],
            }
            i += 1

    text = _jsonl(rows(), size)
    last = text.count("\n")
    return (
        text
        + json.dumps(
            {"session_id": f"s{last}", "turns": [{"messages": [{"role": "user", "content": "x"}]}]}
        )
        + "\n"
    )


SHAPES: dict[str, Callable[[int], str]] = {
    "native": _native,
    "dag_jsonl": _dag_jsonl,
    "claude_code": _claude_code,
    "mooncake": _mooncake,
    "azure_csv": _azure,
    "mooncake_shared_prefix": _mooncake_shared_prefix,
    "claude_code_subagents": lambda size: _claude_code(size, subagents=True),
    "dag_jsonl_fanout": _dag_fanout,
    "dag_jsonl_chain": _dag_chain,
}


def generate(shape: str, size_bytes: int) -> str:
    """A trace of about `size_bytes` bytes in the named shape."""
    return SHAPES[shape](size_bytes)


def bench_loaders(
    sizes_mib: Sequence[float] = (1, 4, 16), shapes: Sequence[str] | None = None
) -> dict[str, Any]:
    """{shape: {"sizes": [{"mib", "requests", "s", "s_per_mib"}, ...]}}: load + inspect time."""
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="aiperf-bench-loaders-") as tmp:
        for shape in shapes or SHAPES:
            rows = []
            for mib in sizes_mib:
                path = Path(tmp) / f"{shape}.trace"
                path.write_text(generate(shape, int(mib * _MIB)))
                actual_mib = path.stat().st_size / _MIB
                # Sizes past the upload limit are measured too: linearity is the question.
                size = path.stat().st_size
                started = time.perf_counter()
                stats = inspect_trace(load_trace(path, max_bytes=max(size, DEFAULT_MAX_BYTES)))
                elapsed = time.perf_counter() - started
                rows.append(
                    {
                        "mib": round(actual_mib, 2),
                        "requests": stats["requests"],
                        "s": round(elapsed, 3),
                        "s_per_mib": round(elapsed / actual_mib, 3),
                    }
                )
                path.unlink()
            result[shape] = {"sizes": rows}
    return result
