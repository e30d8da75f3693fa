"""Security headers on every response that Django's SecurityMiddleware does not set.

SecurityMiddleware already sends X-Content-Type-Options: nosniff, Referrer-Policy: same-origin
and Cross-Origin-Opener-Policy: same-origin (Django's defaults, kept), and
XFrameOptionsMiddleware X-Frame-Options: DENY. This adds the Content-Security-Policy the pages
satisfy: scripts only from this site (ES modules in static/js, plotly.js served from the
installed package, django-ninja's Swagger UI files): no inline or eval'd script, so an
injected <script> does not run (json_script blocks are data, not script); sockets and fetches
to this site only; no framing (frame-ancestors, the CSP form of X-Frame-Options).
Styles allow inline: plotly.js writes style elements and attributes as it draws, and the
progress bar's width is a style attribute; a style cannot run code.
"""

from __future__ import annotations

from django.http import HttpRequest
from django.http.response import HttpResponseBase
from django.utils.deprecation import MiddlewareMixin

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        # data: the empty favicon and plotly's mode-bar icons; blob: plotly's image download.
        "img-src 'self' data: blob:",
        "font-src 'self' data:",
        # 'self' covers ws:// and wss:// to this same host (CSP 3).
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)


class SecurityHeadersMiddleware(MiddlewareMixin):
    # MiddlewareMixin: sync and async alike, so the ASGI stack is not adapted around it.
    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        # A view that needs another policy sets its own.
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        return response
