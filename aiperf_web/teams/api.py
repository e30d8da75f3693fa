"""The teams part of the JSON API (mounted on /api/v1/ by aiperf_web.api.site)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.http import HttpRequest
from ninja import Router, Schema

from aiperf_web.teams import selectors

router = Router()


class TeamOut(Schema):
    id: UUID
    name: str
    role: str


@router.get("/teams", response=list[TeamOut], tags=["teams"])
def teams(request: HttpRequest) -> list[dict[str, Any]]:
    out = []
    for team in selectors.team_list_for_user(user=request.user):
        role = selectors.role_in_team(user=request.user, team=team)
        out.append({"id": team.uuid, "name": team.name, "role": str(role)})
    return out
