"""WebSocket routes (`/ws/runs/{id}/`): the live dashboard's consumers are added here."""

from __future__ import annotations

from typing import Any

websocket_urlpatterns: list[Any] = []
