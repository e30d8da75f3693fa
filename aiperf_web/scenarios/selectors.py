"""Reads of traces and scenarios, always scoped to the requester's teams."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from aiperf_web.core.errors import NotFound
from aiperf_web.core.ids import parse_uuid
from aiperf_web.core.tags import tag_filter_value
from aiperf_web.scenarios.models import Scenario, Trace
from aiperf_web.teams.selectors import AnyUser, team_ids_for


def trace_list(*, user: AnyUser) -> QuerySet[Trace]:
    # The file body stays in the database unless asked for.
    return (
        Trace.objects.filter(team_id__in=team_ids_for(user=user))
        .defer("content_gz")
        .select_related("team")
        .order_by("team__name", "name")
    )


def trace_get(*, user: AnyUser, trace_id: object) -> Trace:
    uid = parse_uuid(trace_id)
    trace = trace_list(user=user).filter(uuid=uid).first() if uid else None
    if trace is None:
        raise NotFound("trace not found")
    return trace


def scenario_list(*, user: AnyUser, tag: str = "", search: str = "") -> QuerySet[Scenario]:
    qs = (
        Scenario.objects.filter(team_id__in=team_ids_for(user=user))
        .select_related("team")
        .prefetch_related("traces")
        .order_by("team__name", "name")
    )
    if tag:
        qs = qs.filter(tags__contains=tag_filter_value(tag))
    if search:
        qs = qs.filter(Q(name__icontains=search) | Q(description__icontains=search))
    return qs


def scenario_get(*, user: AnyUser, scenario_id: object) -> Scenario:
    uid = parse_uuid(scenario_id)
    scenario = scenario_list(user=user).filter(uuid=uid).first() if uid else None
    if scenario is None:
        raise NotFound("scenario not found")
    return scenario
