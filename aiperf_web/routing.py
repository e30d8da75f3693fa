"""WebSocket routes (`/ws/runs/{id}/`): the live dashboard's consumers are added here."""

from __future__ import annotations

from typing import Any

from aiperf_web.live.routing import websocket_urlpatterns as live_patterns
from aiperf_web.sweeps.routing import websocket_urlpatterns as sweep_patterns

websocket_urlpatterns: list[Any] = [*live_patterns, *sweep_patterns]
