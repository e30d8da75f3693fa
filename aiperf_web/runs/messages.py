"""The live channel's vocabulary, in one place: every channel-layer group, every message a writer
sends to a group, every message a socket sends to the browser, and the close codes with what
the browser does on each (docs/product.md §5). Writers (runs/publisher.py, sweeps/publisher.py)
and consumers (live/consumers.py, sweeps/consumers.py) build their messages with the
constructors here; the pages' scripts get the browser types and close codes from
`page_vocabulary()` (json_script "vocabulary" in base.html, read by static/js/vocabulary.js),
and tests/web/test_live_messages.py holds the `type` strings the scripts switch on equal to
BROWSER_MESSAGES.

Here and not in `live` because the writers sit in `runs`, below `live` in the import layers
(scripts/import_graph.py): the lowest package that speaks on the channel owns its words.

Groups (channel layer):
  run-<uuid>         a run's viewers          run.snapshot, run.status, run.log
  team-runs-<uuid>   a team's runs lists      runs.changed
  sweep-<uuid>       a sweep's viewers        sweep.changed

Browser messages, all JSON objects with `type`:
  history   once, on connect: the stored samples after `?after=`, the log, the row, the leak
  snapshot  each stored snapshot (with the leak verdict as of it)
  status    the run's row changed
  log       new log lines
  runs      the runs list's changed rows
  sweep     the sweep page, whole, on connect and on each change
  error     a message the socket could not take
  pong      the answer to {"type": "ping"} (tools and tests; the pages do not ping)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, TypedDict
from uuid import UUID

# -- groups ----------------------------------------------------------------------------------


def run_group(run_uuid: str | UUID) -> str:
    return f"run-{run_uuid}"


def team_group(team_uuid: str | UUID) -> str:
    return f"team-runs-{team_uuid}"


def sweep_group(sweep_uuid: str | UUID) -> str:
    return f"sweep-{sweep_uuid}"


# -- what a message carries ------------------------------------------------------------------


class LogLine(TypedDict):
    id: int
    at: str  # ISO 8601, aware
    level: str
    message: str


class RunState(TypedDict):
    """The run's row as the live page's header shows it."""

    status: str  # runs.models.Status, or "deleted"
    reason: str
    started_at: str | None  # ISO 8601, aware
    finished_at: str | None
    cancel_requested: bool


class _LogRow(Protocol):
    id: int
    at: datetime
    level: str
    message: str


def log_line(row: _LogRow) -> LogLine:
    """A stored log line (runs.models.RunLog) as the channel carries it."""
    return {"id": row.id, "at": row.at.isoformat(), "level": row.level, "message": row.message}


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def run_state(
    *,
    status: str,
    reason: str,
    started_at: datetime | None,
    finished_at: datetime | None,
    cancel_requested_at: datetime | None,
) -> RunState:
    return {
        "status": status,
        "reason": reason,
        "started_at": _iso(started_at),
        "finished_at": _iso(finished_at),
        "cancel_requested": cancel_requested_at is not None,
    }


DELETED: RunState = {
    "status": "deleted",
    "reason": "the run was deleted",
    "started_at": None,
    "finished_at": None,
    "cancel_requested": False,
}


def state_of(message: dict[str, Any]) -> RunState:
    """The RunState a status event (or any message spreading one) carries."""
    return {
        "status": message["status"],
        "reason": message["reason"],
        "started_at": message["started_at"],
        "finished_at": message["finished_at"],
        "cancel_requested": message["cancel_requested"],
    }


# -- group messages: a writer to a group's consumers (the type names the consumer's method,
# dots read as underscores) ------------------------------------------------------------------


class RunSnapshotEvent(TypedDict):
    type: Literal["run.snapshot"]
    run_id: str
    seq: int
    t_s: float
    data: dict[str, Any]
    # The leak verdict as of this snapshot (runs/leaks.py LeakSeries.brief), worked out once by the
    # writer for every viewer; None from a writer that keeps no leak series.
    leak: dict[str, Any] | None


class RunStatusEvent(RunState):
    type: Literal["run.status"]
    run_id: str


class RunLogEvent(TypedDict):
    type: Literal["run.log"]
    run_id: str
    lines: list[LogLine]


class RunsChangedEvent(TypedDict):
    type: Literal["runs.changed"]


class SweepChangedEvent(TypedDict):
    type: Literal["sweep.changed"]
    sweep_id: str


def run_snapshot_event(
    *, run_id: str, seq: int, t_s: float, data: dict[str, Any], leak: dict[str, Any] | None
) -> RunSnapshotEvent:
    return {
        "type": "run.snapshot",
        "run_id": run_id,
        "seq": seq,
        "t_s": t_s,
        "data": data,
        "leak": leak,
    }


def run_status_event(*, run_id: str, state: RunState) -> RunStatusEvent:
    return {"type": "run.status", "run_id": run_id, **state}


def run_log_event(*, run_id: str, lines: list[LogLine]) -> RunLogEvent:
    return {"type": "run.log", "run_id": run_id, "lines": lines}


def runs_changed_event() -> RunsChangedEvent:
    return {"type": "runs.changed"}


def sweep_changed_event(*, sweep_id: str) -> SweepChangedEvent:
    return {"type": "sweep.changed", "sweep_id": sweep_id}


GROUP_MESSAGES: dict[str, type] = {
    "run.snapshot": RunSnapshotEvent,
    "run.status": RunStatusEvent,
    "run.log": RunLogEvent,
    "runs.changed": RunsChangedEvent,
    "sweep.changed": SweepChangedEvent,
}


# -- browser messages: a socket to the page --------------------------------------------------


class SnapshotMessage(TypedDict):
    type: Literal["snapshot"]
    run_id: str
    seq: int
    t_s: float
    data: dict[str, Any]
    leak: dict[str, Any] | None  # None: unchanged since the message before


class StatusMessage(RunState):
    type: Literal["status"]
    run_id: str


class LogMessage(TypedDict):
    type: Literal["log"]
    run_id: str
    lines: list[LogLine]


class RunsMessage(TypedDict):
    type: Literal["runs"]
    rows: list[dict[str, Any]]  # live/selectors.py runs_live_rows


class ErrorMessage(TypedDict, total=False):
    type: Literal["error"]
    run_id: str  # on a run's socket
    message: str


class PongMessage(TypedDict, total=False):
    type: Literal["pong"]
    run_id: str  # on a run's socket


def history_message(
    *,
    run_id: str,
    history: dict[str, Any],
    state: RunState,
    leak: dict[str, Any],
    log: list[LogLine],
) -> dict[str, Any]:
    """Once, on connect: live/selectors.py History (samples, latest, last_seq, ...), the row's
    state, the leak verdict and the last log lines."""
    return {"type": "history", "run_id": run_id, **history, **state, "leak": leak, "log": log}


def snapshot_message(
    *, run_id: str, seq: int, t_s: float, data: dict[str, Any], leak: dict[str, Any] | None
) -> SnapshotMessage:
    return {
        "type": "snapshot",
        "run_id": run_id,
        "seq": seq,
        "t_s": t_s,
        "data": data,
        "leak": leak,
    }


def status_message(*, run_id: str, state: RunState) -> StatusMessage:
    return {"type": "status", "run_id": run_id, **state}


def log_message(*, run_id: str, lines: list[LogLine]) -> LogMessage:
    return {"type": "log", "run_id": run_id, "lines": lines}


def runs_message(*, rows: list[dict[str, Any]]) -> RunsMessage:
    return {"type": "runs", "rows": rows}


def sweep_message(page: dict[str, Any]) -> dict[str, Any]:
    """The sweep page whole (sweeps/page.py sweep_page, with its html fragments)."""
    return {**page, "type": "sweep"}


def error_message(message: str, *, run_id: str | None = None) -> ErrorMessage:
    out: ErrorMessage = {"type": "error", "message": message}
    if run_id is not None:
        out["run_id"] = run_id
    return out


def pong_message(*, run_id: str | None = None) -> PongMessage:
    out: PongMessage = {"type": "pong"}
    if run_id is not None:
        out["run_id"] = run_id
    return out


@dataclass(frozen=True, slots=True)
class BrowserMessage:
    type: str
    page_handles: bool  # a page's script acts on it (the rest are for tools and tests)
    sockets: tuple[str, ...]  # which sockets send it: "run", "runs", "sweep"


BROWSER_MESSAGES: tuple[BrowserMessage, ...] = (
    BrowserMessage("history", True, ("run",)),
    BrowserMessage("snapshot", True, ("run",)),
    BrowserMessage("status", True, ("run",)),
    BrowserMessage("log", True, ("run",)),
    BrowserMessage("runs", True, ("runs",)),
    BrowserMessage("sweep", True, ("sweep",)),
    BrowserMessage("error", True, ("run", "runs", "sweep")),
    BrowserMessage("pong", False, ("run", "sweep")),
)
# What a page may send: {"type": "ping"} (answered with pong); anything else gets an error.
PAGE_MESSAGES: tuple[str, ...] = ("ping",)


# -- close codes -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CloseCode:
    code: int
    name: str
    # Final: the browser stops (says "live updates refused") instead of reconnecting, since
    # a new socket would be refused the same way. Any other close (a network blip, a server
    # restart: 1006, 1001, 1011, 1012) is retried with backoff.
    final: bool
    meaning: str


UNAUTHENTICATED = CloseCode(4401, "unauthenticated", True, "not logged in")
NOT_FOUND = CloseCode(
    4404,
    "not_found",
    True,
    "no such run or sweep for this viewer (outside its team looks the same)",
)
# What the server sends when an open socket's viewer lost the right to watch: a logout, a
# revoked membership, a deactivated user. The standard policy-violation code.
ACCESS_REVOKED = CloseCode(1008, "access_revoked", True, "the viewer's access was revoked")

CLOSE_CODES: tuple[CloseCode, ...] = (UNAUTHENTICATED, NOT_FOUND, ACCESS_REVOKED)


def channel_vocabulary() -> dict[str, Any]:
    """The channel's words as the pages' scripts take them (static/js/vocabulary.js)."""
    return {
        "messages": [m.type for m in BROWSER_MESSAGES],
        "close_codes": [
            {"code": c.code, "name": c.name, "final": c.final, "meaning": c.meaning}
            for c in CLOSE_CODES
        ],
    }
