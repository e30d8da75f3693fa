"""How loaded the client itself is: its event loop's lag and its process's CPU, per snapshot.

Owns one probe task on the run's loop that sleeps PERIOD_S at a time and notes how late each
wake-up came (a loop busy parsing streams, building requests or recording answers wakes late,
and every request's timing is late with it), and the process CPU time between two reads. It
must not touch the engine: the driver reads it when it builds a snapshot and passes the figures
along. aiperf warns past 85 % CPU on its workers; the service names the same threshold
(aiperf_web/reports/cards/saturation.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from runner.output import ClientLoad

__all__ = ["LoopLoad"]

# A tenth of a second: fine enough to see a stall within a 1 s snapshot, cheap (ten wake-ups a
# second) beside the thousands of stream chunks a loaded run handles.
PERIOD_S = 0.1


class LoopLoad:
    """The probe: start() on the run's loop, read() at each snapshot, stop() at the end."""

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None
        self._max_s = 0.0
        self._sum_s = 0.0
        self._n = 0
        self._wall = time.perf_counter()
        self._cpu = time.process_time()

    @classmethod
    def start(cls) -> LoopLoad:
        probe = cls()
        probe._task = asyncio.get_running_loop().create_task(probe._run())
        return probe

    async def _run(self) -> None:
        while True:
            due = time.perf_counter() + PERIOD_S
            await asyncio.sleep(PERIOD_S)
            late = max(0.0, time.perf_counter() - due)
            self._max_s = max(self._max_s, late)
            self._sum_s += late
            self._n += 1

    def read(self) -> ClientLoad:
        wall, cpu = time.perf_counter(), time.process_time()
        dt = wall - self._wall
        load: ClientLoad = {
            "cpu_pct": round(100.0 * (cpu - self._cpu) / dt, 1) if dt > 0.05 else None,
            "loop_lag_ms": round(1000.0 * self._max_s, 1) if self._n else None,
            "loop_lag_mean_ms": round(1000.0 * self._sum_s / self._n, 2) if self._n else None,
        }
        self._wall, self._cpu = wall, cpu
        self._max_s, self._sum_s, self._n = 0.0, 0.0, 0
        return load

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
