"""What operators look at: `/healthz` (is this process able to serve: database, broker, a
worker) and `/metrics` (Prometheus text: runs by status, queue depth, worker heartbeats,
WebSocket viewers, request latency, the database pool). No models, no login."""
