"""The producer side of the live channel: what a run's viewers hear, sent to the run's group on
the channel layer as it happens, and a nudge to the run's team's group for the runs lists. The
groups and messages are declared in runs/messages.py (docs/product.md §5); this module sends
them.

The consumers (aiperf_web/live/consumers.py) subscribe to these groups and forward (the runs
list re-reads its rows when nudged, at most every LIST_POLL_S); they never poll for these.
Every message is sent after the row or sample it describes is stored, and a late joiner reads
the stored state first (same seq numbers, same log ids), so a lost message costs only
freshness. Publishing is best effort: it never fails the write."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from aiperf_web.runs.messages import (
    LogLine,
    RunState,
    log_line,
    run_group,
    run_log_event,
    run_snapshot_event,
    run_state,
    run_status_event,
    runs_changed_event,
    team_group,
)

__all__ = [
    "LogLine",
    "RunState",
    "log_line",
    "publish_log",
    "publish_runs_changed",
    "publish_snapshot",
    "publish_status",
    "run_state",
]

log = logging.getLogger(__name__)


def _send(group: str, message: Mapping[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group, dict(message))
    except Exception:
        # The row or sample is stored: a viewer catches up from it on its next look.
        log.warning("%s: live publish (%s) failed", group, message["type"], exc_info=True)


def publish_snapshot(
    *,
    run_uuid: str,
    seq: int,
    t_s: float,
    data: dict[str, Any],
    leak: dict[str, Any] | None = None,
    team_uuid: str | None = None,
) -> None:
    """The snapshot to the run's viewers, with the leak verdict as of it when the writer keeps
    the series (runs/sink.py does: one verdict for every viewer); with `team_uuid`, a nudge to
    the team's runs lists (its progress and leak flag moved)."""
    event = run_snapshot_event(run_id=run_uuid, seq=seq, t_s=t_s, data=data, leak=leak)
    _send(run_group(run_uuid), event)
    if team_uuid is not None:
        publish_runs_changed(team_uuid=team_uuid)


def publish_status(*, run_uuid: str, state: RunState) -> None:
    _send(run_group(run_uuid), run_status_event(run_id=run_uuid, state=state))


def publish_log(*, run_uuid: str, lines: list[LogLine]) -> None:
    if lines:
        _send(run_group(run_uuid), run_log_event(run_id=run_uuid, lines=lines))


def publish_runs_changed(*, team_uuid: str) -> None:
    _send(team_group(team_uuid), runs_changed_event())
