"""The runs part of the JSON API (mounted on /api/v1/ by aiperf_web.api.site): launch with
overrides of any RunSpec knob, list and filter, cancel, re-run, and read what a run stored
(snapshots, per-request records, the summary) and its verdict (runs/verdict.py)."""

from __future__ import annotations

import re
from dataclasses import asdict
from datetime import date, datetime
from typing import Any, Literal, Optional, cast
from uuid import UUID

from django.db import transaction
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from ninja import Query, Router, Schema, Status
from pydantic import BaseModel, ConfigDict, Field, StrictBool, create_model

from aiperf_web.core.errors import Conflict, Invalid
from aiperf_web.core.limits import NOTES_CHARS, NOTES_LIST_CHARS
from aiperf_web.core.schemas import Notes, Ref, Search, Tags, Text, ref
from aiperf_web.core.streaming import stream_response
from aiperf_web.runs import selectors, services
from aiperf_web.runs.line import run_wait
from aiperf_web.runs.models import Run
from aiperf_web.runs.verdict import run_verdict, scenario_baseline
from runner import RunSpec

router = Router()

# Every RunSpec knob, optional: what a launch may override. The workload belongs to the
# scenario; the target comes from the endpoint, so it may only be adjusted field by field.
_override_fields: dict[str, Any] = {
    name: (Optional[field.annotation], Field(default=None, description=field.description))  # noqa: UP045
    for name, field in RunSpec.model_fields.items()
    if name not in ("workload", "target")
}
_override_fields["target"] = (
    Optional[dict[str, Any]],  # noqa: UP045
    Field(default=None, description="fields of the target to change (e.g. simulated workers)"),
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


RunOverrides: type[BaseModel] = create_model(
    "RunOverrides",
    __base__=_Strict,
    __doc__="Any RunSpec knob; what is left out keeps the scenario's value.",
    **_override_fields,
)


class RunCreate(Schema):
    model_config = ConfigDict(extra="forbid")

    scenario: Text = Field(description="scenario id")
    endpoint: Text = Field(
        default="simulated", description='endpoint id, or "simulated" for the simulated cluster'
    )
    overrides: RunOverrides = Field(default_factory=RunOverrides)  # type: ignore[valid-type]
    tags: Tags = []
    notes: Notes = ""
    allow_overlap: StrictBool = Field(
        default=False,
        description="start even while another run uses the endpoint (the endpoint lease is "
        "skipped; the overlap is recorded on both runs and shown on their reports)",
    )


class RunPatch(Schema):
    model_config = ConfigDict(extra="forbid")

    tags: Tags | None = None
    notes: Notes | None = None
    is_baseline: StrictBool | None = None


class OverlapOut(Schema):
    run: UUID
    name: str = Field(description="scenario on endpoint")
    at: datetime = Field(description="when the overlap began")


class RunOut(Schema):
    id: UUID
    team: Ref
    status: str
    reason: str
    scenario: Ref
    endpoint: Ref
    target_kind: str
    summary: dict[str, Any] | None
    tags: list[str]
    notes: str = Field(
        max_length=NOTES_CHARS,
        description=f"in lists the first {NOTES_LIST_CHARS} characters (notes_truncated says "
        "whether more exist); whole in a run's own answer",
    )
    notes_truncated: bool = Field(description="notes were cut to fit the list")
    is_baseline: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    cancel_requested: bool
    records_count: int
    samples_count: int
    rerun_of: UUID | None
    allow_overlap: bool = Field(description="it may share its endpoint with another run")
    overlaps: list[OverlapOut] = Field(
        description="the runs it ran beside on its endpoint (an opted-in overlap), and when "
        "each overlap began; empty when it had the endpoint to itself"
    )


class CheckOut(Schema):
    key: str
    label: str
    unit: str
    better: str
    baseline: float | None
    value: float | None
    delta: float | None
    delta_pct: float | None
    status: str


class RunCheckOut(Schema):
    key: str = Field(description="status, drain, error_share, cut_by_stop_share, slo_goodput")
    label: str
    status: Literal["pass", "fail", "n/a"]
    value: float | None = Field(description="the share in %; the orphaned copies left (drain)")
    limit: float | None = Field(description="the AIPERF_VERDICT_* setting it is held to")
    message: str


class VerdictOut(Schema):
    run: str
    baseline: str | None = Field(description="the baseline the figures were compared with")
    verdict: Literal["pass", "fail", "pending"] = Field(
        description="fail: the run did not succeed, its drain check found orphaned copies, its "
        "error share or share of requests cut by the stop is over its limit, too few requests "
        "met its SLOs, or a figure regressed against the baseline; pending: not ended yet"
    )
    reasons: list[str] = Field(description="why it fails, one sentence each")
    run_checks: list[RunCheckOut] = Field(description="the run's own checks (no baseline needed)")
    regressions: list[str] = Field(description="the figures worse than the baseline's")
    checks: list[CheckOut] = Field(description="figure by figure against the baseline")
    drain: dict[str, Any] | None
    message: str


class WaitHolderOut(Schema):
    id: UUID | None = Field(description="null for a run of another team (not identified)")
    name: str
    ends_in_s: float | None = Field(description="by its duration_s, when it has one")


class WaitOut(Schema):
    reason: Literal["no_worker", "partner", "team_cap", "endpoint", "slots", "line", "starting"] = (
        Field(
            description="no_worker: no worker consumed the runs queue within AIPERF_STALE_RUN_S; "
            "partner: the first run of its A/B pair has not ended; team_cap: its team runs its cap "
            "(AIPERF_TEAM_MAX_RUNNING, or AIPERF_TEAM_SLOT_SHARE of the worker slots); endpoint: "
            "another run holds its endpoint (the endpoint lease; waits_for names it); slots: every "
            "worker slot is taken; line: runs ahead of it take the free slots; starting: a worker "
            "is taking it"
        )
    )
    message: str = Field(description="the same in a sentence")
    place: int = Field(description="its place in line: 1 starts next")
    ahead: int = Field(description="runs that start before it")
    waits_for: list[WaitHolderOut] = Field(description="the runs whose end it waits for")
    workers: int = Field(description="workers seen consuming the runs queue")
    slots: int = Field(description="their slots (runs they execute at once)")
    running: int = Field(description="runs executing, of every team")


class ProgressOut(Schema):
    t_s: float | None = Field(description="run time of the snapshot")
    progress: float | None = Field(description="0..1 of the nearest stop condition")
    eta_s: float | None
    requests: int | None = Field(description="requests that ended (warmup not counted)")
    errors: int | None
    in_flight: int | None
    ttft_ms: dict[str, float | None] | None = Field(description="p50, p90, p99 so far")
    worker_switches: int | None = Field(description="a session moved to another client worker")
    orphaned_session_copies: int | None = Field(
        description="session copies left on client workers their session no longer uses"
    )


class RunDetailOut(RunOut):
    spec: dict[str, Any]
    overrides: dict[str, Any]
    progress: ProgressOut | None = Field(
        description="the latest live snapshot's key figures; null before the first"
    )
    verdict: VerdictOut
    waiting: WaitOut | None = Field(
        description="a queued run: why it has not started and its place in line; else null"
    )


class RunItem(RunOut):
    notes: str = Field(
        max_length=NOTES_LIST_CHARS,
        description=f"the first {NOTES_LIST_CHARS} characters (notes_truncated says whether "
        "more exist; GET /runs/{id} has them whole)",
    )


class RunPage(Schema):
    items: list[RunItem]
    count: int
    limit: int
    offset: int


class SampleItem(Schema):
    seq: int
    t_s: float
    data: dict[str, Any]


class SamplePage(Schema):
    items: list[SampleItem]
    last_seq: int


# Far past any real list, and well inside a 64-bit SQL integer (SQLite overflows past it).
MAX_OFFSET = 1_000_000_000
# A day as YYYY-MM-DD, or nothing (the filter is off).
_DAY = r"^([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01]))?$"
_STATUS = Literal["", "queued", "running", "succeeded", "failed", "cancelled"]


class RunQuery(Schema):
    status: _STATUS = Field(default="", description="one status, or all")
    scenario: Search = ""
    endpoint: Search = ""
    tag: Search = ""
    q: Search = ""
    created_from: Search = Field(
        default="", description="YYYY-MM-DD", json_schema_extra={"pattern": _DAY}
    )
    created_to: Search = Field(
        default="", description="YYYY-MM-DD", json_schema_extra={"pattern": _DAY}
    )
    baseline: bool | None = None
    policy: Search = ""
    scope: Search = ""
    limit: int = Field(default=50, ge=1, le=500)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)


def _run_out(r: Run, *, listed: bool = False) -> dict[str, Any]:
    """A run as the API shows it; `listed`: as lists do, its notes cut (from the query's
    `notes_head`, selectors.run_list: the whole notes are never read for a list)."""
    if listed:
        head: str = getattr(r, "notes_head", None) or ""
        notes, truncated = head[:NOTES_LIST_CHARS], len(head) > NOTES_LIST_CHARS
    else:
        notes, truncated = r.notes, False
    return {
        "id": r.uuid,
        "team": ref(r.team, r.team.name),
        "status": r.status,
        "reason": r.reason,
        "scenario": ref(r.scenario, r.scenario_name),
        "endpoint": ref(r.endpoint, r.endpoint_name),
        "target_kind": r.target_kind,
        "summary": r.summary,
        "tags": r.tag_list,
        "notes": notes,
        "notes_truncated": truncated,
        "is_baseline": r.is_baseline,
        "created_at": r.created_at,
        "started_at": r.started_at,
        "finished_at": r.finished_at,
        "cancel_requested": r.cancel_requested_at is not None,
        "records_count": r.records_count,
        "samples_count": r.samples_count,
        "rerun_of": r.rerun_of.uuid if r.rerun_of is not None else None,
        "allow_overlap": r.allow_overlap,
        "overlaps": r.overlaps or [],
    }


def _run_detail(r: Run) -> dict[str, Any]:
    latest = selectors.run_latest_sample(run_obj=r)
    progress = None
    if latest is not None:
        d = latest.data
        keys = ("t_s", "progress", "eta_s", "requests", "errors", "in_flight", "ttft_ms")
        progress = {k: d.get(k) for k in keys}
        # What tells a leak as it grows (`python -m runner service watch` shows them live).
        routing = d.get("routing") or {}
        progress["worker_switches"] = routing.get("worker_switches")
        progress["orphaned_session_copies"] = routing.get("orphaned_session_copies")
    return {
        **_run_out(r),
        "spec": r.spec,
        "overrides": r.overrides,
        "progress": progress,
        "verdict": run_verdict(run_obj=r, baseline=scenario_baseline(run_obj=r)),
        "waiting": None if (wait := run_wait(r)) is None else asdict(wait),
    }


def _date(value: str, field: str) -> date | None:
    if not value:
        return None
    try:
        if not re.fullmatch(_DAY, value):  # fromisoformat takes other forms too (20240131)
            raise ValueError(value)
        return date.fromisoformat(value)
    except ValueError:
        raise Invalid.field(field, f"{value!r} is not a date (YYYY-MM-DD)") from None


@router.get("/runs", response=RunPage, tags=["runs"])
def run_list(request: HttpRequest, query: Query[RunQuery]) -> dict[str, Any]:
    if not 1 <= query.limit <= 500:
        raise Invalid.field("limit", "between 1 and 500")
    if not 0 <= query.offset <= MAX_OFFSET:
        raise Invalid.field("offset", f"between 0 and {MAX_OFFSET}")
    filters = selectors.RunFilters(
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
    qs = selectors.run_list(user=request.user, filters=filters).select_related(
        "scenario", "endpoint", "rerun_of"
    )
    page = list(qs[query.offset : query.offset + query.limit])
    return {
        "items": [_run_out(r, listed=True) for r in page],
        "count": qs.count(),
        "limit": query.limit,
        "offset": query.offset,
    }


@router.post("/runs", response={201: RunDetailOut}, tags=["runs"])
def run_create(request: HttpRequest, payload: RunCreate) -> Status[Any]:
    """Launch a run: scenario + endpoint (or "simulated") + overrides of any RunSpec knob.
    Answers at once with the run `queued`; a worker picks it up."""
    overrides: dict[str, Any] = cast(BaseModel, payload.overrides).model_dump(
        exclude_unset=True, mode="json"
    )
    # One transaction around launch and read: the run is enqueued on commit, so the answer
    # describes it as created (`queued`), never as a fast worker has already moved it.
    with transaction.atomic():
        created = services.run_launch(
            actor=request.user,
            scenario_id=payload.scenario,
            endpoint_id=payload.endpoint,
            overrides=overrides,
            tags=payload.tags,
            notes=payload.notes,
            allow_overlap=payload.allow_overlap,
        )
        detail = _run_detail(selectors.run_get(user=request.user, run_id=created.uuid))
    return Status(201, detail)


@router.get("/runs/{run_id}", response=RunDetailOut, tags=["runs"])
def run_detail(request: HttpRequest, run_id: str) -> dict[str, Any]:
    return _run_detail(selectors.run_get(user=request.user, run_id=run_id))


@router.patch("/runs/{run_id}", response=RunDetailOut, tags=["runs"])
def run_update(request: HttpRequest, run_id: str, payload: RunPatch) -> dict[str, Any]:
    run_obj = selectors.run_get(user=request.user, run_id=run_id)
    services.run_update(
        actor=request.user, run_obj=run_obj, **payload.model_dump(exclude_unset=True)
    )
    return _run_detail(selectors.run_get(user=request.user, run_id=run_id))


@router.delete("/runs/{run_id}", response={204: None}, tags=["runs"])
def run_delete(request: HttpRequest, run_id: str) -> Status[Any]:
    services.run_delete(
        actor=request.user, run_obj=selectors.run_get(user=request.user, run_id=run_id)
    )
    return Status(204, None)


@router.post("/runs/{run_id}/cancel", response=RunDetailOut, tags=["runs"])
def run_cancel(request: HttpRequest, run_id: str) -> dict[str, Any]:
    """Cancel: a queued run ends at once; a running one stops within 2 s, keeping its data."""
    run_obj = selectors.run_get(user=request.user, run_id=run_id)
    services.run_cancel(actor=request.user, run_obj=run_obj)
    return _run_detail(selectors.run_get(user=request.user, run_id=run_id))


@router.post("/runs/{run_id}/rerun", response={201: RunDetailOut}, tags=["runs"])
def run_rerun(request: HttpRequest, run_id: str) -> Status[Any]:
    run_obj = selectors.run_get(user=request.user, run_id=run_id)
    with transaction.atomic():  # answers with the run as created, as run_create does
        created = services.run_rerun(actor=request.user, run_obj=run_obj)
        detail = _run_detail(selectors.run_get(user=request.user, run_id=created.uuid))
    return Status(201, detail)


@router.get("/runs/{run_id}/samples", response=SamplePage, tags=["runs"])
def run_samples(
    request: HttpRequest,
    run_id: str,
    after_seq: int = Query(-1, ge=-1, le=MAX_OFFSET),  # type: ignore[type-arg]
    limit: int = Query(1000, ge=1, le=10_000),  # type: ignore[type-arg]
) -> dict[str, Any]:
    """The stored snapshots (the live time series) after `after_seq`, in order."""
    if not 1 <= limit <= 10_000:
        raise Invalid.field("limit", "between 1 and 10000")
    run_obj = selectors.run_get(user=request.user, run_id=run_id)
    items = [
        {"seq": x.seq, "t_s": x.t_s, "data": x.data}
        for x in selectors.run_samples(run_obj=run_obj, after_seq=after_seq, limit=limit)
    ]
    return {"items": items, "last_seq": items[-1]["seq"] if items else after_seq}


@router.get("/runs/{run_id}/records.jsonl", tags=["runs"])
def run_records(
    request: HttpRequest, run_id: str, include_warmup: bool = False
) -> StreamingHttpResponse:
    """Per-request records, one JSON object per line, streamed. Warmup requests only with
    `include_warmup=true`."""
    run_obj = selectors.run_get(user=request.user, run_id=run_id)
    return stream_response(
        request,
        selectors.run_records_jsonl(run_obj=run_obj, include_warmup=include_warmup),
        content_type="application/x-ndjson",
        filename=f"run-{run_obj.uuid}-records.jsonl",
    )


@router.get("/runs/{run_id}/summary.json", response=dict[str, Any], tags=["runs"])
def run_summary_json(request: HttpRequest, run_id: str) -> dict[str, Any]:
    run_obj = selectors.run_get(user=request.user, run_id=run_id)
    return {"id": str(run_obj.uuid), "status": run_obj.status, "summary": run_obj.summary}


@router.get("/runs/{run_id}/summary.csv", tags=["runs"])
def run_summary_csv(request: HttpRequest, run_id: str) -> HttpResponse:
    run_obj = selectors.run_get(user=request.user, run_id=run_id)
    response = HttpResponse(selectors.run_summary_csv(run_obj=run_obj), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="run-{run_obj.uuid}-summary.csv"'
    return response


class VerifyFigureOut(Schema):
    figure: str = Field(description="e.g. requests, errors_by_category, ttft_ms.p99")
    summary: Any = Field(description="what the stored summary says")
    records: Any = Field(description="what the stored records give")
    difference: float | None = Field(
        description="absolute (counts, ratios) or relative (percentiles, min, max, mean); null "
        "when one side is missing or the two are no number apart (a dict of categories)"
    )
    allowed: float = Field(
        description="the stated error: the histogram's 0.54 % for percentiles, none for counts"
    )
    relative: bool
    ok: bool


class VerifyUncheckedOut(Schema):
    figure: str = Field(description="e.g. inter_chunk_ms")
    reason: str = Field(description="why the records cannot check it (records without gaps)")


class VerifyInterChunkOut(Schema):
    samples: int = Field(description="inter-chunk gaps the records keep (every one is read)")
    records_with_gaps: int
    records_without_gaps: int = Field(
        description="successful records with an ITL but no gaps (stored before they were kept)"
    )
    distinct_values: int = Field(description="distinct microsecond values held to be exact")
    itl_mean_mismatches: int = Field(description="records whose itl_ms is not their gaps' mean")
    percentiles_ms: dict[str, float | None] = Field(
        description="p50, p90, p95, p99, min, max of every gap, exact"
    )


class VerifyOut(Schema):
    id: str
    status: str
    ok: bool = Field(
        description="every figure checked within its allowed error (see unchecked for those "
        "the records could not check)"
    )
    records: int = Field(description="records read (warmup included)")
    seconds: float = Field(description="how long the recomputation took")
    histogram_relative_error: float
    largest_relative_difference: dict[str, float | None] = Field(
        description="per latency (ttft_ms, itl_ms, latency_ms): the largest relative "
        "difference of its figures (percentiles, min, max, mean)"
    )
    largest_percentile_difference: dict[str, float | None] = Field(
        description="per latency: the largest relative difference of its percentiles"
    )
    unchecked: list[VerifyUncheckedOut] = Field(default_factory=list)
    inter_chunk: VerifyInterChunkOut | None = None
    failures: list[VerifyFigureOut]
    figures: list[VerifyFigureOut]


@router.get("/runs/{run_id}/verify", response=VerifyOut, tags=["runs"])
def run_verify(request: HttpRequest, run_id: str) -> dict[str, Any]:
    """The run's summary recomputed from its stored records (as `python -m runner verify` and
    `manage.py verify_run`): counts, hit ratios and exact TTFT/ITL/latency percentiles, each
    with its difference against the allowed error. Reads every record: seconds for a long
    run. 409 while the run has no summary (it has not ended)."""
    run_obj = selectors.run_get(user=request.user, run_id=run_id)
    if not isinstance(run_obj.summary, dict):
        raise Conflict.field(
            "status", f"the run is {run_obj.status} and has no summary yet: verify it once ended"
        )
    return {"id": str(run_obj.uuid), "status": run_obj.status, **selectors.run_verify(run_obj)}
