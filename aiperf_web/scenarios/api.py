"""The traces and scenarios part of the JSON API (mounted on /api/v1/ by aiperf_web.api.site):
upload or import traces, keep scenarios (traces plus a default run spec), and the engine's
RunSpec schema. Specs come from the engine's own RunSpec, so the OpenAPI schema documents
every knob with the engine's descriptions and bounds."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from django.http import HttpRequest
from ninja import File, Form, Router, Schema, Status
from ninja.files import UploadedFile
from pydantic import ConfigDict, Field

from aiperf_web.core.errors import Invalid
from aiperf_web.core.limits import DESCRIPTION_CHARS, SCENARIO_TRACES_MAX
from aiperf_web.core.schemas import Description, Name, Ref, Search, Tags, Text, TraceName, ref
from aiperf_web.scenarios import selectors, services
from aiperf_web.scenarios.models import Scenario, Trace
from aiperf_web.scenarios.samples import available_samples
from aiperf_web.teams.selectors import team_for_create
from runner import RunSpec

router = Router()


class TraceOut(Schema):
    id: UUID
    team: Ref
    name: str
    filename: str
    format: str
    size_bytes: int
    sha256: str
    sample: str
    stats: dict[str, Any]
    created_at: datetime


class SampleOut(Schema):
    key: str
    filename: str
    title: str


class ScenarioIn(Schema):
    model_config = ConfigDict(extra="forbid")

    name: Name
    team: UUID | None = Field(default=None, description="default: your only team")
    description: Description = ""
    tags: Tags = []
    traces: list[UUID] = Field(
        default=[],
        max_length=SCENARIO_TRACES_MAX,
        description="trace ids; none = the synthetic workload",
    )
    spec: RunSpec = Field(default_factory=RunSpec, description="the default run spec")


class ScenarioPatch(Schema):
    model_config = ConfigDict(extra="forbid")

    name: Name | None = None
    description: Description | None = None
    tags: Tags | None = None
    traces: list[UUID] | None = Field(default=None, max_length=SCENARIO_TRACES_MAX)
    spec: RunSpec | None = None


class ScenarioOut(Schema):
    id: UUID
    team: Ref
    name: str
    description: str = Field(max_length=DESCRIPTION_CHARS)
    tags: list[str]
    traces: list[Ref]
    spec: dict[str, Any]
    created_at: datetime
    updated_at: datetime


def _trace_out(t: Trace) -> dict[str, Any]:
    return {
        "id": t.uuid,
        "team": ref(t.team, t.team.name),
        "name": t.name,
        "filename": t.filename,
        "format": t.format,
        "size_bytes": t.size_bytes,
        "sha256": t.sha256,
        "sample": t.sample,
        "stats": t.stats,
        "created_at": t.created_at,
    }


def _scenario_out(sc: Scenario) -> dict[str, Any]:
    return {
        "id": sc.uuid,
        "team": ref(sc.team, sc.team.name),
        "name": sc.name,
        "description": sc.description,
        "tags": sc.tag_list,
        "traces": [ref(t, t.name) for t in sc.traces.all()],
        "spec": sc.spec,
        "created_at": sc.created_at,
        "updated_at": sc.updated_at,
    }


@router.get("/spec/schema", response=dict[str, Any], tags=["scenarios"])
def spec_schema(request: HttpRequest) -> dict[str, Any]:
    """The engine's RunSpec JSON Schema: every knob, its bounds and its meaning."""
    return RunSpec.model_json_schema()


# -- traces --


@router.get("/traces", response=list[TraceOut], tags=["traces"])
def trace_list(request: HttpRequest) -> list[dict[str, Any]]:
    return [_trace_out(t) for t in selectors.trace_list(user=request.user)]


@router.get("/traces/samples", response=list[SampleOut], tags=["traces"])
def trace_samples(request: HttpRequest) -> list[dict[str, Any]]:
    return [{"key": x.key, "filename": x.filename, "title": x.title} for x in available_samples()]


# A file, or a sample's key: the schema states that one of them is needed.
_FILE_OR_SAMPLE = {
    "requestBody": {
        "content": {
            "multipart/form-data": {
                "schema": {
                    "anyOf": [
                        {"required": ["file"], "properties": {"file": {"type": "string"}}},
                        {
                            "required": ["sample"],
                            "properties": {"sample": {"pattern": r"^[^\u0000]*[^\s\u0000]"}},
                        },
                    ]
                }
            }
        }
    }
}


@router.post("/traces", response={201: TraceOut}, tags=["traces"], openapi_extra=_FILE_OR_SAMPLE)
def trace_upload(
    request: HttpRequest,
    file: UploadedFile | None = File(None),  # type: ignore[type-arg]  # noqa: B008
    name: TraceName = Form(""),  # type: ignore[type-arg]  # noqa: B008
    team: Text = Form(""),  # type: ignore[type-arg]  # noqa: B008
    sample: Text = Form(  # type: ignore[type-arg]  # noqa: B008
        "",
        description="import a built-in sample instead of a file: its key, as GET "
        "/traces/samples lists them (a key unknown or not installed here is 422)",
    ),
) -> Status[Any]:
    """Upload a trace file (multipart) or import a built-in sample. The engine's loader
    validates it (errors name file, line and field) before anything is saved."""
    team_obj = team_for_create(user=request.user, team_id=team)
    if sample:
        trace = services.trace_import_sample(
            actor=request.user, team=team_obj, key=sample, name=name
        )
    elif file is None:
        raise Invalid.field("file", "upload a trace file (or name a built-in sample)")
    else:
        trace = services.trace_upload(
            actor=request.user,
            team=team_obj,
            filename=file.name or "trace",
            chunks=file.chunks(),
            name=name,
        )
    return Status(201, _trace_out(trace))


@router.get("/traces/{trace_id}", response=TraceOut, tags=["traces"])
def trace_detail(request: HttpRequest, trace_id: str) -> dict[str, Any]:
    return _trace_out(selectors.trace_get(user=request.user, trace_id=trace_id))


@router.delete("/traces/{trace_id}", response={204: None}, tags=["traces"])
def trace_delete(request: HttpRequest, trace_id: str) -> Status[Any]:
    trace = selectors.trace_get(user=request.user, trace_id=trace_id)
    services.trace_delete(actor=request.user, trace=trace)
    return Status(204, None)


# -- scenarios --


@router.get("/scenarios", response=list[ScenarioOut], tags=["scenarios"])
def scenario_list(request: HttpRequest, tag: Search = "", q: Search = "") -> list[dict[str, Any]]:
    return [_scenario_out(x) for x in selectors.scenario_list(user=request.user, tag=tag, search=q)]


@router.post("/scenarios", response={201: ScenarioOut}, tags=["scenarios"])
def scenario_create(request: HttpRequest, payload: ScenarioIn) -> Status[Any]:
    team_obj = team_for_create(user=request.user, team_id=payload.team)
    scenario = services.scenario_create(
        actor=request.user,
        team=team_obj,
        name=payload.name,
        description=payload.description,
        tags=payload.tags,
        trace_ids=payload.traces,
        spec=payload.spec.model_dump(mode="json"),
    )
    return Status(201, _scenario_out(scenario))


@router.get("/scenarios/{scenario_id}", response=ScenarioOut, tags=["scenarios"])
def scenario_detail(request: HttpRequest, scenario_id: str) -> dict[str, Any]:
    return _scenario_out(selectors.scenario_get(user=request.user, scenario_id=scenario_id))


@router.patch("/scenarios/{scenario_id}", response=ScenarioOut, tags=["scenarios"])
def scenario_update(
    request: HttpRequest, scenario_id: str, payload: ScenarioPatch
) -> dict[str, Any]:
    scenario = selectors.scenario_get(user=request.user, scenario_id=scenario_id)
    scenario = services.scenario_update(
        actor=request.user,
        scenario=scenario,
        name=payload.name,
        description=payload.description,
        tags=payload.tags,
        trace_ids=payload.traces,
        spec=None if payload.spec is None else payload.spec.model_dump(mode="json"),
    )
    return _scenario_out(scenario)


@router.delete("/scenarios/{scenario_id}", response={204: None}, tags=["scenarios"])
def scenario_delete(request: HttpRequest, scenario_id: str) -> Status[Any]:
    scenario = selectors.scenario_get(user=request.user, scenario_id=scenario_id)
    services.scenario_delete(actor=request.user, scenario=scenario)
    return Status(204, None)
