"""The sweeps part of the JSON API (mounted on /api/v1/ by aiperf_web.api.site): launch a
sweep (its fields validated by the engine's parse_sweep, 422 naming the field), list the
team's sweeps, read one with its points and report, cancel it as a whole, re-run it, and
export its per-arm, per-load table as CSV or JSON (runner.sweep.csv_rows)."""

from __future__ import annotations

import csv
import io
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from django.db import transaction
from django.http import HttpRequest, HttpResponse
from ninja import Query, Router, Schema, Status
from pydantic import ConfigDict, Field

from aiperf_web.core.errors import Invalid
from aiperf_web.core.schemas import Ref, Text, ref
from aiperf_web.sweeps import selectors, services
from aiperf_web.sweeps.models import Sweep
from runner import csv_rows

router = Router()


class ErrorItem(Schema):
    field: str
    message: str


class ErrorOut(Schema):
    detail: str
    errors: list[ErrorItem]


# Every answer an operation can give besides its success (declared in the OpenAPI).
_READ_ERRORS: dict[int, Any] = {401: ErrorOut, 404: ErrorOut, 422: ErrorOut}
_WRITE_ERRORS: dict[int, Any] = {**_READ_ERRORS, 403: ErrorOut}


class SweepCreate(Schema):
    model_config = ConfigDict(extra="forbid")

    scenario: Text = Field(description="scenario id")
    endpoint: Text = Field(
        default="simulated", description='endpoint id, or "simulated" for the simulated cluster'
    )
    overrides: dict[str, Any] = Field(
        default_factory=dict,
        description="RunSpec knobs every point starts from (as a run's overrides), e.g. "
        "max_requests or duration_s for shorter points",
    )
    sweep: dict[str, Any] = Field(
        description="the sweep without its base (docs/sweep-spec.schema.json): concurrency or "
        "rate_per_s (the load axis), arms [{name, overrides}], repeats, mode list|auto|slo, "
        "slo {ttft_ms, itl_ms, latency_ms, goodput_fraction, confidence}, auto_points, "
        "percentile, gpus, validity, cooldown_s, drain_timeout_s"
    )


class SweepOut(Schema):
    id: UUID
    name: str
    team: Ref
    scenario: Ref
    endpoint: Ref
    target_kind: Literal["endpoint", "simulated"]
    mode: Literal["list", "auto", "slo"]
    axis: Literal["concurrency", "rate_per_s"]
    status: Literal["queued", "running", "succeeded", "failed", "cancelled"]
    reason: str
    verdict: Literal["pass", "fail", ""] = Field(
        description="pass: every point ran and is valid; fail: a point is invalid (why in "
        "verdict_message and the points) or the sweep failed; empty while it runs or cancelled"
    )
    verdict_message: str
    headlines: list[str] = Field(description="one per arm pair, at the sweep's end")
    runs: int = Field(description="runs made so far (one per point)")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    cancel_requested: bool
    rerun_of: UUID | None


class SweepPointOut(Schema):
    seq: int
    arm: str
    load: float
    label: str = Field(description="the load as people read it: c=16, 2.5/s")
    repeat: int
    phase: str = Field(description="list | synchronous | saturation | between | search")
    run_id: UUID | None = Field(description="the run made for the point (its own page)")
    run_status: str | None
    ended: bool
    valid: bool | None = Field(description="null until the run ended")
    invalid_reason: str
    figures: dict[str, float | None] | None = Field(
        description="the point's figures (runner.sweep.FIGURES) once its run ended"
    )


class SweepDetailOut(SweepOut):
    loads: list[float]
    repeats: int
    percentile: str
    arms: list[dict[str, Any]]
    slo: dict[str, Any] | None
    spec: dict[str, Any] = Field(description="the validated sweep spec, its base included")
    overrides: dict[str, Any]
    request: dict[str, Any] = Field(description="the sweep fields the launch sent")
    points: list[SweepPointOut]
    runs_ended: int
    report: dict[str, Any] = Field(
        description="runner.sweep.SweepReport without its spec and points: aggregates per arm "
        "and load, frontiers per arm, searches (mode slo), headlines"
    )


class SweepPage(Schema):
    items: list[SweepOut]
    count: int
    limit: int
    offset: int


def _sweep_out(s: Sweep) -> dict[str, Any]:
    return {
        "id": s.uuid,
        "name": s.name,
        "team": ref(s.team, s.team.name),
        "scenario": ref(s.scenario, s.scenario_name),
        "endpoint": ref(s.endpoint, s.endpoint_name),
        "target_kind": s.target_kind,
        "mode": s.mode,
        "axis": s.axis,
        "status": s.status,
        "reason": s.reason,
        "verdict": s.verdict,
        "verdict_message": s.verdict_message,
        "headlines": list(s.headlines),
        "runs": getattr(s, "points_count", None) or s.points.count(),
        "created_at": s.created_at,
        "started_at": s.started_at,
        "finished_at": s.finished_at,
        "cancel_requested": s.cancel_requested_at is not None,
        "rerun_of": s.rerun_of.uuid if s.rerun_of is not None else None,
    }


def _sweep_detail(s: Sweep) -> dict[str, Any]:
    detail = selectors.sweep_detail(s)
    return {**detail, **_sweep_out(s), "runs": detail["runs"]}


@router.get("/sweeps", response={200: SweepPage, **_READ_ERRORS}, tags=["sweeps"])
def sweep_list(
    request: HttpRequest,
    limit: int = Query(50, ge=1, le=500),  # type: ignore[type-arg]
    offset: int = Query(0, ge=0, le=1_000_000_000),  # type: ignore[type-arg]
) -> dict[str, Any]:
    """The sweeps of the requester's teams, newest first."""
    if not 1 <= limit <= 500:
        raise Invalid.field("limit", "between 1 and 500")
    if not 0 <= offset <= 1_000_000_000:
        raise Invalid.field("offset", "between 0 and 1000000000")
    qs = selectors.sweep_list(user=request.user).select_related("rerun_of")
    page = list(qs[offset : offset + limit])
    return {
        "items": [_sweep_out(s) for s in page],
        "count": qs.count(),
        "limit": limit,
        "offset": offset,
    }


@router.post(
    "/sweeps", response={201: SweepDetailOut, 429: ErrorOut, **_WRITE_ERRORS}, tags=["sweeps"]
)
def sweep_create(request: HttpRequest, payload: SweepCreate) -> Status[Any]:
    """Launch a sweep: scenario + endpoint (or "simulated") + base overrides + the sweep's
    fields. Answers at once with the sweep `queued`; its first points' runs are made as the
    launch commits."""
    with transaction.atomic():
        created = services.sweep_launch(
            actor=request.user,
            scenario_id=payload.scenario,
            endpoint_id=payload.endpoint,
            overrides=payload.overrides,
            sweep=payload.sweep,
        )
        detail = _sweep_detail(selectors.sweep_get(user=request.user, sweep_id=created.uuid))
    return Status(201, detail)


@router.get("/sweeps/{sweep_id}", response={200: SweepDetailOut, **_READ_ERRORS}, tags=["sweeps"])
def sweep_detail(request: HttpRequest, sweep_id: str) -> dict[str, Any]:
    return _sweep_detail(selectors.sweep_get(user=request.user, sweep_id=sweep_id))


@router.post(
    "/sweeps/{sweep_id}/cancel", response={200: SweepDetailOut, **_WRITE_ERRORS}, tags=["sweeps"]
)
def sweep_cancel(request: HttpRequest, sweep_id: str) -> dict[str, Any]:
    """Cancel as a whole: no further point is made; queued point runs end at once, running
    ones stop within 2 s keeping what they measured."""
    sweep_obj = selectors.sweep_get(user=request.user, sweep_id=sweep_id)
    services.sweep_cancel(actor=request.user, sweep_obj=sweep_obj)
    return _sweep_detail(selectors.sweep_get(user=request.user, sweep_id=sweep_id))


@router.post(
    "/sweeps/{sweep_id}/rerun",
    response={201: SweepDetailOut, 409: ErrorOut, 429: ErrorOut, **_WRITE_ERRORS},
    tags=["sweeps"],
)
def sweep_rerun(request: HttpRequest, sweep_id: str) -> Status[Any]:
    """A new sweep of the same scenario, endpoint, overrides and sweep fields."""
    sweep_obj = selectors.sweep_get(user=request.user, sweep_id=sweep_id)
    with transaction.atomic():
        created = services.sweep_rerun(actor=request.user, sweep_obj=sweep_obj)
        detail = _sweep_detail(selectors.sweep_get(user=request.user, sweep_id=created.uuid))
    return Status(201, detail)


@router.get(
    "/sweeps/{sweep_id}/export",
    response={200: None, **_READ_ERRORS},
    tags=["sweeps"],
    openapi_extra={
        "responses": {
            "200": {
                "description": "one row per arm and load: counts, validity, the SLO verdict, "
                "each figure's mean, min and max over the valid repeats",
                "content": {"text/csv": {}, "application/json": {}},
            }
        }
    },
)
def sweep_export(
    request: HttpRequest, sweep_id: str, format: Literal["csv", "json"] = "csv"
) -> HttpResponse:
    """The sweep's table (runner.sweep.csv_rows): CSV, or JSON with the whole report."""
    sweep_obj = selectors.sweep_get(user=request.user, sweep_id=sweep_id)
    report = selectors.sweep_report(sweep_obj)
    name = f"sweep-{sweep_obj.uuid}"
    if format == "json":
        response = HttpResponse(report.model_dump_json(), content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="{name}.json"'
        return response
    rows = csv_rows(report)
    out = io.StringIO()
    if rows:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    response = HttpResponse(out.getvalue(), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
    return response
