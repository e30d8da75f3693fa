"""The one entry point from a trace file to a `Trace`: size check, format detection, dispatch.

Owns reading a file safely (regular files only, size limit, UTF-8) and telling its format from
its content — the first line's shape, not its extension — then handing the text to that
format's loader. It never interprets records itself.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from runner.errors import SpecError, TraceError
from runner.trace.azure_csv import load_azure_csv
from runner.trace.claude_code import load_claude_code
from runner.trace.dag_jsonl import load_dag_jsonl
from runner.trace.jsontext import json_too_deep, parse_json
from runner.trace.limits import MAX_BLOCK_SIZE, MAX_JSON_DEPTH, shown
from runner.trace.model import Trace, TraceFormat
from runner.trace.mooncake import load_mooncake
from runner.trace.native import load_native

__all__ = [
    "DEFAULT_MAX_BYTES",
    "FILE_FORMATS",
    "detect_format",
    "load_trace",
    "parse_trace",
    "read_trace_text",
]

# The largest trace accepted, by default (files and uploads alike): every loader reads a file
# this size in well under 5 s and 2 GiB (`python -m runner bench loaders`).
DEFAULT_MAX_BYTES = 8 * 1024 * 1024

# Formats a file can hold (SYNTHETIC traces are generated, never read).
FILE_FORMATS = (
    TraceFormat.NATIVE,
    TraceFormat.DAG_JSONL,
    TraceFormat.CLAUDE_CODE,
    TraceFormat.MOONCAKE,
    TraceFormat.AZURE_CSV,
)

_LOADERS: dict[TraceFormat, Callable[..., Trace]] = {
    TraceFormat.NATIVE: load_native,
    TraceFormat.DAG_JSONL: load_dag_jsonl,
    TraceFormat.CLAUDE_CODE: load_claude_code,
    TraceFormat.MOONCAKE: load_mooncake,
    TraceFormat.AZURE_CSV: load_azure_csv,
}

_FORMAT_NAMES = ", ".join(f.value for f in FILE_FORMATS)
_KEY = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)"\s*:')
_FILE_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


def _size(n: int) -> str:
    if n < 2**20:
        return f"{n:,} bytes"
    return f"{n / 2**20:.1f} MiB" if n % 2**20 else f"{n // 2**20} MiB"


def read_trace_text(path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """The file's text, refusing anything but a regular file of at most `max_bytes`.

    The file is opened without blocking and judged by the open descriptor, so a FIFO cannot
    hang the reader and a file swapped after a check is still the one judged; at most
    `max_bytes + 1` bytes are ever read (a file growing meanwhile, or /proc files that report
    size 0).
    """
    source = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise TraceError("no such file", source=source, fix="check the path") from None
    except OSError as exc:
        reason = "is a socket, not a trace file" if exc.errno == errno.ENXIO else None
        raise TraceError(
            reason or f"cannot read the file ({exc.strerror or exc})", source=source
        ) from None
    try:
        info = os.fstat(fd)
        kind = stat.S_IFMT(info.st_mode)
        if kind != stat.S_IFREG:
            raise TraceError(
                f"is {_FILE_KINDS.get(kind, 'not a regular file')}, not a trace file",
                source=source,
                fix="traces are regular files",
            )
        too_big = TraceError(
            (f"the file is {_size(info.st_size)}, " if info.st_size > max_bytes else "the file is ")
            + f"over the {_size(max_bytes)} limit",
            source=source,
            fix="split the trace, or raise the size limit",
        )
        if info.st_size > max_bytes:
            raise too_big
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise TraceError(f"cannot read the file ({exc.strerror or exc})", source=source) from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise too_big
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise TraceError(
            f"not UTF-8 text (byte {exc.start})",
            source=source,
            line=line,
            fix="traces are UTF-8 JSON or CSV text",
        ) from None


def _as_format(value: TraceFormat | str) -> TraceFormat:
    if isinstance(value, TraceFormat):
        fmt = value
    else:
        try:
            fmt = TraceFormat(value)
        except ValueError:
            raise SpecError(
                f"unknown trace format {shown(value)}: use one of {_FORMAT_NAMES}"
            ) from None
    if fmt not in _LOADERS:
        raise SpecError(f"{fmt.value} traces are generated, not read from a file")
    return fmt


def _sniff(text: str, *, source: str) -> TraceFormat:
    stripped = text.lstrip()
    if not stripped:
        raise TraceError("the file is empty", source=source, fix="a trace needs records")
    first = stripped.split("\n", 1)[0].strip()
    header = first.lower().replace(" ", "")
    if "timestamp" in header and "contexttokens" in header:
        return TraceFormat.AZURE_CSV
    if not first.startswith("{"):
        raise TraceError(
            "cannot tell the trace format from its content",
            source=source,
            line=text[: len(text) - len(stripped)].count("\n") + 1,
            fix=f"pass --format (one of {_FORMAT_NAMES})",
        )
    obj = _try_json(first)
    if obj is None and "\n" in stripped.rstrip():
        # Not one object per line: maybe one pretty-printed document (a Claude Code trace).
        obj = _try_json(text)
    # Unparseable (typically a cut-off file): judge by the keys its head spells out, and let
    # that format's loader report exactly where the JSON breaks.
    keys = set(obj) if isinstance(obj, dict) else set(_KEY.findall(stripped[:65536]))
    if "sessions" in keys and "tree_id" in keys:
        return TraceFormat.NATIVE
    if "session_id" in keys and "turns" in keys:
        return TraceFormat.DAG_JSONL
    if "requests" in keys:
        return TraceFormat.CLAUDE_CODE
    if keys & {"input_length", "output_length"}:
        return TraceFormat.MOONCAKE
    if json_too_deep(first):
        raise TraceError(
            f"JSON nested more than {MAX_JSON_DEPTH} levels deep (the limit)",
            source=source,
            line=1,
            fix="flatten the value; trace records need about 10 levels",
        )
    raise TraceError(
        "cannot tell the trace format from its content"
        + (f" (keys {shown(sorted(keys)[:6])})" if keys else ""),
        source=source,
        line=1,
        fix=f"check the file is complete, or pass --format: one of {_FORMAT_NAMES}",
    )


def _try_json(text: str) -> Any:
    """The parsed value, or None for anything the loader itself should judge and locate
    (invalid, too deep, not finite)."""
    if json_too_deep(text):
        return None
    try:
        return parse_json(text, source="", check_depth=False)
    except TraceError:
        return None


def detect_format(path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES) -> TraceFormat:
    """The format of a trace file, told from its content."""
    return _sniff(read_trace_text(path, max_bytes=max_bytes), source=str(path))


def parse_trace(
    text: str,
    *,
    source: str,
    format: TraceFormat | str | None = None,
    block_size: int | None = None,
) -> Trace:
    """A Trace from text already in memory (an upload); `source` names it in errors.

    `block_size` overrides the tokens per hash id of formats that do not record it (Mooncake).
    """
    fmt = _sniff(text, source=source) if format is None else _as_format(format)
    if block_size is not None and not 0 < block_size <= MAX_BLOCK_SIZE:
        raise SpecError(f"block size must be 1..{MAX_BLOCK_SIZE}, got {block_size}")
    with _no_gc():
        if fmt is TraceFormat.MOONCAKE and block_size is not None:
            return load_mooncake(text, source=source, block_size=block_size)
        return _LOADERS[fmt](text, source=source)


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """The cyclic collector paused while a loader builds its (acyclic) objects: its passes
    over a growing heap cost a third of the load time of a large file."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load_trace(
    path: str | Path,
    *,
    format: TraceFormat | str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    block_size: int | None = None,
) -> Trace:
    """Load a trace file of any supported format (detected from its content when not given).

    Every problem is a TraceError naming the file, the line or JSON path, and the fix.
    """
    if format is not None:
        format = _as_format(format)
    text = read_trace_text(path, max_bytes=max_bytes)
    return parse_trace(text, source=str(path), format=format, block_size=block_size)
