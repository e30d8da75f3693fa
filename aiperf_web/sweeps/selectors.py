"""Reads of sweeps, always scoped to the requester's teams, and the read model a sweep's page,
its API answer and its exports are built from: `sweep_report` (the engine's SweepReport over
the stored point results) and `sweep_detail` (everything a page needs, as plain JSON)."""

from __future__ import annotations

import time
from typing import Any, Literal

from django.db.models import QuerySet

from aiperf_web.core.errors import NotFound
from aiperf_web.core.ids import parse_uuid
from aiperf_web.core.schemas import ref
from aiperf_web.sweeps.models import Sweep, SweepPoint, SweepStatus
from aiperf_web.teams.selectors import AnyUser, team_ids_for
from runner import Planner, PointResult, SweepReport, SweepSpec, build_report, parse_sweep

__all__ = [
    "sweep_detail",
    "sweep_get",
    "sweep_list",
    "sweep_planner",
    "sweep_points",
    "sweep_report",
    "sweep_spec",
]


def sweep_list(*, user: AnyUser) -> QuerySet[Sweep]:
    return (
        Sweep.objects.filter(team_id__in=team_ids_for(user=user))
        .select_related("team", "scenario", "endpoint")
        .order_by("-created_at", "-id")
    )


def sweep_get(*, user: AnyUser, sweep_id: object) -> Sweep:
    """A sweep of one of the user's teams; another team's (or no) sweep is NotFound."""
    uid = parse_uuid(sweep_id)
    found = (
        Sweep.objects.filter(team_id__in=team_ids_for(user=user), uuid=uid)
        .select_related("team", "scenario", "endpoint", "created_by", "rerun_of")
        .first()
        if uid
        else None
    )
    if found is None:
        raise NotFound("sweep not found")
    return found


def sweep_spec(sweep: Sweep) -> SweepSpec:
    """The stored, validated sweep spec (its base never carries the endpoint's key)."""
    return parse_sweep(sweep.spec)


def sweep_points(sweep: Sweep) -> list[SweepPoint]:
    """Every point made so far, in the order they were made, with their runs."""
    return list(sweep.points.select_related("run").order_by("seq"))


def sweep_planner(sweep: Sweep, points: list[SweepPoint] | None = None) -> Planner:
    """The engine's planner fed with the stored results, in the order the points were made
    (a later batch's points were made only once the batch before had all its results)."""
    spec = sweep_spec(sweep)
    planner = Planner(spec)
    for point in points if points is not None else sweep_points(sweep):
        if point.result is None:
            continue
        result = PointResult.model_validate(point.result)
        try:
            planner.record(result)
        except ValueError:
            # Not due in the plan (a sweep stored by an older planner): kept out of the
            # report rather than failing the page.
            continue
    return planner


def _report_status(sweep: Sweep) -> Literal["running", "completed", "cancelled"]:
    if sweep.status == SweepStatus.CANCELLED:
        return "cancelled"
    if sweep.status in (SweepStatus.SUCCEEDED, SweepStatus.FAILED):
        return "completed"
    return "running"


def _wall_s(sweep: Sweep) -> float:
    if sweep.started_at is None:
        return 0.0
    if sweep.finished_at is not None:
        return (sweep.finished_at - sweep.started_at).total_seconds()
    return max(0.0, time.time() - sweep.started_at.timestamp())


def sweep_report(sweep: Sweep, points: list[SweepPoint] | None = None) -> SweepReport:
    """The engine's report over the points that have ended: aggregates per arm and load over
    the valid repeats, each arm's frontier, the slo searches, a headline per arm pair."""
    planner = sweep_planner(sweep, points)
    return build_report(planner, status=_report_status(sweep), wall_s=_wall_s(sweep))


def _point_row(spec: SweepSpec, point: SweepPoint) -> dict[str, Any]:
    run = point.run
    result = point.result or {}
    return {
        "seq": point.seq,
        "arm": point.arm,
        "load": point.load,
        "label": spec.load_text(point.load, point.phase),  # type: ignore[arg-type]
        "repeat": point.repeat,
        "phase": point.phase,
        "run_id": str(run.uuid) if run is not None else None,
        "run_status": run.status if run is not None else None,
        "ended": point.result is not None,
        "valid": point.valid,
        "invalid_reason": point.invalid_reason,
        "figures": result.get("figures"),
        "requests": result.get("requests"),
        "wall_s": result.get("wall_s"),
        "created_at": point.created_at.isoformat(),
        "ended_at": point.ended_at.isoformat() if point.ended_at else None,
    }


def sweep_detail(sweep: Sweep) -> dict[str, Any]:
    """Everything a sweep's page needs, as JSON: who and what, the spec (axis, loads, arms,
    repeats, SLOs), every point with its run's id and status and its validity, and the report
    (aggregates, frontiers, searches, headlines)."""
    spec = sweep_spec(sweep)
    points = sweep_points(sweep)
    report = sweep_report(sweep, points)
    report_json = report.model_dump(mode="json", exclude={"sweep", "points"})
    return {
        "id": str(sweep.uuid),
        "name": sweep.name,
        "team": {"id": str(sweep.team.uuid), "name": sweep.team.name},
        "scenario": _ref_json(sweep.scenario, sweep.scenario_name),
        "endpoint": _ref_json(sweep.endpoint, sweep.endpoint_name),
        "target_kind": sweep.target_kind,
        "status": sweep.status,
        "reason": sweep.reason,
        "verdict": sweep.verdict,
        "verdict_message": sweep.verdict_message,
        "headlines": list(sweep.headlines),
        "mode": spec.mode,
        "axis": spec.axis,
        "loads": list(spec.loads),
        "repeats": spec.repeats,
        "percentile": spec.percentile,
        "arms": [{"name": arm.name, "overrides": dict(arm.overrides)} for arm in spec.arms],
        "slo": spec.slo.model_dump(mode="json") if spec.slo is not None else None,
        "spec": sweep.spec,
        "overrides": sweep.overrides,
        "request": sweep.request,
        "created_at": sweep.created_at.isoformat(),
        "started_at": sweep.started_at.isoformat() if sweep.started_at else None,
        "finished_at": sweep.finished_at.isoformat() if sweep.finished_at else None,
        "cancel_requested": sweep.cancel_requested_at is not None,
        "rerun_of": str(sweep.rerun_of.uuid) if sweep.rerun_of is not None else None,
        "points": [_point_row(spec, point) for point in points],
        "runs": len(points),
        "runs_ended": sum(1 for point in points if point.result is not None),
        "report": report_json,
    }


def _ref_json(obj: Any, name: str) -> dict[str, Any]:
    found = ref(obj, name)
    return {"id": str(found["id"]) if found["id"] is not None else None, "name": found["name"]}
