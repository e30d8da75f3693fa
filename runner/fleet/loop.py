"""The event loop of a fleet's processes, hosts and orchestrator alike."""

from __future__ import annotations

import asyncio

__all__ = ["fleet_loop"]


def fleet_loop() -> asyncio.AbstractEventLoop:
    """uvloop where installed, else asyncio's own. Both sides of a fleet spend their time
    waking up for sockets (a credit costs each a Redis round trip per tick), and uvloop's
    wake-ups cost about half of asyncio's. It rounds timers below a millisecond down to zero:
    whatever sleeps on it sleeps at least a millisecond."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
