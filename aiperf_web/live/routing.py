"""The live channel's WebSocket routes."""

from __future__ import annotations

from django.urls import path

from aiperf_web.live.consumers import RunConsumer, RunsListConsumer

websocket_urlpatterns = [
    path("ws/runs/", RunsListConsumer.as_asgi()),
    path("ws/runs/<str:run_id>/", RunConsumer.as_asgi()),
]
