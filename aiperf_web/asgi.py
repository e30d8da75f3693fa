"""ASGI entry point: HTTP through Django, WebSocket through Channels, one process (uvicorn).

The live dashboard adds its consumers to `aiperf_web.routing.websocket_urlpatterns`.
"""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aiperf_web.settings")

from django.core.asgi import get_asgi_application

# Django must be set up before the Channels imports below touch models.
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from aiperf_web.core.limits import BodyLimit  # noqa: E402
from aiperf_web.live.origin import SameOriginValidator  # noqa: E402
from aiperf_web.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        # Bodies over the route's cap are refused before Django spools them (core/limits.py).
        "http": BodyLimit(django_asgi_app),
        # Sockets only from this site's own origin: scheme, host and port (live/origin.py).
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
