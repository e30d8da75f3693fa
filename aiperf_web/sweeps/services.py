"""The web's writes of sweeps and the driver that runs them (issue 20).

A sweep is one scenario on one endpoint (or the simulated cluster) along one load axis, with
arms compared point by point. Every point is a normal run made by `runs.services.run_launch`
from the base (scenario, endpoint, the launch's overrides) plus the arm's overrides, the load,
the sweep's SLOs and the repeat's seed (`SweepSpec.spec_for`, the engine's one definition).

The driver is `sweep_advance`: under a lock on the sweep's row it stores the PointResult of
every point whose run has ended, rebuilds the engine's pure Planner from the stored results,
and makes the runs of the points due now; when the planner has nothing left the sweep ends
with its verdict and headlines and the sweep-end webhook. It runs at launch and whenever a
point's run ends (the runs worker's `run_ended` signal, sweeps/apps.py), and every worker's
periodic pickup moves on the sweeps neither reached (sweeps/pickup.py: sweeps_stuck). On a
live endpoint the next point's run is made only once the previous one ended (one at a time,
and the runs line's endpoint lease and drain keep other runs off the endpoint meanwhile); on
the simulated cluster every point of a batch is queued at once, so the workers' slots run them
in parallel.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Exists, OuterRef, Q
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from aiperf_web.core.errors import Forbidden, Invalid, NotFound, TooMany
from aiperf_web.core.specs import spec_json
from aiperf_web.core.webhooks import webhook_deliver
from aiperf_web.runs.models import ACTIVE, FINAL, Run, RunRecord, RunSample, Status, TargetKind
from aiperf_web.runs.services import (
    SIMULATED,
    launch_target,
    relaunch_sources,
    run_cancel,
    run_launch,
)
from aiperf_web.sweeps.models import Sweep, SweepPoint, SweepStatus, SweepVerdict
from aiperf_web.sweeps.selectors import sweep_planner, sweep_report
from aiperf_web.sweeps.signals import sweep_changed
from aiperf_web.teams.models import Role
from aiperf_web.teams.selectors import AnyUser, require_role, user_or_none
from runner import (
    Point,
    PointResult,
    PointTally,
    SpecError,
    SweepSpec,
    parse_sweep,
    point_result,
)

log = logging.getLogger(__name__)

EVENT = "sweep.ended"

__all__ = [
    "EVENT",
    "sweep_advance",
    "sweep_cancel",
    "sweep_launch",
    "sweep_on_run_ended",
    "sweep_rerun",
    "sweep_webhook_body",
    "sweeps_stuck",
]


# -- launch ----------------------------------------------------------------------------------


def _merge(base: Mapping[str, Any], more: Mapping[str, Any]) -> dict[str, Any]:
    """Overrides on top of overrides, as RunSpec.with_overrides applies them twice: a dict
    for an object (target) updates its fields."""
    merged = dict(base)
    for name, value in more.items():
        current = merged.get(name)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            merged[name] = {**current, **value}
        else:
            merged[name] = value
    return merged


def point_overrides(
    spec: SweepSpec, point: Point, base_overrides: Mapping[str, Any]
) -> dict[str, Any]:
    """The overrides of the point's run on top of the scenario and endpoint: the launch's
    base overrides, then what `SweepSpec.spec_for` puts on the base (the arm's knobs, the
    load, the sweep's SLOs, the repeat's seed)."""
    extra: dict[str, Any] = dict(spec.arm(point.arm).overrides)
    if spec.axis == "concurrency":
        extra["concurrency"] = round(point.load)
    else:
        extra["rate_per_s"] = point.load
        if point.phase == "synchronous":
            extra["concurrency"] = 1
    if spec.slo is not None:
        extra.update(spec.slo.run_fields)
    else:
        extra.update({"slo_ttft_ms": None, "slo_itl_ms": None, "slo_latency_ms": None})
    extra["seed"] = spec.base.seed + point.repeat
    return _merge(base_overrides, extra)


def sweep_launch(
    *,
    actor: AnyUser,
    scenario_id: object,
    endpoint_id: object = SIMULATED,
    sweep: Mapping[str, Any],
    overrides: Mapping[str, Any] | None = None,
    rerun_of: Sweep | None = None,
) -> Sweep:
    """Validate the sweep (runner.sweep.parse_sweep over the scenario's spec with the target
    and the base overrides as its base), store it `queued` and make its first points' runs
    once the transaction commits. Invalid names the field (`sweep.arms`, `overrides.x`)."""
    # The same checks as a run's launch (runs.services), then the sweep's own.
    on = launch_target(
        actor=actor, scenario_id=scenario_id, endpoint_id=endpoint_id, overrides=overrides
    )
    scenario, overrides, base = on.scenario, on.overrides, on.spec
    if not isinstance(sweep, Mapping):
        raise Invalid.field("sweep", "must be an object (docs/sweep-spec.schema.json)")
    if "base" in sweep:
        raise Invalid.field(
            "sweep.base", "comes from the scenario, the endpoint and the launch's overrides"
        )
    try:
        spec = parse_sweep({**dict(sweep), "base": spec_json(base)})
    except SpecError as exc:
        fields = {
            f"sweep.{name}" if name != "sweep" else "sweep": m for name, m in exc.fields.items()
        }
        raise Invalid("; ".join(f"{k}: {v}" for k, v in fields.items()), fields=fields) from None
    runs_max = spec.repeats * len(spec.arms) * len(spec.loads) + (
        spec.repeats * len(spec.arms) if spec.mode == "auto" else 0
    )
    with transaction.atomic():
        created = Sweep.objects.create(
            team=scenario.team,
            scenario=scenario,
            scenario_name=scenario.name,
            endpoint=on.endpoint,
            endpoint_name=on.name,
            target_kind=on.kind,
            spec=spec.model_dump(mode="json"),
            overrides=dict(overrides),
            request=dict(sweep),
            mode=spec.mode,
            axis=spec.axis,
            created_by=user_or_none(actor),
            rerun_of=rerun_of,
        )
        pk = created.pk
        transaction.on_commit(lambda: sweep_advance(pk))
    log.info("sweep %s launched: at most %d runs", created.uuid, runs_max)
    return created


def sweep_rerun(*, actor: AnyUser, sweep_obj: Sweep) -> Sweep:
    """A new sweep asking for the same: scenario, endpoint, base overrides and sweep fields."""
    scenario, endpoint_id = relaunch_sources(actor=actor, launched=sweep_obj, what="sweep")
    return sweep_launch(
        actor=actor,
        scenario_id=scenario.uuid,
        endpoint_id=endpoint_id,
        sweep=sweep_obj.request,
        overrides=sweep_obj.overrides,
        rerun_of=sweep_obj,
    )


def sweep_cancel(*, actor: AnyUser, sweep_obj: Sweep) -> Sweep:
    """Cancel as a whole: the sweep ends `cancelled` at once (no further point is made) and
    every queued or running point run is cancelled (a running one keeps what it measured)."""
    require_role(user=actor, team=sweep_obj.team, role=Role.MEMBER)
    now = timezone.now()
    with transaction.atomic():
        locked = Sweep.objects.select_for_update().get(pk=sweep_obj.pk)
        if locked.is_active:
            locked.status = SweepStatus.CANCELLED
            locked.reason = "cancelled"
            locked.cancel_requested_at = now
            locked.finished_at = now
            locked.verdict = SweepVerdict.NONE
            locked.save(
                update_fields=["status", "reason", "cancel_requested_at", "finished_at", "verdict"]
            )
        active = list(
            Run.objects.filter(sweep_point__sweep=locked, status__in=ACTIVE).order_by("id")
        )
    for run_obj in active:
        run_cancel(actor=actor, run_obj=run_obj)
    # Runs cancelled while queued end without a worker: store their results now.
    sweep_advance(sweep_obj.pk)
    _announce(sweep_obj.uuid)
    sweep_obj.refresh_from_db()
    return sweep_obj


# -- the driver ------------------------------------------------------------------------------


def sweep_on_run_ended(sender: object, *, run_obj: Run, **_: object) -> None:
    """The receiver of runs' `run_ended` signal: a sweep's point ended, move the sweep on.
    Any run's end also moves on the sweeps whose point run ended without the signal (cancelled
    while queued from its own page, or failed by the stale-run reaper)."""
    sweep_pk = (
        SweepPoint.objects.filter(run_id=run_obj.pk).values_list("sweep_id", flat=True).first()
    )
    if sweep_pk is not None:
        sweep_advance(sweep_pk)
    for stuck in sweeps_stuck():
        if stuck != sweep_pk:
            sweep_advance(stuck)


def sweeps_stuck() -> list[int]:
    """Active sweeps no run's end will move on: with a point whose run has ended (or was
    deleted) without its result, or with no point run in flight at all (the driver failed at
    the launch's commit or between a point's end and the next point's run)."""
    open_points = SweepPoint.objects.filter(sweep=OuterRef("pk"), result__isnull=True)
    ended = open_points.filter(Q(run__isnull=True) | Q(run__status__in=FINAL))
    in_flight = open_points.filter(run__status__in=ACTIVE)
    return list(
        Sweep.objects.filter(status__in=[SweepStatus.QUEUED, SweepStatus.RUNNING])
        .filter(Exists(ended) | ~Exists(in_flight))
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def _in_flight_cap() -> int:
    # Simulated points of one batch queued at once, at most half the team's queue cap, so a
    # wide sweep never fills the team's queue by itself (the rest follow as points end).
    return max(1, int(settings.AIPERF_TEAM_MAX_QUEUED) // 2)


def sweep_advance(sweep_pk: int) -> None:
    """Store ended points' results, then make the runs of the points due now, or end the
    sweep. Idempotent; concurrent calls serialize on the sweep's row."""
    changed = False
    uuid = None
    with transaction.atomic():
        sweep = (
            Sweep.objects.select_for_update(of=("self",))
            .select_related("team", "scenario", "endpoint", "created_by")
            .filter(pk=sweep_pk)
            .first()
        )
        if sweep is None:
            return
        uuid = sweep.uuid
        spec = parse_sweep(sweep.spec)
        points = list(sweep.points.select_related("run").order_by("seq"))
        for point in points:
            if point.result is None and (point.run is None or point.run.status in FINAL):
                _store_result(spec, point)
                changed = True
        if sweep.is_active:
            changed = _plan(sweep, spec, points) or changed
    if changed and uuid is not None:
        transaction.on_commit(lambda: _announce(uuid))


def _plan(sweep: Sweep, spec: SweepSpec, points: list[SweepPoint]) -> bool:
    planner = sweep_planner(sweep, points)
    pending = planner.pending()
    if not pending:
        _finish(sweep, points)
        return True
    made = {(p.arm, p.load, p.repeat, p.phase) for p in points}
    in_flight = [p for p in points if p.result is None]
    if sweep.target_kind == TargetKind.ENDPOINT:
        # Live: strictly one point after another.
        due = [] if in_flight else pending[:1]
    else:
        due = [p for p in pending if (p.arm, p.load, p.repeat, p.phase) not in made]
        due = due[: max(0, _in_flight_cap() - len(in_flight))]
    if not due:
        return False
    seq = max((p.seq for p in points), default=-1) + 1
    for point in due:
        try:
            run_obj = _launch_point(sweep, spec, point, seq)
        except TooMany as exc:
            if in_flight:
                # The team's queue is full: the next point's end tries again.
                log.info("sweep %s waits to make its next point: %s", sweep.uuid, exc)
                break
            _fail(
                sweep,
                f"could not queue the point {point.arm} at "
                f"{spec.load_text(point.load, point.phase)}: {exc}",
            )
            return True
        except (Invalid, NotFound, Forbidden) as exc:
            _fail(
                sweep,
                f"could not make the run of {point.arm} at "
                f"{spec.load_text(point.load, point.phase)}: {exc}",
            )
            return True
        SweepPoint.objects.create(
            sweep=sweep,
            seq=seq,
            arm=point.arm,
            load=point.load,
            repeat=point.repeat,
            phase=point.phase,
            run=run_obj,
        )
        in_flight.append(SweepPoint(sweep=sweep))
        seq += 1
    if sweep.status == SweepStatus.QUEUED:
        sweep.status = SweepStatus.RUNNING
        sweep.started_at = timezone.now()
        sweep.save(update_fields=["status", "started_at"])
    return True


def _launch_point(sweep: Sweep, spec: SweepSpec, point: Point, seq: int) -> Run:
    if sweep.created_by is None:
        raise Invalid.field("created_by", "the person who launched the sweep was deleted")
    if sweep.scenario is None:
        raise Invalid.field("scenario", "the scenario of this sweep was deleted")
    if sweep.target_kind == TargetKind.ENDPOINT and sweep.endpoint is None:
        raise Invalid.field("endpoint", "the endpoint of this sweep was deleted")
    label = spec.load_text(point.load, point.phase)
    repeat = f", repeat {point.repeat + 1}" if spec.repeats > 1 else ""
    return run_launch(
        actor=sweep.created_by,
        scenario_id=sweep.scenario.uuid,
        endpoint_id=sweep.endpoint.uuid if sweep.endpoint else SIMULATED,
        overrides=point_overrides(spec, point, sweep.overrides),
        tags=["sweep", f"arm:{point.arm}"[:40]],
        notes=f"sweep {sweep.uuid}: arm {point.arm} at {label}{repeat} (point {seq + 1})",
    )


def _tally(run_obj: Run) -> PointTally:
    """What the engine's PointTally counts while a run goes, read back from its stored
    records and snapshots."""
    tally = PointTally()
    counts = RunRecord.objects.filter(run=run_obj, warmup=False).aggregate(
        completed=Count("seq", filter=Q(data__error=None)),
        ttft=Count("seq", filter=Q(data__error=None) & ~Q(data__ttft_ms=None)),
    )
    tally.completed = int(counts["completed"] or 0)
    tally.ttft_measured = int(counts["ttft"] or 0)
    for data in RunSample.objects.filter(run=run_obj).values_list("data", flat=True).iterator():
        held = sum(((data or {}).get("client_workers") or {}).get("cached_bytes") or [])
        if tally.peak_copy_bytes is None or held > tally.peak_copy_bytes:
            tally.peak_copy_bytes = held
    return tally


def _store_result(spec: SweepSpec, point: SweepPoint) -> None:
    run_obj = point.run
    at = Point(arm=point.arm, load=point.load, repeat=point.repeat, phase=point.phase)  # type: ignore[arg-type]
    summary: dict[str, Any] = dict(run_obj.summary or {}) if run_obj is not None else {}
    status: str
    reason: str | None
    if run_obj is None:
        status, reason = "failed", "its run was deleted"
    elif run_obj.status == Status.CANCELLED:
        status, reason = "cancelled", run_obj.reason or "cancelled"
    elif run_obj.status == Status.FAILED:
        status, reason = "failed", run_obj.reason or "failed"
    else:
        status, reason = str(summary.get("status") or "succeeded"), summary.get("stopped_reason")
    summary.setdefault("requests", 0)
    summary.setdefault("errors", 0)
    summary["status"] = status
    summary["stopped_reason"] = reason
    tally = _tally(run_obj) if run_obj is not None else PointTally()
    wall_s = (run_obj.duration_s if run_obj is not None else None) or 0.0
    result: PointResult = point_result(spec, at, summary, tally, wall_s=wall_s)
    point.result = result.model_dump(mode="json")
    point.valid = result.valid
    point.invalid_reason = result.invalid_reason or ""
    point.ended_at = timezone.now()
    point.save(update_fields=["result", "valid", "invalid_reason", "ended_at"])


def _finish(sweep: Sweep, points: list[SweepPoint]) -> None:
    report = sweep_report(sweep, points)
    invalid = [p for p in report.points if not p.valid]
    spec = report.sweep
    if invalid:
        first = invalid[0]
        verdict = SweepVerdict.FAIL
        message = (
            f"{len(invalid)} of {report.runs} points invalid (left out of frontiers and "
            f"headlines); first: {first.point.arm} at "
            f"{spec.load_text(first.point.load, first.point.phase)}: {first.invalid_reason}"
        )
    else:
        verdict = SweepVerdict.PASS
        message = f"{report.runs} points, every one valid"
    searches = [s.statement for s in report.searches.values()]
    if searches:
        message += ". " + " ".join(searches)
    sweep.status = SweepStatus.SUCCEEDED
    sweep.verdict = verdict
    sweep.verdict_message = message
    sweep.headlines = [h.text for h in report.headlines]
    sweep.finished_at = timezone.now()
    sweep.save(update_fields=["status", "verdict", "verdict_message", "headlines", "finished_at"])
    pk = sweep.pk
    transaction.on_commit(lambda: sweep_webhooks_send(pk))


def _fail(sweep: Sweep, reason: str) -> None:
    sweep.status = SweepStatus.FAILED
    sweep.reason = reason
    sweep.verdict = SweepVerdict.FAIL
    sweep.verdict_message = reason
    sweep.finished_at = timezone.now()
    if sweep.started_at is None:
        sweep.started_at = sweep.finished_at
    sweep.save(
        update_fields=[
            "status",
            "reason",
            "verdict",
            "verdict_message",
            "finished_at",
            "started_at",
        ]
    )
    pk = sweep.pk
    transaction.on_commit(lambda: sweep_webhooks_send(pk))


def _announce(uuid: object) -> None:
    for receiver, outcome in sweep_changed.send_robust(sender=Sweep, sweep_uuid=str(uuid)):
        if isinstance(outcome, Exception):
            log.error("sweep %s: %r failed: %r", uuid, receiver, outcome)


# -- the sweep-end webhook -------------------------------------------------------------------


def _link(name: str, *args: object) -> str:
    base = settings.AIPERF_PUBLIC_URL.rstrip("/")
    try:
        return base + reverse(name, args=list(args))
    except NoReverseMatch:
        return ""


def sweep_webhook_body(*, sweep_obj: Sweep) -> dict[str, Any]:
    """What the sweep-end webhook posts (event `sweep.ended`): the verdict and its sentence,
    the headlines, how many runs it made, and links to its page and exports."""
    uid = sweep_obj.uuid
    return {
        "event": EVENT,
        "sweep_id": str(uid),
        "name": sweep_obj.name,
        "status": sweep_obj.status,
        "reason": sweep_obj.reason,
        "verdict": sweep_obj.verdict,
        "message": sweep_obj.verdict_message,
        "headlines": list(sweep_obj.headlines),
        "team": sweep_obj.team.name,
        "scenario": sweep_obj.scenario_name,
        "endpoint": sweep_obj.endpoint_name,
        "mode": sweep_obj.mode,
        "axis": sweep_obj.axis,
        "runs": sweep_obj.points.count(),
        "started_at": sweep_obj.started_at.isoformat() if sweep_obj.started_at else None,
        "finished_at": sweep_obj.finished_at.isoformat() if sweep_obj.finished_at else None,
        "links": {
            "sweep": _link("sweeps:detail", uid),
            "json": _link("api:sweep_export", uid) + "?format=json",
            "csv": _link("api:sweep_export", uid) + "?format=csv",
        },
    }


def sweep_webhooks_send(sweep_pk: int) -> int:
    """POST the sweep-end body to the scenario's webhook and the team's (each URL once).
    Never raises; each outcome goes to the log. Returns how many were delivered."""
    sweep_obj = Sweep.objects.select_related("team", "scenario").filter(pk=sweep_pk).first()
    if sweep_obj is None:
        return 0
    targets: list[tuple[str, str, str]] = []
    owners: list[tuple[str, Any]] = []
    if sweep_obj.scenario is not None:
        owners.append(("scenario", sweep_obj.scenario))
    owners.append(("team", sweep_obj.team))
    for whose, owner in owners:
        url = owner.webhook_url
        if url and url not in {t[1] for t in targets}:
            targets.append((whose, url, owner.webhook_secret))
    if not targets:
        return 0
    body = json.dumps(sweep_webhook_body(sweep_obj=sweep_obj), separators=(",", ":")).encode()
    delivered = 0
    for whose, url, secret_token in targets:
        outcome = webhook_deliver(url, body=body, event=EVENT, secret_token=secret_token)
        delivered += outcome.ok
        log.log(
            logging.INFO if outcome.ok else logging.WARNING,
            "sweep %s: %s %s",
            sweep_obj.uuid,
            whose,
            outcome.message,
        )
    return delivered
