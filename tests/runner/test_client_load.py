"""The client's own load (runner/wallclock/load.py): a blocked event loop shows as lag and the
CPU it burned, read per snapshot and reset by each read."""

from __future__ import annotations

import asyncio
import time

from runner.output import ClientLoad
from runner.wallclock.load import LoopLoad


def test_a_blocked_loop_reads_as_lag_and_cpu_and_each_read_starts_afresh() -> None:
    async def main() -> tuple[ClientLoad, ClientLoad]:
        probe = LoopLoad.start()
        await asyncio.sleep(0.25)
        deadline = time.process_time() + 0.3
        while time.process_time() < deadline:  # the loop is busy: nothing else runs
            pass
        await asyncio.sleep(0.15)
        busy = probe.read()
        await asyncio.sleep(0.35)
        idle = probe.read()
        await probe.stop()
        return busy, idle

    busy, idle = asyncio.run(main())
    assert busy["loop_lag_ms"] is not None and busy["loop_lag_ms"] >= 150
    # CPU: 0.3 s burned in the busy read, none in the idle one (no bound on wall time: the
    # machine may be shared).
    assert busy["cpu_pct"] is not None and idle["cpu_pct"] is not None
    assert busy["cpu_pct"] > idle["cpu_pct"]
    assert idle["loop_lag_ms"] is not None and idle["loop_lag_ms"] < busy["loop_lag_ms"]
