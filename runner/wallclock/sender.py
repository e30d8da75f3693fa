"""Where a dispatch becomes an HTTP request: the seam between the engine and client workers.

The engine decides, for every credit, which client worker sends it (`Dispatch.worker`) and
what it carries; a `RequestSender` sends it and reports the outcome. `LocalSender` hosts every
client worker in this process over one pooled HTTP client. A sender for workers in other
processes or on other machines (one run spread over several Celery workers) implements the
same two methods: it hands the dispatch to the host of `dispatch.worker` and relays the
ResponseResult back; the engine, its routing and its books stay in one place.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from runner.client import EncodedRequest, ErrorCategory, InferenceClient, ResponseResult, Timeouts
from runner.replay.engine import Dispatch
from runner.trace import Trace
from runner.wallclock.pacing import loop_pacer
from runner.wallclock.prompts import RequestBuilder
from runner.workers.history import SessionHistories

__all__ = ["LocalSender", "PostingSender", "RemoteWorkers", "RequestSender"]

# A request cancelled while it waited for its turn to be built (runner/wallclock/pacing.py).
_CANCELLED_UNSENT = (ErrorCategory.CANCELLED, "cancelled by the caller before it was sent")


class RequestSender(Protocol):
    async def send(self, dispatch: Dispatch, on_result: Callable[[ResponseResult], None]) -> None:
        """Send `dispatch`'s request; call `on_result` exactly once with its outcome, also
        when the calling task is cancelled (the record then says `cancelled`)."""

    async def aclose(self) -> None: ...


@runtime_checkable
class PostingSender(Protocol):
    """A sender that takes dispatches without a task each (runner/fleet): `post` queues one
    and returns at once, its outcome comes later through `on_done(dispatch, result)`, exactly
    once and never from within `post`; `cancel_posted` ends everything posted and unanswered
    as cancelled, through the same callbacks, before it returns. At thousands of requests a
    second a task and a future per request are a good part of the orchestrator's CPU."""

    def post(
        self, dispatch: Dispatch, on_done: Callable[[Dispatch, ResponseResult], None]
    ) -> int | None: ...

    def cancel_posted(self) -> None: ...


@runtime_checkable
class RemoteWorkers(Protocol):
    """A sender whose client workers are processes elsewhere (runner/fleet). They can be lost:
    the driver sets `on_worker_lost` so the engine hears of each loss, with the time the
    sender settled it (its sessions fail or migrate). They report themselves: `host_view`
    goes in every snapshot, `summary` in the run's summary (run times measured from `t0` on
    the perf_counter clock)."""

    on_worker_lost: Callable[[int, float], None] | None

    def host_view(self, t0: float) -> list[dict[str, Any]]: ...

    def summary(self, t0: float) -> dict[str, Any]: ...


class LocalSender:
    """Every client worker in this process, over one connection pool. Each worker keeps the
    history it last sent of every session it served, as shared pieces (`histories`): freed
    when it answers the session's final turn, left behind (an orphan) when a later turn went
    to another worker."""

    def __init__(
        self,
        traces: Sequence[Trace],
        *,
        endpoint: str,
        model: str,
        api_key: str | None,
        headers: dict[str, str],
        timeouts: Timeouts,
        connections: int,
        isolate_trees: bool,
        want_worker_id: bool,
        ignore_eos: bool,
    ) -> None:
        self.builder = RequestBuilder(
            traces,
            model=model,
            isolate_trees=isolate_trees,
            want_worker_id=want_worker_id,
            ignore_eos=ignore_eos,
        )
        self.client = InferenceClient(
            endpoint, concurrency=connections, api_key=api_key, headers=headers, timeouts=timeouts
        )
        self.histories = SessionHistories()

    async def send(self, dispatch: Dispatch, on_result: Callable[[ResponseResult], None]) -> None:
        try:
            await loop_pacer().turn()
        except asyncio.CancelledError:
            on_result(ResponseResult.failure(time.perf_counter(), *_CANCELLED_UNSENT))
            raise
        request, headers = self.builder.build(dispatch)
        body = request.encoded()
        credit = dispatch.credit
        self.histories.sent(dispatch.worker, credit.session_id, body, family=credit.root_id)
        try:
            await self.client.send(
                EncodedRequest(request.path, body), headers=headers, on_result=on_result
            )
        finally:
            if credit.is_final_turn:
                self.histories.ended(dispatch.worker, credit.session_id)

    async def aclose(self) -> None:
        await self.client.aclose()
