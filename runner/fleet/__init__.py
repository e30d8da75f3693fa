"""One run's client workers as separate processes, over Redis (docs/engine.md, "Fleet").

    FleetSender(...)          the orchestrator's RequestSender: credits out on a stream per
                              worker, results back on one list, hosts watched by heartbeat
    run_host(redis, run, w)   a client worker's process: sends what its stream carries

The engine (scheduler, sticky router, affinity, books) stays in the orchestrating process, so
every routing figure means what it means in-process; only the HTTP exchanges and the session
copies move out.
"""

from runner.fleet.host import HostReport, run_host
from runner.fleet.sender import FleetError, FleetSender, LostWorker
from runner.fleet.wire import RunKeys

__all__ = ["FleetError", "FleetSender", "HostReport", "LostWorker", "RunKeys", "run_host"]
