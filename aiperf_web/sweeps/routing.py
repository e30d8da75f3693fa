"""The sweeps' WebSocket route: a sweep page's live feed (sweeps/consumers.py)."""

from __future__ import annotations

from django.urls import path

from aiperf_web.sweeps.consumers import SweepConsumer

websocket_urlpatterns = [
    path("ws/sweeps/<str:sweep_id>/", SweepConsumer.as_asgi()),
]
