"""Request building spread over event-loop turns, so a wave of long prompts cannot hold a loop.

A live run's first wave starts every lane at once: at 6,656 lanes of a Claude Code trace that
is thousands of requests of ~0.5 MB each to build, encode and hold (about 2 ms apiece), all
ready in the same turn of the loop. Built back to back they held a client-worker host's loop
for seconds: its heartbeat came late and the run counted the worker lost, and an in-process
run's connect timers expired while their sockets waited to be polled. `BuildPacer` lets builds
run for at most SLICE_S of a turn; the rest wait for a later turn, after the loop has polled
its sockets and run its timers. The work is the same; only its order changes.
"""

from __future__ import annotations

import asyncio
import time
import weakref

__all__ = ["SLICE_S", "BuildPacer", "loop_pacer"]

# Twenty milliseconds of building per turn: a heartbeat or a connect waits at most about that
# long behind a wave, and a turn still builds ten of the longest prompts.
SLICE_S = 0.02


class BuildPacer:
    """`await turn()` before building a request: returns at once while this turn's slice lasts,
    else after a later turn. The first build of a turn always goes ahead, so a turn whose
    other work outlasts the slice still builds one request."""

    def __init__(self, slice_s: float = SLICE_S) -> None:
        self.slice_s = slice_s
        self._until: float | None = None  # None: the slice starts at the turn's first build
        self._next: asyncio.Future[None] | None = None  # set while this turn's slice is spent

    async def turn(self) -> None:
        while True:
            if self._next is None:
                now = time.perf_counter()
                if self._until is None:
                    # This turn's slice starts; it ends with the turn, spent or not, so a
                    # build after a quiet spell never waits.
                    self._until = now + self.slice_s
                    asyncio.get_running_loop().call_soon(self._end_slice)
                    return
                if now < self._until:
                    return
                loop = asyncio.get_running_loop()
                self._next = loop.create_future()
                loop.call_soon(self._open)  # runs next turn, after this one's sockets and timers
            # Shielded: a waiter cancelled (a cancelled request) must not cancel the others.
            await asyncio.shield(self._next)

    def _end_slice(self) -> None:
        if self._next is None:
            self._until = None

    def _open(self) -> None:
        waiting, self._next, self._until = self._next, None, None
        if waiting is not None and not waiting.done():
            waiting.set_result(None)


_pacers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, BuildPacer] = (
    weakref.WeakKeyDictionary()
)


def loop_pacer() -> BuildPacer:
    """The pacer of the running loop: every sender on one loop shares its turns (a host
    process serving several client workers, or the in-process sender)."""
    loop = asyncio.get_running_loop()
    pacer = _pacers.get(loop)
    if pacer is None:
        pacer = _pacers[loop] = BuildPacer()
    return pacer
