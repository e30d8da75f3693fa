"""The built-in mock inference server: an OpenAI-compatible HTTP face on the simulated cluster.

Owns the HTTP side of docs/product.md §4.9 (routes, SSE, faults, stats, serving); all routing,
caching and timing decisions are `runner.cluster`'s. It never imports the replay engine or
the client: they talk to it over HTTP like to any endpoint.

    start_mock_server(config, host="127.0.0.1", port=0) -> MockServerHandle
        handle.url ("http://127.0.0.1:PORT"), handle.stop(); a context manager.
        process=True runs it in its own process (benchmarks).
    serve(config, host=, port=, ready=)   blocking, what `python -m runner mock-server` runs
    MockApp(config)                       the raw ASGI app, for any ASGI server
    MockServerConfig, FaultConfig         the knobs (cluster knobs: runner.cluster.ClusterConfig)

Routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health,
GET /metrics (Prometheus), GET /stats (JSON), POST /admin/workers/{i}/down|up,
POST /admin/reset.
"""

from runner.mockserver.app import MockApp
from runner.mockserver.config import FAULT_KINDS, FaultConfig, FaultKind, MockServerConfig
from runner.mockserver.server import MockServerHandle, serve, start_mock_server
from runner.mockserver.stats import ServerStats, StatsBody

__all__ = [
    "FAULT_KINDS",
    "FaultConfig",
    "FaultKind",
    "MockApp",
    "MockServerConfig",
    "MockServerHandle",
    "ServerStats",
    "StatsBody",
    "serve",
    "start_mock_server",
]
