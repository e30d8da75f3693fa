"""Starting a run's client-worker hosts: where they run is the caller's choice.

A run's client workers are placed in groups of `client_workers_per_host` (`host_groups`), one
host process per group. `FleetPlan(redis_url)` alone starts one local `python -m runner
client-worker` process per group (the command line, a machine without a task queue). A service
passes `start_hosts`, which starts them wherever it runs work (the web service: one Celery task
per group on the `hosts` queue, on any number of machines); the orchestrator then waits for
every client worker's first heartbeat. Either way the hosts get the run's key (`secret`, which
opens the configuration the orchestrator seals into Redis: runner/fleet/host.py) from the
starter, never through Redis: `start_hosts` receives it, a local process finds it in its
environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from runner.errors import RunnerError

__all__ = ["FleetError", "FleetPlan", "LocalHosts", "host_groups"]


class FleetError(RunnerError):
    """The run's client-worker hosts could not be reached or did not all come up."""


def _new_secret() -> str:
    from runner.fleet.host import new_fleet_secret  # the Redis client, only for fleet runs

    return new_fleet_secret()


@dataclass(frozen=True, slots=True)
class FleetPlan:
    redis_url: str
    # (run key, worker groups, run secret) -> start one host process per group for that run
    # somewhere, serving that group's client workers, each given the secret out of band (not
    # through Redis); None starts them as local processes.
    start_hosts: Callable[[str, list[list[int]], str], None] | None = None
    start_timeout_s: float = 60.0
    run_key: str = field(default_factory=lambda: uuid.uuid4().hex[:16])
    secret: str = field(default_factory=_new_secret, repr=False)


def host_groups(client_workers: int, per_host: int) -> list[list[int]]:
    """Client workers 0..client_workers-1 in consecutive groups of `per_host` (the last may be
    smaller): host h serves [h*per_host, min((h+1)*per_host, client_workers))."""
    return [
        list(range(first, min(first + per_host, client_workers)))
        for first in range(0, client_workers, per_host)
    ]


class LocalHosts:
    """One host process per worker group on this machine, reaped at the end of the run; each
    finds the run's key in its environment (SECRET_ENV), not on its command line."""

    def __init__(
        self, redis_url: str, run: str, groups: Sequence[Sequence[int]], *, secret: str
    ) -> None:
        from runner.fleet.host import SECRET_ENV

        env = {**os.environ, SECRET_ENV: secret}
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-m", "runner", "client-worker", "--redis", redis_url,
                 "--run", run, *(f"--worker={worker}" for worker in group)],
                stdout=subprocess.DEVNULL,
                env=env,
            )
            for group in groups
        ]  # fmt: skip

    def close(self, timeout_s: float = 20.0) -> None:
        """Hosts leave once told the run is over; one that does not is killed."""
        for proc in self.procs:
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
