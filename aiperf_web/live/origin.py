"""The WebSocket origin check: a socket is accepted only from a page of this site.

Channels' AllowedHostsOriginValidator compares the Origin's host name with ALLOWED_HOSTS and
ignores scheme and port, so any other service on the same host (another port: a notebook, a
dev server) could open a viewer's live feed with the viewer's cookies. Here the Origin must be
the site's own origin, scheme, host and port, as the socket's Host header names it (when that
host is allowed), or one of CSRF_TRUSTED_ORIGINS (a proxy in front), exactly as Django's CSRF
check treats form posts.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

Origin = tuple[str, str, int]
DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_parse(raw: str) -> Origin | None:
    """(scheme, host, port) of `http[s]://host[:port]`, the port made explicit; None otherwise."""
    try:
        parts = urlsplit(raw.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or DEFAULT_PORTS[scheme]


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def origin_allowed(scope: dict[str, Any]) -> bool:
    raw = _header(scope, b"origin")
    origin = origin_parse(raw) if raw is not None else None
    if origin is None:
        return False
    trusted = {origin_parse(o) for o in settings.CSRF_TRUSTED_ORIGINS}
    if origin in trusted:
        return True
    host = _header(scope, b"host")
    if not host:
        return False
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return False
    scheme = "https" if scope.get("scheme") in ("wss", "https") else "http"
    return origin == origin_parse(f"{scheme}://{host}")


class SameOriginValidator:
    """ASGI middleware for WebSocket routes: refuses (closes before accepting) a socket whose
    Origin is not this site's."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if origin_allowed(scope):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)
