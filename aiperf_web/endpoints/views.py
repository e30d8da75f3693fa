"""Endpoint pages: list, create, edit, test connection, delete."""

from __future__ import annotations

import json

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from aiperf_web.core.errors import Invalid
from aiperf_web.core.forms import add_service_errors
from aiperf_web.core.views import page
from aiperf_web.endpoints import selectors, services
from aiperf_web.endpoints.forms import EndpointForm
from aiperf_web.teams.models import Role
from aiperf_web.teams.selectors import require_role, team_get_for_user, teams_with_role


@page
def endpoint_list(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "endpoints/list.html",
        {
            "endpoints": selectors.endpoint_list(user=request.user),
            "can_create": bool(teams_with_role(user=request.user, role=Role.MEMBER)),
        },
    )


@page
def endpoint_new(request: HttpRequest) -> HttpResponse:
    teams = teams_with_role(user=request.user, role=Role.MEMBER)
    if not teams:
        messages.error(request, "Viewers cannot add endpoints.")
        return redirect("endpoints:list")
    form = EndpointForm(request.POST or None, teams=teams)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        team = (
            team_get_for_user(user=request.user, team_id=data["team"])
            if data.get("team")
            else teams[0]
        )
        try:
            endpoint = services.endpoint_create(
                actor=request.user,
                team=team,
                name=data["name"],
                base_url=data["base_url"],
                model=data["model"],
                api_key=data.get("api_key") or None,
                extra_headers=data["extra_headers"],
                secret_headers=data.get("secret_headers"),
                server_kind=data["server_kind"],
            )
        except Invalid as exc:
            add_service_errors(form, exc.fields, str(exc))
        else:
            messages.success(request, f"Endpoint {endpoint.name} saved.")
            return redirect("endpoints:detail", endpoint_id=endpoint.uuid)
    return render(request, "endpoints/form.html", {"form": form, "endpoint": None})


@page
def endpoint_detail(request: HttpRequest, endpoint_id: str) -> HttpResponse:
    endpoint = selectors.endpoint_get(user=request.user, endpoint_id=endpoint_id)
    if request.method == "POST":
        require_role(user=request.user, team=endpoint.team, role=Role.MEMBER)
    initial = {
        "name": endpoint.name,
        "base_url": endpoint.base_url,
        "model": endpoint.model,
        "server_kind": endpoint.server_kind,
        "extra_headers": json.dumps(endpoint.extra_headers) if endpoint.extra_headers else "",
    }
    form = EndpointForm(request.POST or None, teams=[], editing=True, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        changes = {
            "name": data["name"],
            "base_url": data["base_url"],
            "model": data["model"],
            "server_kind": data["server_kind"],
            "extra_headers": data["extra_headers"],
        }
        if data.get("clear_api_key"):
            changes["api_key"] = None
        elif data.get("api_key"):
            changes["api_key"] = data["api_key"]
        if data.get("clear_secret_headers"):
            changes["secret_headers"] = None
        elif data.get("secret_headers") is not None:
            changes["secret_headers"] = data["secret_headers"]
        had_key = endpoint.has_api_key
        had_secrets = bool(endpoint.secret_header_names)
        try:
            services.endpoint_update(actor=request.user, endpoint=endpoint, **changes)
        except Invalid as exc:
            add_service_errors(form, exc.fields, str(exc))
        else:
            dropped = [
                what
                for what, had, has, field in (
                    ("API key", had_key, endpoint.has_api_key, "api_key"),
                    ("secret headers", had_secrets, bool(endpoint.secret_header_names),
                     "secret_headers"),
                )
                if had and not has and field not in changes
            ]  # fmt: skip
            one = dropped == ["API key"]
            messages.success(
                request,
                f"Endpoint saved. The stored {' and '.join(dropped)} "
                f"{'was' if one else 'were'} removed because the base URL changed: enter "
                f"{'it' if one else 'them'} again if the new server needs "
                f"{'it' if one else 'them'}."
                if dropped
                else "Endpoint saved.",
            )
            return redirect("endpoints:detail", endpoint_id=endpoint.uuid)
    return render(request, "endpoints/form.html", {"form": form, "endpoint": endpoint})


@require_POST
@page
def endpoint_test(request: HttpRequest, endpoint_id: str) -> HttpResponse:
    endpoint = selectors.endpoint_get(user=request.user, endpoint_id=endpoint_id)
    try:
        message = services.endpoint_test_connection(actor=request.user, endpoint=endpoint)
    except Invalid as exc:
        messages.error(request, "Connection failed: " + "; ".join(exc.fields.values()))
    else:
        messages.success(request, "Connection OK: " + message)
    return redirect("endpoints:detail", endpoint_id=endpoint.uuid)


@require_POST
@page
def endpoint_delete(request: HttpRequest, endpoint_id: str) -> HttpResponse:
    endpoint = selectors.endpoint_get(user=request.user, endpoint_id=endpoint_id)
    services.endpoint_delete(actor=request.user, endpoint=endpoint)
    messages.success(request, f"Endpoint {endpoint.name} deleted.")
    return redirect("endpoints:list")
