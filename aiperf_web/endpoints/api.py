"""The endpoints part of the JSON API (mounted on /api/v1/ by aiperf_web.api.site): the servers a
team benchmarks, their connection test and what it found about Dynamo session affinity. API keys
and secret headers go in and never come out (only whether there is a key, and header names)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from django.http import HttpRequest
from ninja import Router, Schema, Status
from pydantic import ConfigDict, Field

from aiperf_web.core.errors import Invalid
from aiperf_web.core.schemas import ApiKey, BaseUrl, Headers, ModelName, Name, Ref, Text, ref
from aiperf_web.endpoints import selectors, services
from aiperf_web.endpoints.models import Endpoint, ServerKind
from aiperf_web.teams.selectors import team_for_create
from runner import GENERATIONS, Generation

router = Router()

_KINDS: list[Any] = [str(kind) for kind in ServerKind.values]


class EndpointIn(Schema):
    model_config = ConfigDict(extra="forbid")

    name: Name
    team: UUID | None = None
    base_url: BaseUrl
    model: ModelName
    api_key: ApiKey | None = Field(default=None, description="stored encrypted, never returned")
    extra_headers: Headers = Field(
        default={}, description="plain headers: returned, and kept in each run's spec"
    )
    secret_headers: Headers = Field(
        default={},
        description="headers that are credentials (e.g. Azure's api-key): stored encrypted, "
        "never returned (only their names) nor kept in a run's spec",
    )
    server_kind: Text = Field(
        default=ServerKind.OPENAI.value,
        description=f"{', '.join(_KINDS[:-1])} or {_KINDS[-1]}",
        json_schema_extra={"enum": _KINDS},
    )


class EndpointPatch(Schema):
    model_config = ConfigDict(extra="forbid")

    name: Name | None = None
    base_url: BaseUrl | None = Field(
        default=None,
        description="a new base URL removes the stored API key unless `api_key` is sent in "
        "the same request: a key is never sent to a server it was not entered for",
    )
    model: ModelName | None = None
    api_key: ApiKey | None = Field(
        default=None,
        description='a new key; "" removes it; left out, the stored key is kept (unless '
        "`base_url` changes)",
    )
    extra_headers: Headers | None = None
    secret_headers: Headers | None = Field(
        default=None,
        description="replaces the stored secret headers ({} or null removes them); left out, "
        "they are kept (unless `base_url` changes, which removes them like the API key)",
    )
    server_kind: Text | None = Field(default=None, json_schema_extra={"enum": [*_KINDS, None]})


class AffinityOut(Schema):
    """What the endpoint's last connection test found about Dynamo session affinity."""

    generation: str | None = Field(
        description="the Dynamo generation, as a simulated target's dynamo_version names it: "
        + ", ".join(f"{g.value} ({g.label})" for g in Generation)
        + "; or null: no Dynamo session_control",
        json_schema_extra={"enum": [*GENERATIONS, None]},
    )
    header_affinity: bool | None = Field(
        description="X-Dynamo-Session-ID pins sessions; null when it cannot be told"
    )
    usable: list[str] = Field(description="affinity modes that will work on this server")
    nvext_actions: str | None = Field(description="affinity_actions dynamo-nvext must use")
    headline: str = Field(description="the generation and whether affinity is on, plainly")
    summary: str = Field(description="the engine's one-line account")
    server_message: str | None = Field(
        description="the server's answer to the probe, on one line (HTML stripped, at most "
        "500 characters)"
    )
    detected_at: datetime


class EndpointOut(Schema):
    id: UUID
    team: Ref
    name: str
    base_url: str
    model: str
    server_kind: str
    extra_headers: dict[str, str]
    has_api_key: bool
    secret_header_names: list[str] = Field(description="names of the stored secret headers")
    is_builtin: bool
    affinity_choices: list[str] = Field(
        description="affinity modes a run may use here: the kind's, narrowed by the detection"
    )
    affinity: AffinityOut | None = Field(
        description="Dynamo affinity found by the last connection test; null until one ran "
        "(and after the base URL or kind changed)"
    )
    created_at: datetime


class ConnectionOut(Schema):
    ok: bool
    message: str
    affinity: AffinityOut | None = None


def _endpoint_out(e: Endpoint) -> dict[str, Any]:
    return {
        "id": e.uuid,
        "team": ref(e.team, e.team.name),
        "name": e.name,
        "base_url": e.base_url,
        "model": e.model,
        "server_kind": e.server_kind,
        "extra_headers": e.extra_headers or {},
        "has_api_key": e.has_api_key,
        "secret_header_names": list(e.secret_header_names or ()),
        "is_builtin": e.is_builtin,
        "affinity_choices": list(e.affinity_choices),
        "affinity": _affinity_out(e),
        "created_at": e.created_at,
    }


def _affinity_out(e: Endpoint) -> dict[str, Any] | None:
    if e.affinity_detected_at is None:
        return None
    return {
        "generation": e.affinity_generation,
        "header_affinity": e.header_affinity,
        "usable": list(e.affinity_choices),
        "nvext_actions": e.nvext_actions,
        "headline": e.affinity_headline,
        "summary": e.affinity_summary or "",
        "server_message": e.affinity_server_message,
        "detected_at": e.affinity_detected_at,
    }


@router.get("/endpoints", response=list[EndpointOut], tags=["endpoints"])
def endpoint_list(request: HttpRequest) -> list[dict[str, Any]]:
    return [_endpoint_out(e) for e in selectors.endpoint_list(user=request.user)]


@router.post("/endpoints", response={201: EndpointOut}, tags=["endpoints"])
def endpoint_create(request: HttpRequest, payload: EndpointIn) -> Status[Any]:
    team_obj = team_for_create(user=request.user, team_id=payload.team)
    endpoint = services.endpoint_create(
        actor=request.user,
        team=team_obj,
        name=payload.name,
        base_url=payload.base_url,
        model=payload.model,
        api_key=payload.api_key,
        extra_headers=payload.extra_headers,
        secret_headers=payload.secret_headers,
        server_kind=payload.server_kind,
    )
    return Status(201, _endpoint_out(endpoint))


@router.get("/endpoints/{endpoint_id}", response=EndpointOut, tags=["endpoints"])
def endpoint_detail(request: HttpRequest, endpoint_id: str) -> dict[str, Any]:
    return _endpoint_out(selectors.endpoint_get(user=request.user, endpoint_id=endpoint_id))


@router.patch("/endpoints/{endpoint_id}", response=EndpointOut, tags=["endpoints"])
def endpoint_update(
    request: HttpRequest, endpoint_id: str, payload: EndpointPatch
) -> dict[str, Any]:
    endpoint = selectors.endpoint_get(user=request.user, endpoint_id=endpoint_id)
    changes: dict[str, Any] = payload.model_dump(exclude_unset=True)
    endpoint = services.endpoint_update(actor=request.user, endpoint=endpoint, **changes)
    return _endpoint_out(endpoint)


@router.delete("/endpoints/{endpoint_id}", response={204: None}, tags=["endpoints"])
def endpoint_delete(request: HttpRequest, endpoint_id: str) -> Status[Any]:
    endpoint = selectors.endpoint_get(user=request.user, endpoint_id=endpoint_id)
    services.endpoint_delete(actor=request.user, endpoint=endpoint)
    return Status(204, None)


@router.post("/endpoints/{endpoint_id}/test", response=ConnectionOut, tags=["endpoints"])
def endpoint_test(request: HttpRequest, endpoint_id: str) -> dict[str, Any]:
    """The engine's preflight: reachable, serves the model, speaks OpenAI; on a Dynamo
    endpoint also the affinity generation, stored on the endpoint (`affinity`)."""
    endpoint = selectors.endpoint_get(user=request.user, endpoint_id=endpoint_id)
    try:
        message = services.endpoint_test_connection(actor=request.user, endpoint=endpoint)
    except Invalid as exc:
        if "connection" not in exc.fields:
            raise
        return {"ok": False, "message": exc.fields["connection"], "affinity": None}
    return {"ok": True, "message": message, "affinity": _affinity_out(endpoint)}
