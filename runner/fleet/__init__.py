"""One run's client workers as separate processes, over Redis (docs/engine.md, "Fleet").

    FleetSender(...)          the orchestrator's RequestSender: credits out on a stream per
                              worker, results back on one list, hosts watched by heartbeat
    run_host(redis, run, w)   a client worker in a host process: sends what its stream carries
    serve_hosts(redis, run, ws) a host process: workers `ws` together on its event loop

The hosts' configuration (endpoint, API key, headers) lies in Redis sealed under the run's own
key, which the hosts get from whoever starts them, never through Redis (host.py).

The engine (scheduler, sticky router, affinity, books) stays in the orchestrating process, so
every routing figure means what it means in-process; only the HTTP exchanges and the session
copies move out.
"""

from typing import TYPE_CHECKING, Any

from runner.fleet.loop import fleet_loop
from runner.fleet.plan import FleetError, FleetPlan, LocalHosts, host_groups
from runner.fleet.wire import RunKeys

if TYPE_CHECKING:
    from runner.fleet.host import HostReport, run_host, serve_hosts
    from runner.fleet.sender import FleetSender, LostWorker

# The Redis client loads with the first of these names a process uses, not with the engine's
# face: a run without client-worker processes never imports it.
_LAZY = {
    "HostReport": "runner.fleet.host",
    "serve_hosts": "runner.fleet.host",
    "run_host": "runner.fleet.host",
    "FleetSender": "runner.fleet.sender",
    "LostWorker": "runner.fleet.sender",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'runner.fleet' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "FleetError",
    "FleetPlan",
    "FleetSender",
    "HostReport",
    "LocalHosts",
    "LostWorker",
    "RunKeys",
    "fleet_loop",
    "host_groups",
    "run_host",
    "serve_hosts",
]
