"""`/healthz` and `/metrics`: no login (probes and scrapers have none). `/metrics` asks for
`Authorization: Bearer <AIPERF_METRICS_TOKEN>` when that setting is set; without one it is
open only when AIPERF_METRICS_OPEN says so (by default on the embedded shape alone: run counts
and worker pids are nobody's business on a served site)."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from aiperf_web.ops.health import health
from aiperf_web.ops.metrics import metrics_text

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


@require_GET
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    healthy, checks = health()
    return JsonResponse(checks, status=200 if healthy else 503)


@require_GET
@never_cache
def metrics(request: HttpRequest) -> HttpResponse:
    token = settings.AIPERF_METRICS_TOKEN
    if token:
        given = request.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            response = HttpResponse("bearer token required\n", status=401)
            response["WWW-Authenticate"] = "Bearer"
            return response
    elif not settings.AIPERF_METRICS_OPEN:
        return HttpResponse(
            "/metrics is closed: set AIPERF_METRICS_TOKEN on the server and scrape with "
            "Authorization: Bearer <it> (or AIPERF_METRICS_OPEN=1 to open it to anyone)\n",
            status=403,
        )
    try:
        body = metrics_text()
    except DatabaseError as exc:
        return HttpResponse(f"database unreachable: {exc}\n", status=503)
    return HttpResponse(body, content_type=PROMETHEUS_TEXT)
