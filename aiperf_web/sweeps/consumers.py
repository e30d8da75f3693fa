"""A sweep's live page socket (`/ws/sweeps/{id}/?p=p90`): the page's curves, headlines, header
and point table, sent whole on connect and again whenever the sweep's group says it changed.

Access as for a run's socket (live/consumers.py), with the close codes of runs/messages.py:
anonymous closes UNAUTHENTICATED, a sweep outside the viewer's teams (or no sweep) NOT_FOUND,
and an open socket re-checks its viewer every ACCESS_CHECK_S (session still there, still in
the sweep's team), closing ACCESS_REVOKED otherwise.

Messages to the browser (declared in runs/messages.py), JSON:
  sweep  {id, status, active, progress, charts: [{id, card, figure}], html: {header,
          headlines, points}, ...}                               on connect and on each change
  error  {message}                                               a bad client message

A nudge (`sweep.changed`, sweeps/publisher.py) only wakes the socket: it reads the sweep at
most every READ_MIN_S however many nudges come, and sends only when what it read differs from
what it sent. Without nudges it re-reads every RECHECK_S, in case one was lost.
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
from aiperf_web.live.consumers import ACCESS_CHECK_S
from aiperf_web.runs.messages import (
    ACCESS_REVOKED,
    NOT_FOUND,
    PAGE_MESSAGES,
    UNAUTHENTICATED,
    error_message,
    pong_message,
    sweep_group,
    sweep_message,
)
from aiperf_web.sweeps import selectors
from aiperf_web.sweeps.models import Sweep
from aiperf_web.sweeps.page import sweep_fragments, sweep_page
from aiperf_web.teams.models import Membership

log = logging.getLogger(__name__)

READ_MIN_S = 0.5
# Without a nudge, an active sweep's socket reads it again this often (a nudge may be lost;
# a read is the sweep's row, its points and the report built over them: a few ms).
RECHECK_S = 5.0


def _allowed(*, session_key: str | None, user_pk: int, team_id: int) -> bool:
    return (
        live_sel.viewer_still_allowed(session_key=session_key, user_pk=user_pk, run_obj=None)
        and Membership.objects.filter(user_id=user_pk, team_id=team_id).exists()
    )


def _payload(sweep_pk: int, percentile: str | None) -> dict[str, Any] | None:
    sweep = Sweep.objects.select_related("team", "scenario", "endpoint").filter(pk=sweep_pk).first()
    if sweep is None:
        return None
    page = sweep_page(sweep, percentile=percentile)
    return sweep_message({**page, "html": sweep_fragments(page)})


class SweepConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    group: str = ""
    revoked = False

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=UNAUTHENTICATED.code)
            return
        sweep_id = self.scope["url_route"]["kwargs"]["sweep_id"]
        try:
            sweep = await database_sync_to_async(selectors.sweep_get)(user=user, sweep_id=sweep_id)
        except ServiceError:
            await self.close(code=NOT_FOUND.code)
            return
        raw = parse_qs(self.scope.get("query_string", b"").decode("latin-1")).get("p")
        self.percentile = raw[0] if raw else None
        self.sweep_pk = sweep.pk
        self.team_id = sweep.team_id
        session = self.scope.get("session")
        self.session_key: str | None = getattr(session, "session_key", None)
        self.user_pk = int(user.pk)
        self.sent: dict[str, Any] | None = None
        self.wake = asyncio.Event()
        # Join first, read second: a change stored after the first read wakes the socket.
        self.group = sweep_group(sweep.uuid)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self._send_if_changed()
        self.poller = asyncio.ensure_future(self._poll())

    async def disconnect(self, code: int) -> None:
        poller = getattr(self, "poller", None)
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await poller
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        if kind in PAGE_MESSAGES:  # ping
            await self.send_json(pong_message())
        else:
            await self.send_json(error_message(f"unknown message {kind!r}"))

    async def decode_json(self, text_data: str) -> Any:
        try:
            return await super().decode_json(text_data)
        except ValueError:
            return {"type": "<not JSON>"}

    async def sweep_changed(self, event: dict[str, Any]) -> None:
        self.wake.set()

    async def _send_if_changed(self) -> None:
        payload = await database_sync_to_async(_payload)(self.sweep_pk, self.percentile)
        if payload is None:
            payload = sweep_message({"status": "deleted", "active": False, "deleted": True})
        if payload != self.sent:
            self.sent = payload
            await self.send_json(payload)

    async def _poll(self) -> None:
        """Read again when nudged (at most every READ_MIN_S) or every RECHECK_S; the
        viewer's right to watch every ACCESS_CHECK_S."""
        access_at = time.monotonic() + ACCESS_CHECK_S
        read_at = time.monotonic()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout=ACCESS_CHECK_S)
            now = time.monotonic()
            if now >= access_at:
                access_at = now + ACCESS_CHECK_S
                try:
                    allowed = await database_sync_to_async(_allowed)(
                        session_key=self.session_key, user_pk=self.user_pk, team_id=self.team_id
                    )
                except Exception:
                    log.warning("sweep socket: access re-check failed", exc_info=True)
                    allowed = True
                if not allowed:
                    self.revoked = True
                    await self.close(code=ACCESS_REVOKED.code)
                    return
            if not self.wake.is_set() and now - read_at < RECHECK_S:
                continue
            self.wake.clear()
            read_at = time.monotonic()
            try:
                await self._send_if_changed()
            except Exception:
                log.warning("sweep %s: live read failed", self.sweep_pk, exc_info=True)
            await asyncio.sleep(READ_MIN_S)
