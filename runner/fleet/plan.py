"""Starting a run's client-worker hosts: where they run is the caller's choice.

`FleetPlan(redis_url)` alone starts one local `python -m runner client-worker` process per
client worker (the command line, a machine without a task queue). A service passes
`start_hosts`, which starts them wherever it runs work (the web service: one Celery task per
worker on the `hosts` queue, on any number of machines); the orchestrator then waits for every
host's first heartbeat.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from runner.errors import RunnerError

__all__ = ["FleetError", "FleetPlan", "LocalHosts"]


class FleetError(RunnerError):
    """The run's client-worker hosts could not be reached or did not all come up."""


@dataclass(frozen=True, slots=True)
class FleetPlan:
    redis_url: str
    # (run key, client workers) -> start hosts 0..workers-1 for that run somewhere; None
    # starts them as local processes.
    start_hosts: Callable[[str, int], None] | None = None
    start_timeout_s: float = 60.0
    run_key: str = field(default_factory=lambda: uuid.uuid4().hex[:16])


class LocalHosts:
    """One host process per client worker on this machine, reaped at the end of the run."""

    def __init__(self, redis_url: str, run: str, workers: int) -> None:
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-m", "runner", "client-worker", "--redis", redis_url,
                 "--run", run, "--worker", str(worker)],
                stdout=subprocess.DEVNULL,
            )
            for worker in range(workers)
        ]  # fmt: skip

    def close(self, timeout_s: float = 20.0) -> None:
        """Hosts leave once told the run is over; one that does not is killed."""
        for proc in self.procs:
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
