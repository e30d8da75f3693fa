"""Helpers for the trace tests: tiny file writers, located-error checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runner.errors import TraceError


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def assert_located(exc: TraceError, *, file: Path, line: int | None, problem: str) -> None:
    """The message names the file, the line (when given) and the problem."""
    message = str(exc)
    assert message.startswith(str(file)), message
    if line is not None:
        assert exc.line == line, message
        assert f"{file}:{line}" in message, message
    assert problem in message, message
