"""Shared page plumbing: service errors become 404/403 pages, never 500s; the error pages
themselves (400, 403, 404, 500 and a failed CSRF check)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseServerError,
    JsonResponse,
)
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import Resolver404, reverse
from django.utils.text import capfirst

from aiperf_web.core.errors import Forbidden, NotFound

View = Callable[..., HttpResponseBase]


def page(view: View) -> View:
    """Login required; NotFound → 404, Forbidden → 403."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        try:
            return view(request, *args, **kwargs)
        except NotFound as exc:
            raise Http404(str(exc)) from None
        except Forbidden as exc:
            raise PermissionDenied(str(exc)) from None

    return login_required(wrapper)


def home(request: HttpRequest) -> HttpResponse:
    return redirect("runs:list")


def health(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok", content_type="text/plain")


# -- error pages ---------------------------------------------------------------------------------
# Django calls these when DEBUG is off (aiperf_web/urls.py names them; CSRF_FAILURE_VIEW the
# last): a page in the site's dress (its navigation, what went wrong, a way back), and under
# /api/ the API's JSON error body, so a client never parses an HTML page.

API_PREFIX = "/api/"

# The first segment of a path -> the list page a way back leads to.
SECTIONS: dict[str, tuple[str, str]] = {
    "runs": ("All runs", "runs:list"),
    "reports": ("All runs", "runs:list"),
    "scenarios": ("All scenarios", "scenarios:list"),
    "traces": ("All traces", "scenarios:traces"),
    "endpoints": ("All endpoints", "endpoints:list"),
    "team": ("Your team", "teams:page"),
}
PATH_SHOWN_CHARS = 200


def _json_error(status: int, detail: str) -> JsonResponse:
    return JsonResponse({"detail": detail, "errors": []}, status=status)


def _way_back(path: str) -> tuple[str, str]:
    label, name = SECTIONS.get(path.strip("/").split("/")[0], ("All runs", "runs:list"))
    return label, reverse(name)


def _error_page(
    request: HttpRequest, *, status: int, title: str, detail: str, with_request: bool = True
) -> HttpResponse:
    label, url = _way_back(request.path)
    context = {
        "status": status,
        "title": title,
        "detail": detail,
        "path": request.path[:PATH_SHOWN_CHARS],
        "back_label": label,
        "back_url": url,
    }
    if not with_request:
        # A 500 may come from the database itself: no session, no user, no context processor
        # (each may read it); the navigation is shown to whoever asked.
        return HttpResponseServerError(render_to_string("error.html", {**context, "nav": True}))
    # error_page: base.html offers an anonymous visitor a way to log in.
    return render(request, "error.html", {**context, "error_page": True}, status=status)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    detail = (
        "The server could not read this request: a malformed address, header or form. Check "
        "the link, or reload the page and send it again."
    )
    if request.path.startswith(API_PREFIX):
        return _json_error(400, "bad request: a malformed address, header or body")
    return _error_page(request, status=400, title="Bad request", detail=detail)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    # Forbidden's messages say whose role falls short and what the action needs.
    detail = str(exception) or "Your role in this team does not allow this: ask a team admin."
    if request.path.startswith(API_PREFIX):
        return _json_error(403, detail)
    return _error_page(request, status=403, title="Not allowed", detail=detail)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith(API_PREFIX):
        return _json_error(404, f"no API route {request.path}: the routes are at /api/v1/docs")
    message = "" if isinstance(exception, Resolver404) else str(exception)
    if message.endswith(" not found"):
        # A view's NotFound ("run not found"): the address named an object this user cannot see.
        what = message.removesuffix(" not found")
        match = request.resolver_match
        ids = [v for k, v in (match.kwargs if match else {}).items() if k.endswith("_id")]
        named = f" {ids[0][:80]!r}" if ids else ""
        detail = (
            f"No {what}{named} in your teams: the link may be mistyped, or the {what} was "
            "deleted or belongs to a team you are not in."
        )
        return _error_page(request, status=404, title=capfirst(message), detail=detail)
    detail = (
        message or "Nothing at this address: check it for a typo, or go on from the links above."
    )
    return _error_page(request, status=404, title="Page not found", detail=detail)


def server_error(request: HttpRequest) -> HttpResponse:
    if request.path.startswith(API_PREFIX):
        return _json_error(500, "internal error; the server log has the details")
    detail = (
        "Something went wrong on our side and it was logged. Try again in a moment; if it "
        "happens again, tell the operator the address and the time."
    )
    return _error_page(request, status=500, title="Server error", detail=detail, with_request=False)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """A form sent without a valid security token (usually a page open from before a login or
    a restart): reloading it fetches a fresh one. The API is exempt (bearer tokens)."""
    detail = (
        "This form's security token was missing or out of date (the page was opened before "
        "you logged in, or long ago). Reload the page and send the form again."
    )
    return _error_page(request, status=403, title="Form expired", detail=detail)
