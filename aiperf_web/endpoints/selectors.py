"""Reads of endpoints, always scoped to the requester's teams."""

from __future__ import annotations

from django.db.models import QuerySet

from aiperf_web.core.errors import NotFound
from aiperf_web.core.ids import parse_uuid
from aiperf_web.endpoints.models import Endpoint
from aiperf_web.teams.selectors import AnyUser, team_ids_for


def endpoint_list(*, user: AnyUser) -> QuerySet[Endpoint]:
    return (
        Endpoint.objects.filter(team_id__in=team_ids_for(user=user))
        .select_related("team")
        .order_by("team__name", "name")
    )


def endpoint_get(*, user: AnyUser, endpoint_id: object) -> Endpoint:
    uid = parse_uuid(endpoint_id)
    endpoint = endpoint_list(user=user).filter(uuid=uid).first() if uid else None
    if endpoint is None:
        raise NotFound("endpoint not found")
    return endpoint
