"""The engine's one exception hierarchy.

    RunnerError            anything the engine reports deliberately (CLI exit 1)
    └── BadInput           the user's input is wrong and they can fix it (CLI exit 2)
        ├── TraceError     a trace file is malformed: names file, line or JSON path, and the fix
        └── SpecError      an option or run specification is invalid

Messages are one line, written for the person who ran the command: what, where, how to fix.
"""

from __future__ import annotations

__all__ = ["BadInput", "RunnerError", "SpecError", "TraceError"]


class RunnerError(Exception):
    """An error the engine reports with a clear message instead of a traceback."""


class BadInput(RunnerError):
    """Bad user input (a file, an option): exit code 2."""


class SpecError(BadInput):
    """An invalid option or run specification."""


class TraceError(BadInput):
    """A malformed trace file, located by file and line (or JSON path)."""

    def __init__(
        self,
        problem: str,
        *,
        source: str,
        line: int | None = None,
        path: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.problem = problem
        self.source = source
        self.line = line
        self.path = path
        self.fix = fix
        where = source
        if line is not None:
            where += f":{line}"
        if path:
            where += f" at {path}"
        message = f"{where}: {problem}"
        if fix:
            message += f" ({fix})"
        super().__init__(message)
