"""The producer side of the live channel: what a run's viewers hear, sent to the run's group on
the channel layer as it happens (docs/product.md §5):

  run.snapshot {run_id, seq, t_s, data}                        each stored snapshot (throttled)
  run.status   {run_id, status, reason, started_at, finished_at, cancel_requested}
                                                               each change of the run's row
  run.log      {run_id, lines: [{id, at, level, message}]}     each stored log line

and to the run's team's group (`team_group(team_id)`), for the runs-list sockets:

  runs.changed {}                                              a run of the team was launched,
                                                               changed status or stored a snapshot

The consumers (aiperf_web/live/consumers.py) subscribe to these groups and forward (the runs
list re-reads its rows when nudged, at most every LIST_POLL_S); they never poll for these.
Every message is sent after the row or sample it describes is stored, and a late joiner reads
the stored state first (same seq numbers, same log ids), so a lost message costs only
freshness. Publishing is best effort: it never fails the write."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from aiperf_web.runs.models import RunLog

log = logging.getLogger(__name__)


class LogLine(TypedDict):
    id: int
    at: str  # ISO 8601, aware
    level: str
    message: str


class RunState(TypedDict):
    """The run's row as the live page's header shows it."""

    status: str
    reason: str
    started_at: str | None  # ISO 8601, aware
    finished_at: str | None
    cancel_requested: bool


def run_group(run_uuid: str) -> str:
    return f"run-{run_uuid}"


def team_group(team_uuid: str) -> str:
    return f"team-runs-{team_uuid}"


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def log_line(row: RunLog) -> LogLine:
    return {"id": row.id, "at": row.at.isoformat(), "level": row.level, "message": row.message}


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


def _send(group: str, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group, message)
    except Exception:
        # The row or sample is stored: a viewer catches up from it on its next look.
        log.warning("%s: live publish (%s) failed", group, message["type"], exc_info=True)


def publish_snapshot(
    *, run_uuid: str, seq: int, t_s: float, data: dict[str, Any], team_uuid: str | None = None
) -> None:
    """The snapshot to the run's viewers; with `team_uuid`, a nudge to the team's runs lists
    (its progress and leak flag moved)."""
    message = {"type": "run.snapshot", "run_id": run_uuid, "seq": seq, "t_s": t_s, "data": data}
    _send(run_group(run_uuid), message)
    if team_uuid is not None:
        publish_runs_changed(team_uuid=team_uuid)


def publish_status(*, run_uuid: str, state: RunState) -> None:
    _send(run_group(run_uuid), {"type": "run.status", "run_id": run_uuid, **state})


def publish_log(*, run_uuid: str, lines: list[LogLine]) -> None:
    if lines:
        _send(run_group(run_uuid), {"type": "run.log", "run_id": run_uuid, "lines": lines})


def publish_runs_changed(*, team_uuid: str) -> None:
    _send(team_group(team_uuid), {"type": "runs.changed"})
