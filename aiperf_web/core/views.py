"""Shared page plumbing: service errors become 404/403 pages, never 500s."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect

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
