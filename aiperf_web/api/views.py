"""The JSON API under /api/v1/ (bearer tokens; OpenAPI at /api/v1/openapi.json).

Thin: parse (ninja validates bodies into the schemas), call a selector or service, shape the
answer. Service errors map to 404 / 403 / 422 (429 over a team's cap) JSON bodies naming the
field; unknown and other teams' ids are 404 alike.
"""

from __future__ import annotations

import logging
from typing import Any, cast

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.multipartparser import MultiPartParserError
from ninja import File, Form, NinjaAPI, Query, Schema, Status
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.files import UploadedFile
from ninja.security import HttpBearer
from pydantic import BaseModel

from aiperf_web.api import schemas as s
from aiperf_web.api.schemas import Text
from aiperf_web.core.errors import Forbidden, Invalid, NotFound, TooMany
from aiperf_web.core.streaming import stream_response
from aiperf_web.endpoints import selectors as endpoint_sel
from aiperf_web.endpoints import services as endpoint_svc
from aiperf_web.endpoints.models import Endpoint
from aiperf_web.reports.api import router as reports_router
from aiperf_web.runs import selectors as run_sel
from aiperf_web.runs import services as run_svc
from aiperf_web.runs.models import Run
from aiperf_web.scenarios import selectors as scenario_sel
from aiperf_web.scenarios import services as scenario_svc
from aiperf_web.scenarios.models import Scenario, Trace
from aiperf_web.scenarios.samples import available_samples
from aiperf_web.teams import selectors as team_sel
from aiperf_web.teams.services import api_token_authenticate
from runner import RunSpec

log = logging.getLogger(__name__)


class TokenAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Any:
        user = api_token_authenticate(raw=token)
        if user is not None:
            request.user = user
        return user


api = NinjaAPI(
    title="aiperf-web API",
    version="1",
    description="Run and monitor agentic LLM-inference benchmarks. "
    "Authenticate with `Authorization: Bearer <token>` (`manage.py create_api_token <user>`).",
    auth=TokenAuth(),
    urls_namespace="api",
    docs_url="/docs",
    openapi_url="/openapi.json",
)


# -- errors --


def _error(
    request: HttpRequest, status: int, detail: str, fields: dict[str, str] | None = None
) -> HttpResponse:
    body = {
        "detail": detail,
        "errors": [{"field": k, "message": v} for k, v in (fields or {}).items()],
    }
    return api.create_response(request, body, status=status)


@api.exception_handler(NotFound)
def _not_found(request: HttpRequest, exc: NotFound) -> HttpResponse:
    return _error(request, 404, str(exc))


@api.exception_handler(Forbidden)
def _forbidden(request: HttpRequest, exc: Forbidden) -> HttpResponse:
    return _error(request, 403, str(exc))


@api.exception_handler(Invalid)
def _invalid(request: HttpRequest, exc: Invalid) -> HttpResponse:
    return _error(request, 422, str(exc), exc.fields)


@api.exception_handler(TooMany)
def _too_many(request: HttpRequest, exc: TooMany) -> HttpResponse:
    # A quota, not bad input: the same request succeeds once runs have started or ended.
    return _error(request, 429, str(exc), exc.fields)


@api.exception_handler(NinjaValidationError)
def _schema_invalid(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    fields: dict[str, str] = {}
    for error in exc.errors:
        # ("body", "payload", "overrides", "duration_s") -> "overrides.duration_s"
        loc = [
            str(p)
            for p in error.get("loc", ())
            if p not in ("body", "payload", "query", "form", "file")
        ]
        loc = [p for p in loc if p not in ("endpoint", "simulated") or len(loc) == 1]
        fields.setdefault(
            ".".join(loc) or "body", str(error.get("msg", "invalid")).removeprefix("Value error, ")
        )
    return _error(request, 422, "; ".join(f"{k}: {v}" for k, v in fields.items()), fields)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return _error(request, 401, "authentication required: Authorization: Bearer <token>")


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    return _error(request, exc.status_code, str(exc))


@api.exception_handler(RequestDataTooBig)
def _too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    # Normally refused earlier, by Content-Length (core/limits.py); this is Django's own check.
    cap = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return _error(
        request, 413, f"the request body is over {cap} bytes: send less in one request", {}
    )


@api.exception_handler(MultiPartParserError)
@api.exception_handler(TooManyFieldsSent)
@api.exception_handler(TooManyFilesSent)
def _bad_multipart(request: HttpRequest, exc: Exception) -> HttpResponse:
    message = (
        f"malformed multipart/form-data body ({exc}): send one form with a boundary in its "
        "Content-Type (as curl -F or any HTTP library builds it), part headers under 1 KB "
        "(a file name of at most a few hundred characters) and fewer than 100 files"
    )
    return _error(request, 400, message, {"body": message})


@api.exception_handler(Exception)
def _unexpected(request: HttpRequest, exc: Exception) -> HttpResponse:
    # Never a traceback to the caller: the log keeps it.
    log.exception("API error on %s %s", request.method, request.path)
    return _error(request, 500, "internal error; the server log has the details")


# -- shaping --


def _ref(obj: Any, name: str) -> dict[str, Any]:
    return {"id": obj.uuid if obj is not None else None, "name": name}


def _trace_out(t: Trace) -> dict[str, Any]:
    return {
        "id": t.uuid,
        "team": _ref(t.team, t.team.name),
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
        "team": _ref(sc.team, sc.team.name),
        "name": sc.name,
        "description": sc.description,
        "tags": sc.tag_list,
        "traces": [_ref(t, t.name) for t in sc.traces.all()],
        "spec": sc.spec,
        "created_at": sc.created_at,
        "updated_at": sc.updated_at,
    }


def _endpoint_out(e: Endpoint) -> dict[str, Any]:
    return {
        "id": e.uuid,
        "team": _ref(e.team, e.team.name),
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
        "usable": list(e.affinity_usable or []),
        "nvext_actions": e.nvext_actions,
        "headline": e.affinity_headline,
        "summary": e.affinity_summary or "",
        "server_message": e.affinity_server_message,
        "detected_at": e.affinity_detected_at,
    }


def _run_out(r: Run) -> dict[str, Any]:
    return {
        "id": r.uuid,
        "team": _ref(r.team, r.team.name),
        "status": r.status,
        "reason": r.reason,
        "scenario": _ref(r.scenario, r.scenario_name),
        "endpoint": _ref(r.endpoint, r.endpoint_name),
        "target_kind": r.target_kind,
        "summary": r.summary,
        "tags": r.tag_list,
        "notes": r.notes,
        "is_baseline": r.is_baseline,
        "created_at": r.created_at,
        "started_at": r.started_at,
        "finished_at": r.finished_at,
        "cancel_requested": r.cancel_requested_at is not None,
        "records_count": r.records_count,
        "samples_count": r.samples_count,
        "rerun_of": r.rerun_of.uuid if r.rerun_of is not None else None,
    }


def _run_detail(r: Run) -> dict[str, Any]:
    latest = run_sel.run_latest_sample(run_obj=r)
    progress = None
    if latest is not None:
        d = latest.data
        progress = {
            k: d.get(k) for k in ("t_s", "progress", "eta_s", "requests", "errors", "in_flight")
        }
    return {**_run_out(r), "spec": r.spec, "overrides": r.overrides, "progress": progress}


def _team_for_create(request: HttpRequest, team_id: object) -> Any:
    from aiperf_web.teams.models import Role

    if team_id:
        return team_sel.team_get_for_user(user=request.user, team_id=str(team_id))
    teams = team_sel.teams_with_role(user=request.user, role=Role.MEMBER)
    if len(teams) == 1:
        return teams[0]
    if not teams:
        raise Forbidden("you are not a member (or admin) of any team")
    raise Invalid.field("team", "you are in several teams: name one")


# The reports (compare, verdict, leak monitor, A/B): their own router, same auth and errors.
api.add_router("", reports_router)


# -- teams --


@api.get("/teams", response=list[s.TeamOut], tags=["teams"])
def teams(request: HttpRequest) -> list[dict[str, Any]]:
    out = []
    for team in team_sel.team_list_for_user(user=request.user):
        role = team_sel.role_in_team(user=request.user, team=team)
        out.append({"id": team.uuid, "name": team.name, "role": str(role)})
    return out


@api.get("/spec/schema", response=dict[str, Any], tags=["scenarios"])
def spec_schema(request: HttpRequest) -> dict[str, Any]:
    """The engine's RunSpec JSON Schema: every knob, its bounds and its meaning."""
    return RunSpec.model_json_schema()


# -- traces --


@api.get("/traces", response=list[s.TraceOut], tags=["traces"])
def trace_list(request: HttpRequest) -> list[dict[str, Any]]:
    return [_trace_out(t) for t in scenario_sel.trace_list(user=request.user)]


@api.get("/traces/samples", response=list[s.SampleOut], tags=["traces"])
def trace_samples(request: HttpRequest) -> list[dict[str, Any]]:
    return [{"key": x.key, "filename": x.filename, "title": x.title} for x in available_samples()]


@api.post("/traces", response={201: s.TraceOut}, tags=["traces"])
def trace_upload(
    request: HttpRequest,
    file: UploadedFile | None = File(None),  # type: ignore[type-arg]  # noqa: B008
    name: Text = Form(""),  # type: ignore[type-arg]  # noqa: B008
    team: Text = Form(""),  # type: ignore[type-arg]  # noqa: B008
    sample: Text = Form(  # type: ignore[type-arg]  # noqa: B008
        "", description="import a built-in sample instead of a file"
    ),
) -> Status[Any]:
    """Upload a trace file (multipart) or import a built-in sample. The engine's loader
    validates it (errors name file, line and field) before anything is saved."""
    team_obj = _team_for_create(request, team)
    if sample:
        trace = scenario_svc.trace_import_sample(
            actor=request.user, team=team_obj, key=sample, name=name
        )
    elif file is None:
        raise Invalid.field("file", "upload a trace file (or name a built-in sample)")
    else:
        trace = scenario_svc.trace_upload(
            actor=request.user,
            team=team_obj,
            filename=file.name or "trace",
            chunks=file.chunks(),
            name=name,
        )
    return Status(201, _trace_out(trace))


@api.get("/traces/{trace_id}", response=s.TraceOut, tags=["traces"])
def trace_detail(request: HttpRequest, trace_id: str) -> dict[str, Any]:
    return _trace_out(scenario_sel.trace_get(user=request.user, trace_id=trace_id))


@api.delete("/traces/{trace_id}", response={204: None}, tags=["traces"])
def trace_delete(request: HttpRequest, trace_id: str) -> Status[Any]:
    trace = scenario_sel.trace_get(user=request.user, trace_id=trace_id)
    scenario_svc.trace_delete(actor=request.user, trace=trace)
    return Status(204, None)


# -- scenarios --


@api.get("/scenarios", response=list[s.ScenarioOut], tags=["scenarios"])
def scenario_list(request: HttpRequest, tag: Text = "", q: Text = "") -> list[dict[str, Any]]:
    return [
        _scenario_out(x) for x in scenario_sel.scenario_list(user=request.user, tag=tag, search=q)
    ]


@api.post("/scenarios", response={201: s.ScenarioOut}, tags=["scenarios"])
def scenario_create(request: HttpRequest, payload: s.ScenarioIn) -> Status[Any]:
    team_obj = _team_for_create(request, payload.team)
    scenario = scenario_svc.scenario_create(
        actor=request.user,
        team=team_obj,
        name=payload.name,
        description=payload.description,
        tags=payload.tags,
        trace_ids=payload.traces,
        spec=payload.spec.model_dump(mode="json"),
    )
    return Status(201, _scenario_out(scenario))


@api.get("/scenarios/{scenario_id}", response=s.ScenarioOut, tags=["scenarios"])
def scenario_detail(request: HttpRequest, scenario_id: str) -> dict[str, Any]:
    return _scenario_out(scenario_sel.scenario_get(user=request.user, scenario_id=scenario_id))


@api.patch("/scenarios/{scenario_id}", response=s.ScenarioOut, tags=["scenarios"])
def scenario_update(
    request: HttpRequest, scenario_id: str, payload: s.ScenarioPatch
) -> dict[str, Any]:
    scenario = scenario_sel.scenario_get(user=request.user, scenario_id=scenario_id)
    scenario = scenario_svc.scenario_update(
        actor=request.user,
        scenario=scenario,
        name=payload.name,
        description=payload.description,
        tags=payload.tags,
        trace_ids=payload.traces,
        spec=None if payload.spec is None else payload.spec.model_dump(mode="json"),
    )
    return _scenario_out(scenario)


@api.delete("/scenarios/{scenario_id}", response={204: None}, tags=["scenarios"])
def scenario_delete(request: HttpRequest, scenario_id: str) -> Status[Any]:
    scenario = scenario_sel.scenario_get(user=request.user, scenario_id=scenario_id)
    scenario_svc.scenario_delete(actor=request.user, scenario=scenario)
    return Status(204, None)


# -- endpoints --


@api.get("/endpoints", response=list[s.EndpointOut], tags=["endpoints"])
def endpoint_list(request: HttpRequest) -> list[dict[str, Any]]:
    return [_endpoint_out(e) for e in endpoint_sel.endpoint_list(user=request.user)]


@api.post("/endpoints", response={201: s.EndpointOut}, tags=["endpoints"])
def endpoint_create(request: HttpRequest, payload: s.EndpointIn) -> Status[Any]:
    team_obj = _team_for_create(request, payload.team)
    endpoint = endpoint_svc.endpoint_create(
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


@api.get("/endpoints/{endpoint_id}", response=s.EndpointOut, tags=["endpoints"])
def endpoint_detail(request: HttpRequest, endpoint_id: str) -> dict[str, Any]:
    return _endpoint_out(endpoint_sel.endpoint_get(user=request.user, endpoint_id=endpoint_id))


@api.patch("/endpoints/{endpoint_id}", response=s.EndpointOut, tags=["endpoints"])
def endpoint_update(
    request: HttpRequest, endpoint_id: str, payload: s.EndpointPatch
) -> dict[str, Any]:
    endpoint = endpoint_sel.endpoint_get(user=request.user, endpoint_id=endpoint_id)
    changes: dict[str, Any] = payload.model_dump(exclude_unset=True)
    endpoint = endpoint_svc.endpoint_update(actor=request.user, endpoint=endpoint, **changes)
    return _endpoint_out(endpoint)


@api.delete("/endpoints/{endpoint_id}", response={204: None}, tags=["endpoints"])
def endpoint_delete(request: HttpRequest, endpoint_id: str) -> Status[Any]:
    endpoint = endpoint_sel.endpoint_get(user=request.user, endpoint_id=endpoint_id)
    endpoint_svc.endpoint_delete(actor=request.user, endpoint=endpoint)
    return Status(204, None)


@api.post("/endpoints/{endpoint_id}/test", response=s.ConnectionOut, tags=["endpoints"])
def endpoint_test(request: HttpRequest, endpoint_id: str) -> dict[str, Any]:
    """The engine's preflight: reachable, serves the model, speaks OpenAI; on a Dynamo
    endpoint also the affinity generation, stored on the endpoint (`affinity`)."""
    endpoint = endpoint_sel.endpoint_get(user=request.user, endpoint_id=endpoint_id)
    try:
        message = endpoint_svc.endpoint_test_connection(actor=request.user, endpoint=endpoint)
    except Invalid as exc:
        if "connection" not in exc.fields:
            raise
        return {"ok": False, "message": exc.fields["connection"], "affinity": None}
    return {"ok": True, "message": message, "affinity": _affinity_out(endpoint)}


# -- runs --


class RunQuery(Schema):
    status: Text = ""
    scenario: Text = ""
    endpoint: Text = ""
    tag: Text = ""
    q: Text = ""
    created_from: Text = ""
    created_to: Text = ""
    baseline: bool | None = None
    policy: Text = ""
    scope: Text = ""
    limit: int = 50
    offset: int = 0


# Far past any real list, and well inside a 64-bit SQL integer (SQLite overflows past it).
MAX_OFFSET = 1_000_000_000


def _date(value: str, field: str) -> Any:
    from datetime import date

    if not value:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise Invalid.field(field, f"{value!r} is not a date (YYYY-MM-DD)") from None


@api.get("/runs", response=s.RunPage, tags=["runs"])
def run_list(request: HttpRequest, query: Query[RunQuery]) -> dict[str, Any]:
    if not 1 <= query.limit <= 500:
        raise Invalid.field("limit", "between 1 and 500")
    if not 0 <= query.offset <= MAX_OFFSET:
        raise Invalid.field("offset", f"between 0 and {MAX_OFFSET}")
    filters = run_sel.RunFilters(
        status=query.status,
        scenario=query.scenario,
        endpoint=query.endpoint,
        tag=query.tag,
        search=query.q,
        created_from=_date(query.created_from, "created_from"),
        created_to=_date(query.created_to, "created_to"),
        baseline=query.baseline,
        policy=query.policy,
        scope=query.scope,
    )
    qs = run_sel.run_list(user=request.user, filters=filters).select_related(
        "scenario", "endpoint", "rerun_of"
    )
    page = list(qs[query.offset : query.offset + query.limit])
    return {
        "items": [_run_out(r) for r in page],
        "count": qs.count(),
        "limit": query.limit,
        "offset": query.offset,
    }


@api.post("/runs", response={201: s.RunDetailOut}, tags=["runs"])
def run_create(request: HttpRequest, payload: s.RunCreate) -> Status[Any]:
    """Launch a run: scenario + endpoint (or "simulated") + overrides of any RunSpec knob.
    Answers at once with the run `queued`; a worker picks it up."""
    overrides: dict[str, Any] = cast(BaseModel, payload.overrides).model_dump(
        exclude_unset=True, mode="json"
    )
    created = run_svc.run_launch(
        actor=request.user,
        scenario_id=payload.scenario,
        endpoint_id=payload.endpoint,
        overrides=overrides,
        tags=payload.tags,
        notes=payload.notes,
    )
    return Status(201, _run_detail(run_sel.run_get(user=request.user, run_id=created.uuid)))


@api.get("/runs/{run_id}", response=s.RunDetailOut, tags=["runs"])
def run_detail(request: HttpRequest, run_id: str) -> dict[str, Any]:
    return _run_detail(run_sel.run_get(user=request.user, run_id=run_id))


@api.patch("/runs/{run_id}", response=s.RunDetailOut, tags=["runs"])
def run_update(request: HttpRequest, run_id: str, payload: s.RunPatch) -> dict[str, Any]:
    run_obj = run_sel.run_get(user=request.user, run_id=run_id)
    run_svc.run_update(
        actor=request.user, run_obj=run_obj, **payload.model_dump(exclude_unset=True)
    )
    return _run_detail(run_sel.run_get(user=request.user, run_id=run_id))


@api.delete("/runs/{run_id}", response={204: None}, tags=["runs"])
def run_delete(request: HttpRequest, run_id: str) -> Status[Any]:
    run_svc.run_delete(
        actor=request.user, run_obj=run_sel.run_get(user=request.user, run_id=run_id)
    )
    return Status(204, None)


@api.post("/runs/{run_id}/cancel", response=s.RunDetailOut, tags=["runs"])
def run_cancel(request: HttpRequest, run_id: str) -> dict[str, Any]:
    """Cancel: a queued run ends at once; a running one stops within 2 s, keeping its data."""
    run_obj = run_sel.run_get(user=request.user, run_id=run_id)
    run_svc.run_cancel(actor=request.user, run_obj=run_obj)
    return _run_detail(run_sel.run_get(user=request.user, run_id=run_id))


@api.post("/runs/{run_id}/rerun", response={201: s.RunDetailOut}, tags=["runs"])
def run_rerun(request: HttpRequest, run_id: str) -> Status[Any]:
    run_obj = run_sel.run_get(user=request.user, run_id=run_id)
    created = run_svc.run_rerun(actor=request.user, run_obj=run_obj)
    return Status(201, _run_detail(run_sel.run_get(user=request.user, run_id=created.uuid)))


@api.get("/runs/{run_id}/samples", response=s.SamplePage, tags=["runs"])
def run_samples(
    request: HttpRequest, run_id: str, after_seq: int = -1, limit: int = 1000
) -> dict[str, Any]:
    """The stored snapshots (the live time series) after `after_seq`, in order."""
    if not 1 <= limit <= 10_000:
        raise Invalid.field("limit", "between 1 and 10000")
    run_obj = run_sel.run_get(user=request.user, run_id=run_id)
    items = [
        {"seq": x.seq, "t_s": x.t_s, "data": x.data}
        for x in run_sel.run_samples(run_obj=run_obj, after_seq=after_seq, limit=limit)
    ]
    return {"items": items, "last_seq": items[-1]["seq"] if items else after_seq}


@api.get("/runs/{run_id}/records.jsonl", tags=["runs"])
def run_records(
    request: HttpRequest, run_id: str, include_warmup: bool = False
) -> StreamingHttpResponse:
    """Per-request records, one JSON object per line, streamed. Warmup requests only with
    `include_warmup=true`."""
    run_obj = run_sel.run_get(user=request.user, run_id=run_id)
    return stream_response(
        request,
        run_sel.run_records_jsonl(run_obj=run_obj, include_warmup=include_warmup),
        content_type="application/x-ndjson",
        filename=f"run-{run_obj.uuid}-records.jsonl",
    )


@api.get("/runs/{run_id}/summary.json", response=dict[str, Any], tags=["runs"])
def run_summary_json(request: HttpRequest, run_id: str) -> dict[str, Any]:
    run_obj = run_sel.run_get(user=request.user, run_id=run_id)
    return {"id": str(run_obj.uuid), "status": run_obj.status, "summary": run_obj.summary}


@api.get("/runs/{run_id}/summary.csv", tags=["runs"])
def run_summary_csv(request: HttpRequest, run_id: str) -> HttpResponse:
    run_obj = run_sel.run_get(user=request.user, run_id=run_id)
    response = HttpResponse(run_sel.run_summary_csv(run_obj=run_obj), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="run-{run_obj.uuid}-summary.csv"'
    return response
