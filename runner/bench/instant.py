"""A posting sender whose every request succeeds at once, on the event loop's next turn: the
live driver's and the engine's own cost, with no transport at all (`bench fleet` measures
the orchestrator's CPU beside it; tests count the driver's loop turns on it)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import NoReturn

from runner.client import ResponseResult
from runner.replay.engine import Dispatch

__all__ = ["InstantSender", "instant_success"]


def instant_success() -> ResponseResult:
    """A one-token success that started and ended now (what the stand-ins answer)."""
    now = time.perf_counter()
    return ResponseResult(
        start_s=now,
        end_s=now,
        first_token_s=now,
        chunk_times_s=(now,),
        output_tokens=1,
        prompt_tokens=None,
        cached_tokens=None,
        served_by=None,
        status=200,
        error=None,
    )


class InstantSender:
    def post(
        self, dispatch: Dispatch, on_done: Callable[[Dispatch, ResponseResult], None]
    ) -> int | None:
        asyncio.get_running_loop().call_soon(on_done, dispatch, instant_success())
        return dispatch.credit.id

    def cancel_posted(self) -> None:
        """Nothing is ever left unanswered past the loop's next turn."""

    async def send(
        self, dispatch: Dispatch, on_result: Callable[[ResponseResult], None]
    ) -> NoReturn:
        raise AssertionError("a posting sender's requests are posted, never sent")

    async def aclose(self) -> None:
        pass
