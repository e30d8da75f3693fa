"""WebSocket consumers: one run's live feed (`/ws/runs/{id}/`) and the runs list (`/ws/runs/`).

Thin interfaces over live.selectors and runs.selectors. The groups, the messages and the close
codes are declared in runs/messages.py: both refuse anonymous users (UNAUTHENTICATED) and, for
a run, anyone outside its team (NOT_FOUND, the same as an unknown id); the origin (scheme,
host and port) is checked by live/origin.py. An open socket re-checks its viewer every
ACCESS_CHECK_S (session still there, still in the run's team) and closes with ACCESS_REVOKED
after a logout, a revoked membership or a deactivated user; the page takes all three as final.

A run's socket sends history once, on connect, then snapshot, status and log messages; the
runs list's sends runs.
Snapshots, status and log lines are all pushed by their writers (runs/publisher.py); a consumer
reads the run's row only on connect and, in case a push was lost, every STATUS_RECHECK_S.
Resume without gap or duplicate: the consumer joins the run's group *before* it reads the
history, so a sample or line stored after that read reaches it through the group; it forwards
only `seq > last_seq` (log: `id > last_log_id`) and fills any hole in the seq numbers from the
database. Reconnecting pages pass `?after=<last seq they hold>`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from aiperf_web.core.errors import ServiceError
from aiperf_web.live import selectors as live_sel
from aiperf_web.ops.viewers import viewer_join
from aiperf_web.runs import selectors as run_sel
from aiperf_web.runs.leaks import LeakPoint, leak_assess, leak_brief
from aiperf_web.runs.messages import (
    ACCESS_REVOKED,
    DELETED,
    NOT_FOUND,
    PAGE_MESSAGES,
    UNAUTHENTICATED,
    LogLine,
    RunState,
    error_message,
    history_message,
    log_message,
    pong_message,
    run_group,
    runs_message,
    snapshot_message,
    state_of,
    status_message,
    team_group,
)
from aiperf_web.runs.models import FINAL, Run

log = logging.getLogger(__name__)

# Status, log lines and snapshots are pushed; a consumer looks at the row itself only this
# often, in case a push was lost (the channel layer drops messages to a full channel).
STATUS_RECHECK_S = 15.0
# The runs list reads its rows at most this often, when nudged; unnudged, every LIST_RECHECK_S.
LIST_POLL_S = 1.5
LIST_RECHECK_S = 15.0
# A socket outlives the session and membership it was opened under unless it looks again: at
# most once per ACCESS_CHECK_S (two small queries), from the poll loop that already runs.
ACCESS_CHECK_S = 3.0


def _query_int(scope: dict[str, Any], name: str, default: int) -> int | None:
    raw = parse_qs(scope.get("query_string", b"").decode("latin-1")).get(name)
    if not raw:
        return default
    try:
        return int(raw[0])
    except ValueError:
        return None


class AccessCheck:
    """The viewer's right to go on watching, looked at again at most every ACCESS_CHECK_S."""

    def __init__(self, scope: dict[str, Any], run_obj: Run | None) -> None:
        session = scope.get("session")
        self.session_key: str | None = getattr(session, "session_key", None)
        self.user_pk = int(scope["user"].pk)
        self.run_obj = run_obj
        self.next_at = time.monotonic() + ACCESS_CHECK_S

    async def revoked(self) -> bool:
        now = time.monotonic()
        if now < self.next_at:
            return False
        self.next_at = now + ACCESS_CHECK_S
        try:
            allowed = await database_sync_to_async(live_sel.viewer_still_allowed)(
                session_key=self.session_key, user_pk=self.user_pk, run_obj=self.run_obj
            )
        except Exception:
            log.warning("live socket: access re-check failed", exc_info=True)
            return False
        return not allowed


class RunConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    run_obj: Run
    group: str = ""
    revoked = False

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=UNAUTHENTICATED.code)
            return
        run_id = self.scope["url_route"]["kwargs"]["run_id"]
        try:
            self.run_obj = await database_sync_to_async(run_sel.run_get)(user=user, run_id=run_id)
        except ServiceError:
            await self.close(code=NOT_FOUND.code)
            return
        after = _query_int(self.scope, "after", -1)
        self.lock = asyncio.Lock()
        self.run_id = str(self.run_obj.uuid)
        self.state: RunState | None = None
        self.last_log_id = 0
        self.access = AccessCheck(self.scope, self.run_obj)
        # Join first, read second: see the module docstring.
        self.group = run_group(self.run_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        self.viewer = viewer_join("run")
        if after is None:
            await self.send_json(error_message("after: an integer seq"))
            after = -1
        await self._send_history(after)
        self.poller = asyncio.ensure_future(self._poll())

    async def disconnect(self, code: int) -> None:
        if viewer := getattr(self, "viewer", None):
            viewer.leave()
        poller = getattr(self, "poller", None)
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await poller
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    def _history(
        self, after: int
    ) -> tuple[live_sel.History, list[LeakPoint], list[LogLine], RunState | None]:
        history = live_sel.run_history(run_obj=self.run_obj, after_seq=after)
        points = live_sel.run_leak_points(run_obj=self.run_obj)
        lines = live_sel.run_log_after(run_obj=self.run_obj, after_id=0)
        return history, points, lines, live_sel.run_live_state(run_obj=self.run_obj)

    async def _send_history(self, after: int) -> None:
        async with self.lock:
            history, points, lines, state = await database_sync_to_async(self._history)(after)
            self.last_seq = history["last_seq"]
            self.state = state or DELETED
            if lines:
                self.last_log_id = lines[-1]["id"]
            # The one verdict a socket works out: the stored series', for the history. Each
            # snapshot after it carries its writer's (runs/sink.py), the same for every viewer.
            leak = leak_assess(points, ended=self.state["status"] in FINAL)
            await self.send_json(
                history_message(
                    run_id=self.run_id,
                    history=dict(history),
                    state=self.state,
                    leak=dict(leak_brief(leak)),
                    log=lines[-50:],
                )
            )

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        if kind in PAGE_MESSAGES:  # ping
            await self.send_json(pong_message(run_id=self.run_id))
        else:
            await self.send_json(error_message(f"unknown message {kind!r}", run_id=self.run_id))

    async def decode_json(self, text_data: str) -> Any:
        try:
            return await super().decode_json(text_data)
        except ValueError:
            return {"type": "<not JSON>"}

    # -- the producer's messages (group "run-<uuid>", type run.snapshot) ------------------------

    async def run_snapshot(self, event: dict[str, Any]) -> None:
        if self.revoked:
            return
        async with self.lock:
            seq = int(event["seq"])
            if seq <= self.last_seq:
                return  # already sent from the history
            if seq > self.last_seq + 1:
                # A hole (a message the layer dropped, or stored between read and join): fill
                # it from the database, where every published sample already is.
                missing = await database_sync_to_async(live_sel.run_samples_between)(
                    run_obj=self.run_obj, after_seq=self.last_seq, before_seq=seq
                )
                for sample in missing:
                    await self._forward(sample["seq"], sample["t_s"], sample["data"], None)
            await self._forward(seq, float(event["t_s"]), event["data"], event.get("leak"))

    async def _forward(
        self, seq: int, t_s: float, data: dict[str, Any], leak: dict[str, Any] | None
    ) -> None:
        """A sample to the page with the writer's verdict as of it; a sample filled in from
        the database carries none (the page keeps the one it has until the next)."""
        self.last_seq = seq
        await self.send_json(
            snapshot_message(run_id=self.run_id, seq=seq, t_s=t_s, data=data, leak=leak)
        )

    # -- status and log (group messages run.status and run.log) ------------------------------

    async def run_status(self, event: dict[str, Any]) -> None:
        if self.revoked:
            return
        await self._status(state_of(event))

    async def run_log(self, event: dict[str, Any]) -> None:
        if not self.revoked:
            await self._log(event["lines"])

    async def _log(self, lines: list[LogLine]) -> None:
        fresh = [line for line in lines if line["id"] > self.last_log_id]
        if fresh:
            self.last_log_id = fresh[-1]["id"]
            await self.send_json(log_message(run_id=self.run_id, lines=fresh))

    async def _status(self, state: RunState) -> None:
        async with self.lock:
            if state == self.state:
                return
            if state["status"] in FINAL:
                # The worker stores (and publishes) its last sample before it writes the final
                # status: send whatever the feed has not delivered yet, then the status.
                missing = await database_sync_to_async(live_sel.run_samples_between)(
                    run_obj=self.run_obj, after_seq=self.last_seq, before_seq=2**31 - 1
                )
                for sample in missing:
                    await self._forward(sample["seq"], sample["t_s"], sample["data"], None)
            self.state = state
            await self.send_json(status_message(run_id=self.run_id, state=state))

    def _recheck(self) -> tuple[RunState, list[LogLine]]:
        state = live_sel.run_live_state(run_obj=self.run_obj) or DELETED
        return state, live_sel.run_log_after(run_obj=self.run_obj, after_id=self.last_log_id)

    async def _poll(self) -> None:
        """The viewer's right to watch, every ACCESS_CHECK_S; the row and log, in case a push
        was lost, every STATUS_RECHECK_S."""
        next_recheck = time.monotonic() + STATUS_RECHECK_S
        while True:
            await asyncio.sleep(ACCESS_CHECK_S)
            if await self.access.revoked():
                self.revoked = True
                await self.close(code=ACCESS_REVOKED.code)
                return
            if time.monotonic() < next_recheck:
                continue
            next_recheck = time.monotonic() + STATUS_RECHECK_S
            try:
                state, lines = await database_sync_to_async(self._recheck)()
            except Exception:
                log.warning("run %s: status re-check failed", self.run_id, exc_info=True)
                continue
            await self._log(lines)
            await self._status(state)


class RunsListConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """The runs list: the rows of the viewer's teams' active runs (and of runs that just ended)
    whose status, progress or leak flag changed. It reads them when a team's group says a run
    changed (a launch, a status change, a snapshot), at most every LIST_POLL_S however many
    runs move; otherwise only every LIST_RECHECK_S, in case a nudge was lost (was: every
    LIST_POLL_S whether anything moved or not)."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=UNAUTHENTICATED.code)
            return
        self.user = user
        self.access = AccessCheck(self.scope, None)
        self.sent: dict[str, dict[str, Any]] = {}
        self.wake = asyncio.Event()
        self.wake.set()  # the first read
        # A team joined later is read by the re-check; its nudges need a new socket.
        self.groups_joined = [
            team_group(uuid)
            for uuid in await database_sync_to_async(live_sel.team_uuids_of)(user=user)
        ]
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()
        self.viewer = viewer_join("runs_list")
        self.poller = asyncio.ensure_future(self._poll())

    async def disconnect(self, code: int) -> None:
        if viewer := getattr(self, "viewer", None):
            viewer.leave()
        poller = getattr(self, "poller", None)
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await poller
        for group in getattr(self, "groups_joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        await self.send_json(error_message("this socket only sends"))

    async def decode_json(self, text_data: str) -> Any:
        try:
            return await super().decode_json(text_data)
        except ValueError:
            return None

    async def runs_changed(self, event: dict[str, Any]) -> None:
        self.wake.set()

    async def _poll(self) -> None:
        rows_of = database_sync_to_async(live_sel.runs_live_rows)
        read_at = -LIST_RECHECK_S
        while True:
            if await self.access.revoked():
                await self.close(code=ACCESS_REVOKED.code)
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout=ACCESS_CHECK_S)
            if not self.wake.is_set() and time.monotonic() - read_at < LIST_RECHECK_S:
                continue
            self.wake.clear()
            read_at = time.monotonic()
            try:
                rows = await rows_of(user=self.user)
            except Exception:
                log.warning("runs list read failed", exc_info=True)
                rows = []
            changed = [r for r in rows if self.sent.get(r["id"]) != r]
            for row in changed:
                self.sent[row["id"]] = row
            if changed:
                await self.send_json(runs_message(rows=changed))
            await asyncio.sleep(LIST_POLL_S)
