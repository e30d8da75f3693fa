"""The engine's one exception hierarchy.

    RunnerError            anything the engine reports deliberately (CLI exit 1)
    └── BadInput           the user's input is wrong and they can fix it (CLI exit 2)
        ├── TraceError     a trace file is malformed: names file, line or JSON path, and the fix
        └── SpecError      an option or run specification is invalid
    Stopped                a stop arrived while a run was being prepared (workload generation,
                           preflight); `run`/`run_async` turn it into a `cancelled` result, so
                           it never leaves the engine's face

Messages are one line, written for the person who ran the command: what, where, how to fix.
"""

from __future__ import annotations

import enum

__all__ = [
    "ERROR_CATEGORIES",
    "BadInput",
    "ErrorCategory",
    "RunnerError",
    "SpecError",
    "Stopped",
    "TraceError",
]


class RunnerError(Exception):
    """An error the engine reports with a clear message instead of a traceback."""


class BadInput(RunnerError):
    """Bad user input (a file, an option): exit code 2."""


class Stopped(Exception):
    """The run's stop was set before the run began; the message says where it was met
    ("while generating the synthetic workload, at tree 3 of 2,000"). Not a RunnerError: nothing
    went wrong."""


class SpecError(BadInput):
    """An invalid option or run specification. `fields` maps each bad field (a dotted path
    such as `target.url`) to its message, for forms that show errors next to the field."""

    def __init__(self, message: str, *, fields: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.fields = dict(fields or {})


# Every character str.splitlines breaks at, shown escaped instead.
_LINE_BREAKS = {c: repr(chr(c))[1:-1] for c in (10, 11, 12, 13, 28, 29, 30, 0x85, 0x2028, 0x2029)}


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
        # One line, always: a file name or a value from the file may hold a line break.
        super().__init__(message.translate(_LINE_BREAKS))


class ErrorCategory(enum.StrEnum):
    """Why a request failed (docs/product.md §4.6, plus §4.4's worker_lost): the one
    classification the client, the records, the metrics and the service share. A StrEnum:
    it compares equal to, and serializes as, its value."""

    CONNECT = "connect"  # no connection: refused, unresolvable, TLS failure, connect timeout
    TIMEOUT = "timeout"  # connected, but no data within the read timeout, or over total/pool
    HTTP_4XX = "http_4xx"
    HTTP_429 = "http_429"
    HTTP_5XX = "http_5xx"
    STREAM_BROKEN = "stream_broken"  # dropped mid-answer, or ended without [DONE]/finish
    BAD_PAYLOAD = "bad_payload"  # unparseable or non-OpenAI answer, or an error payload
    CANCELLED = "cancelled"  # the caller cancelled the task
    WORKER_LOST = "worker_lost"  # the client worker holding the session was lost


ERROR_CATEGORIES: tuple[ErrorCategory, ...] = tuple(ErrorCategory)
