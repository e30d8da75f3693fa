"""Team members (admins manage them) and the user's personal API tokens."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from aiperf_web.core.errors import Invalid
from aiperf_web.core.views import page
from aiperf_web.core.webhooks import webhook_posted
from aiperf_web.teams import selectors, services
from aiperf_web.teams.models import Role


@page
def team_page(request: HttpRequest) -> HttpResponse:
    teams = []
    for team in selectors.team_list_for_user(user=request.user):
        role = selectors.role_in_team(user=request.user, team=team)
        teams.append(
            {
                "team": team,
                "role": role,
                "is_admin": role == Role.ADMIN,
                "members": list(selectors.membership_list(team=team)),
            }
        )
    new_token = request.session.pop("new_token", None)
    return render(
        request,
        "teams/team.html",
        {
            "teams": teams,
            "tokens": selectors.api_token_list(user=request.user),
            "new_token": new_token,
            "roles": [r.value for r in Role],
        },
    )


@require_POST
@page
def member_set(request: HttpRequest, team_id: str) -> HttpResponse:
    team = selectors.team_get_for_user(user=request.user, team_id=team_id)
    try:
        services.membership_set(
            actor=request.user,
            team=team,
            username=request.POST.get("username", ""),
            role=request.POST.get("role", ""),
        )
        messages.success(request, "Membership saved.")
    except Invalid as exc:
        messages.error(request, str(exc))
    return redirect("teams:page")


@require_POST
@page
def member_remove(request: HttpRequest, team_id: str) -> HttpResponse:
    team = selectors.team_get_for_user(user=request.user, team_id=team_id)
    try:
        services.membership_remove(
            actor=request.user, team=team, username=request.POST.get("username", "")
        )
        messages.success(request, "Member removed.")
    except Invalid as exc:
        messages.error(request, str(exc))
    return redirect("teams:page")


@require_POST
@page
def team_webhook(request: HttpRequest, team_id: str) -> HttpResponse:
    team = selectors.team_get_for_user(user=request.user, team_id=team_id)
    try:
        services.team_webhook_set(
            actor=request.user,
            team=team,
            **webhook_posted(request.POST),
        )
        messages.success(request, "Webhook saved.")
    except Invalid as exc:
        messages.error(request, str(exc))
    return redirect("teams:page")


@require_POST
@page
def token_create(request: HttpRequest) -> HttpResponse:
    assert isinstance(request.user, User)  # @page: logged in
    try:
        _, raw = services.api_token_create(user=request.user, name=request.POST.get("name", ""))
    except Invalid as exc:
        messages.error(request, str(exc))
        return redirect("teams:page")
    # Shown once, on the next page view, then gone from the session.
    request.session["new_token"] = raw
    return redirect("teams:page")


@require_POST
@page
def token_revoke(request: HttpRequest, token_id: str) -> HttpResponse:
    services.api_token_revoke(user=request.user, token_id=token_id)
    messages.success(request, "Token revoked.")
    return redirect("teams:page")
