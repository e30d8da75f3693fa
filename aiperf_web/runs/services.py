"""Writes of runs: launch, claim, execute, cancel, finish, re-run, tags/notes/baseline.

A run is launched `queued` in one transaction and a task (`runs.execute`, queue `runs`) is
sent only once that transaction commits. A task is a ticket, not an order: the worker that
takes one claims the queued run fairest to start, the oldest of the team with the fewest runs
running, skipping teams at AIPERF_TEAM_MAX_RUNNING (so one team's queue of long runs cannot keep
another team's short run waiting behind it). The claim is one conditional UPDATE (queued →
running must touch exactly one row) under a lock on the team's row, so a redelivered or
duplicated task never runs a run twice, a run cancelled while queued is never started, and two
workers never both take a team's last running slot. A ticket that finds nothing to claim is
dropped; every run that ends sends a new one when runs are waiting, so none is stranded.
Launches beyond AIPERF_TEAM_MAX_QUEUED queued runs per team are refused (TooMany).
"""

from __future__ import annotations

import gc
import json
import logging
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection, transaction
from django.db.models import Count, IntegerField, OuterRef, Subquery, TextField, Value
from django.db.models.functions import Coalesce, Concat
from django.utils import timezone

from aiperf_web.core.errors import Invalid, NotFound, TooMany
from aiperf_web.core.outbound import check_outbound_url
from aiperf_web.core.specs import spec_json, spec_override, spec_parse
from aiperf_web.core.tags import tags_normalize
from aiperf_web.core.text import reason_excerpt
from aiperf_web.endpoints.models import Endpoint
from aiperf_web.endpoints.selectors import endpoint_get
from aiperf_web.endpoints.services import endpoint_attach_secrets, endpoint_target
from aiperf_web.runs.fleet import fleet_check, fleet_plan
from aiperf_web.runs.models import (
    ACTIVE,
    FINAL,
    Run,
    RunLog,
    RunRecord,
    RunSample,
    Status,
    TargetKind,
)
from aiperf_web.runs.publisher import (
    log_line,
    publish_log,
    publish_runs_changed,
    publish_status,
    run_state,
)
from aiperf_web.runs.sink import RunSink
from aiperf_web.runs.tickets import tickets_send, tickets_waiting
from aiperf_web.scenarios.selectors import scenario_get
from aiperf_web.scenarios.services import TRACE_REF, scenario_run_spec, trace_content
from aiperf_web.teams.models import Role, Team
from aiperf_web.teams.selectors import AnyUser, require_role, user_or_none
from runner import (
    BadInput,
    EndpointTarget,
    RunnerError,
    RunSpec,
    SimulatedTarget,
    run,
)

log = logging.getLogger(__name__)

SIMULATED = "simulated"
# How often the worker looks for a cancel request; Cancel must stop a run within 2 s.
_CANCEL_POLL_S = 0.25
_HEARTBEAT_S = 5.0
# A log line's length: enough for a server's whole error answer as the engine quotes it (at
# most 16 KiB of body) with its context.
_LOG_LINE_CHARS = 20_000
_CLAIM_TRIES = 5  # candidates a ticket tries when others' claims race it
# Pauses between the tries of a run's final save (a database blip at the end of a run).
_FINISH_BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0)
# A queued run younger than this may still have its launch's ticket on the way (sent after
# commit): the reconciliation leaves it alone.
_RECONCILE_GRACE_S = 5.0


# -- launch ----------------------------------------------------------------------------------


def run_time_limit_s(spec: RunSpec) -> int:
    """The Celery hard time limit of a run: its own length plus room for preflight, draining
    and storage. Simulated runs take seconds of wall time whatever their simulated length."""
    if isinstance(spec.target, SimulatedTarget):
        return 3600
    if spec.duration_s is not None:
        return int(spec.duration_s * 1.2 + 600)
    return 24 * 3600


def run_launch(
    *,
    actor: AnyUser,
    scenario_id: object,
    endpoint_id: object = SIMULATED,
    overrides: Mapping[str, Any] | None = None,
    tags: str | Iterable[str] = "",
    notes: str = "",
    rerun_of: Run | None = None,
    after: Run | None = None,
    enqueue: bool = True,
) -> Run:
    """Validate everything, store the run `queued`, and enqueue it after commit (unless
    `enqueue` is false: then the caller sends it, as a paired A/B launch chains its runs).
    `after`: no worker starts this run before that one has ended. TooMany when the team
    already has AIPERF_TEAM_MAX_QUEUED runs queued."""
    scenario = scenario_get(user=actor, scenario_id=scenario_id)
    require_role(user=actor, team=scenario.team, role=Role.MEMBER)
    overrides = {} if overrides is None else overrides
    if not isinstance(overrides, Mapping):
        raise Invalid.field("overrides", "must be an object of knob: value")
    if "workload" in overrides:
        # The workload is the scenario's; a run that replays other traces is another scenario.
        raise Invalid.field("overrides.workload", "the workload comes from the scenario")
    target_overrides = overrides.get("target")
    if isinstance(target_overrides, Mapping):
        for knob in ("url", "kind", "api_key"):
            # The endpoint's key is sent only to the endpoint's own URL.
            if knob in target_overrides:
                raise Invalid.field(
                    f"overrides.target.{knob}", "comes from the chosen endpoint (or simulated)"
                )
    tag_text = tags_normalize(tags)

    spec = scenario_run_spec(scenario=scenario)
    endpoint: Endpoint | None = None
    if endpoint_id in (None, "", SIMULATED):
        if not isinstance(spec.target, SimulatedTarget):
            spec = spec_override(spec, {"target": {"kind": "simulated"}})
        endpoint_name = "simulated cluster"
        target_kind = TargetKind.SIMULATED
    else:
        endpoint = endpoint_get(user=actor, endpoint_id=endpoint_id)
        if endpoint.team_id != scenario.team_id:
            raise Invalid.field(
                "endpoint", "the endpoint belongs to another team than the scenario"
            )
        spec = spec_override(
            spec, {"target": endpoint_target(endpoint=endpoint)}, prefix="endpoint"
        )
        endpoint_name = endpoint.name
        target_kind = TargetKind.ENDPOINT
    spec = spec_override(spec, overrides, prefix="overrides")
    fleet_check(spec)
    if endpoint is not None:
        spec = _affinity_for_endpoint(spec, endpoint=endpoint, overrides=overrides)
        assert isinstance(spec.target, EndpointTarget)
        check_outbound_url(spec.target.url, field="endpoint")
        if spec.target.metrics_scrape_url is not None:
            # Scrapes are outbound traffic too: the same allowlist as the endpoint.
            check_outbound_url(spec.target.metrics_scrape_url, field="overrides.target.metrics_url")

    with transaction.atomic():
        _check_queue_cap(team=scenario.team)
        new = Run.objects.create(
            team=scenario.team,
            scenario=scenario,
            scenario_name=scenario.name,
            endpoint=endpoint,
            endpoint_name=endpoint_name,
            target_kind=target_kind,
            spec=spec_json(spec),
            overrides=dict(overrides),
            tags=tag_text,
            notes=notes.strip(),
            created_by=user_or_none(actor),
            rerun_of=rerun_of,
            after=after,
        )
        run_uuid = str(new.uuid)
        if enqueue:
            transaction.on_commit(lambda: tickets_send(run_uuid))
        # The team's runs lists show it queued.
        transaction.on_commit(lambda: _announce_team(new.team_id))
    return new


def _lock_team(team_id: int) -> None:
    """Serialize launches and claims of one team until the transaction ends (PostgreSQL row
    lock; SQLite serializes writers anyway)."""
    list(Team.objects.select_for_update().filter(pk=team_id).values_list("pk", flat=True))


def _check_queue_cap(*, team: Team) -> None:
    _lock_team(team.pk)
    cap = settings.AIPERF_TEAM_MAX_QUEUED
    queued = Run.objects.filter(team=team, status=Status.QUEUED).count()
    if queued >= cap:
        message = (
            f"team {team.name} already has {queued} runs queued, its cap "
            f"(AIPERF_TEAM_MAX_QUEUED = {cap}): launch again once some have started, or "
            "cancel some"
        )
        raise TooMany(message, fields={"team": message})


def _affinity_for_endpoint(
    spec: RunSpec, *, endpoint: Endpoint, overrides: Mapping[str, Any]
) -> RunSpec:
    """Refuse an affinity mode the endpoint cannot use (its kind, or what its last connection
    test found), naming the modes that work; preset dynamo-nvext's actions to the detected
    generation's unless the run sets them."""
    choices = endpoint.affinity_choices
    if spec.affinity not in choices:
        asked = "the override" if "affinity" in overrides else "the scenario's affinity"
        if endpoint.affinity_detected:
            why = f"its connection test found {endpoint.affinity_headline}"
        else:
            why = f"it does not apply to a {endpoint.get_server_kind_display()} endpoint"
        raise Invalid.field(
            "overrides.affinity",
            f"{spec.affinity} ({asked}) will not work on {endpoint.name}: {why}. "
            f"Modes that work there: {', '.join(choices)}",
        )
    actions = endpoint.nvext_actions
    if spec.affinity == "dynamo-nvext" and actions is not None:
        if "affinity_actions" not in overrides:
            spec = spec_override(spec, {"affinity_actions": actions}, prefix="overrides")
        elif spec.affinity_actions != actions:
            raise Invalid.field(
                "overrides.affinity_actions",
                f"{endpoint.name} is {endpoint.generation_label}: dynamo-nvext must use "
                f"affinity_actions {actions}",
            )
    return spec


def _ticket_if_waiting() -> None:
    """After a run ended (a running slot of its team is free): a ticket when runs wait, since
    the tickets of runs passed over at their team's cap were dropped."""
    try:
        if Run.objects.filter(status=Status.QUEUED).exists():
            tickets_send("")
    except Exception:
        log.exception("sending a ticket for the waiting runs failed")


def run_rerun(*, actor: AnyUser, run_obj: Run) -> Run:
    """A new run of the same spec (and the same scenario and target, when they still exist)."""
    require_role(user=actor, team=run_obj.team, role=Role.MEMBER)
    if run_obj.scenario is None:
        raise Invalid.field("scenario", "the scenario of this run was deleted")
    if run_obj.target_kind == TargetKind.ENDPOINT and run_obj.endpoint is None:
        raise Invalid.field("endpoint", "the endpoint of this run was deleted")
    return run_launch(
        actor=actor,
        scenario_id=run_obj.scenario.uuid,
        endpoint_id=run_obj.endpoint.uuid if run_obj.endpoint else SIMULATED,
        overrides=run_obj.overrides,
        tags=run_obj.tag_list,
        rerun_of=run_obj,
    )


def run_update(
    *,
    actor: AnyUser,
    run_obj: Run,
    tags: str | Iterable[str] | None = None,
    notes: str | None = None,
    is_baseline: bool | None = None,
) -> Run:
    require_role(user=actor, team=run_obj.team, role=Role.MEMBER)
    fields: list[str] = []
    if tags is not None:
        run_obj.tags = tags_normalize(tags)
        fields.append("tags")
    if notes is not None:
        run_obj.notes = notes.strip()[:10_000]
        fields.append("notes")
    if is_baseline is not None:
        run_obj.is_baseline = bool(is_baseline)
        fields.append("is_baseline")
    if fields:
        run_obj.save(update_fields=fields)
    return run_obj


def run_delete(*, actor: AnyUser, run_obj: Run) -> None:
    require_role(user=actor, team=run_obj.team, role=Role.MEMBER)
    if run_obj.is_active:
        raise Invalid.field("status", "cancel the run before deleting it")
    run_obj.delete()


def run_cancel(*, actor: AnyUser, run_obj: Run) -> Run:
    """A queued run is cancelled at once; a running one is asked to stop (its worker sees the
    request within a fraction of a second, stops the engine and keeps what was measured)."""
    require_role(user=actor, team=run_obj.team, role=Role.MEMBER)
    now = timezone.now()
    Run.objects.filter(pk=run_obj.pk, status=Status.QUEUED).update(
        status=Status.CANCELLED, finished_at=now, cancel_requested_at=now, reason="cancelled"
    )
    Run.objects.filter(
        pk=run_obj.pk, status=Status.RUNNING, cancel_requested_at__isnull=True
    ).update(cancel_requested_at=now)
    run_obj.refresh_from_db()
    _announce(run_obj)
    return run_obj


def _announce(run_obj: Run) -> None:
    """Tell the run's live viewers its row as it is now (status, reason, times), and its team's
    runs lists that it changed: after every write that changes them, so no viewer polls the row
    (aiperf_web/runs/publisher.py)."""
    _announce_team(run_obj.team_id)
    publish_status(
        run_uuid=str(run_obj.uuid),
        state=run_state(
            status=run_obj.status,
            reason=run_obj.reason,
            started_at=run_obj.started_at,
            finished_at=run_obj.finished_at,
            cancel_requested_at=run_obj.cancel_requested_at,
        ),
    )


def _announce_team(team_id: int) -> None:
    team_uuid = Team.objects.filter(pk=team_id).values_list("uuid", flat=True).first()
    if team_uuid is not None:
        publish_runs_changed(team_uuid=str(team_uuid))


def _announce_pk(pk: int) -> None:
    row = Run.objects.filter(pk=pk).first()
    if row is not None:
        _announce(row)


# -- the worker's side -----------------------------------------------------------------------


def run_claim(*, run_uuid: str, worker: str) -> bool:
    """queued → running, as one conditional UPDATE: True for exactly one caller. A named run
    (inline commands, benchmarks): no team cap, no fairness."""
    now = timezone.now()
    claimed = Run.objects.filter(uuid=run_uuid, status=Status.QUEUED).update(
        status=Status.RUNNING, started_at=now, heartbeat_at=now, worker=worker[:200]
    )
    if claimed == 1:
        _announce(Run.objects.get(uuid=run_uuid))
    return claimed == 1


def run_claim_next(*, worker: str) -> Run | None:
    """Claim the queued run fairest to start: of the teams under AIPERF_TEAM_MAX_RUNNING, the
    one with the fewest runs running, its oldest run (not one waiting for its A/B partner).
    None when no run may start now."""
    cap = settings.AIPERF_TEAM_MAX_RUNNING
    running = (
        Run.objects.filter(team=OuterRef("team"), status=Status.RUNNING)
        .order_by()
        .values("team")
        .annotate(n=Count("pk"))
        .values("n")
    )
    candidates = (
        Run.objects.filter(status=Status.QUEUED)
        .exclude(after__status__in=ACTIVE)
        .annotate(team_running=Coalesce(Subquery(running, output_field=IntegerField()), 0))
        .filter(team_running__lt=cap)
        .order_by("team_running", "created_at", "pk")
        .values_list("pk", "team_id")[:_CLAIM_TRIES]
    )
    for pk, team_id in list(candidates):
        with transaction.atomic():
            _lock_team(team_id)
            # Counted again under the lock: another worker may have filled the last slot.
            if Run.objects.filter(team_id=team_id, status=Status.RUNNING).count() >= cap:
                continue
            now = timezone.now()
            claimed = Run.objects.filter(pk=pk, status=Status.QUEUED).update(
                status=Status.RUNNING, started_at=now, heartbeat_at=now, worker=worker[:200]
            )
        if claimed == 1:
            started = Run.objects.get(pk=pk)
            _announce(started)
            return started
    return None


def run_log(*, run_obj: Run, level: str, message: str) -> None:
    line = RunLog.objects.create(run=run_obj, level=level, message=message[:_LOG_LINE_CHARS])
    publish_log(run_uuid=str(run_obj.uuid), lines=[log_line(line)])


def _finish(
    *,
    run_obj: Run,
    status: Status,
    reason: str = "",
    summary: dict[str, Any] | None = None,
    sink: RunSink | None = None,
) -> None:
    """running → final, conditional: a run already ended (by the stale-run reaper, say) keeps
    its first verdict. The save survives a database blip (a restarted server, terminated
    backends): the engine's work is done and only this row holds its summary, so a failed
    attempt drops the connection (a pooled one may be dead too) and tries again on a fresh one,
    for up to ~15 s, well within AIPERF_STALE_RUN_S while the watcher keeps the heartbeat."""
    short = reason_excerpt(reason)
    if short != reason:
        # The row shows one line (run list, page, API); the whole text (a server's traceback
        # page, a database's DETAIL lines) is for whoever debugs the run, in its log.
        try:
            run_log(
                run_obj=run_obj,
                level="error" if status == Status.FAILED else "info",
                message=reason,
            )
        except DatabaseError:
            log.warning("run %s ended: %s", run_obj.uuid, reason, exc_info=True)
            connection.close()
    values: dict[str, Any] = {
        "status": status,
        "reason": short,
        "finished_at": timezone.now(),
    }
    if summary is not None:
        values["summary"] = summary
    if sink is not None:
        values["records_count"] = sink.records_written
        values["samples_count"] = sink.samples_written
    for delay_s in (*_FINISH_BACKOFF_S, None):
        try:
            if Run.objects.filter(pk=run_obj.pk, status=Status.RUNNING).update(**values):
                _announce_pk(run_obj.pk)
            return
        except DatabaseError:
            if delay_s is None:
                # Out of tries: the summary goes to the log, where an operator can restore it.
                log.error(
                    "run %s: saving its end (%s) failed; summary: %s",
                    run_obj.uuid,
                    status,
                    json.dumps(summary, default=str),
                )
                raise
            log.warning(
                "run %s: saving its end failed, retrying in %s s",
                run_obj.uuid,
                delay_s,
                exc_info=True,
            )
            connection.close()
            time.sleep(delay_s)


class _Watcher(threading.Thread):
    """Beside the engine: polls the run's row for a cancel request (sets `stop` within
    _CANCEL_POLL_S), writes the heartbeat, and stops the run at its wall-clock limit."""

    def __init__(self, *, run_pk: int, stop: threading.Event, limit_s: float) -> None:
        super().__init__(name=f"run-watch-{run_pk}", daemon=True)
        self.run_pk = run_pk
        self.stop = stop
        self.limit_s = limit_s
        self.done = threading.Event()
        self.cancelled = False
        self.timed_out = False

    def run(self) -> None:
        started = time.monotonic()
        last_beat = started
        try:
            while not self.done.wait(_CANCEL_POLL_S):
                now = time.monotonic()
                # The time limit needs no database: checked before anything that can fail.
                if now - started > self.limit_s and not self.stop.is_set():
                    self.timed_out = True
                    self.stop.set()
                try:
                    row = Run.objects.filter(pk=self.run_pk).values("cancel_requested_at").first()
                    if row is None or row["cancel_requested_at"] is not None:
                        self.cancelled = True
                        self.stop.set()
                    if now - last_beat >= _HEARTBEAT_S:
                        Run.objects.filter(pk=self.run_pk).update(heartbeat_at=timezone.now())
                        last_beat = now
                except DatabaseError:
                    # A blip must not end the heartbeats for the rest of the run (the reaper
                    # would fail a healthy run): drop the connection and try at the next poll.
                    log.warning("run watcher: database error, retrying", exc_info=True)
                    connection.close()
        finally:
            connection.close()


def _materialize_traces(spec: RunSpec, directory: Path) -> RunSpec:
    """Write each `trace:<uuid>` the spec references to a file the engine can load."""
    paths: list[str] = []
    for ref in spec.workload.traces:
        if not ref.startswith(TRACE_REF):
            raise BadInput(f"workload trace {ref!r} is not a stored trace")
        trace_id = ref.removeprefix(TRACE_REF)
        try:
            filename, content = trace_content(trace_id=trace_id)
        except NotFound as exc:
            raise BadInput(str(exc)) from None
        path = directory / f"{trace_id}-{filename}"
        path.write_bytes(content)
        paths.append(str(path))
    if not paths:
        return spec
    return spec.with_overrides({"workload": {"traces": paths}})


def run_execute_next(*, worker: str) -> str:
    """The body of the Celery task: claim the fairest queued run, execute it. Returns its
    final status, or 'skipped' when no run may start."""
    close_old_connections()
    claimed = run_claim_next(worker=worker)
    if claimed is None:
        return "skipped"
    return _execute(run_uuid=str(claimed.uuid))


def run_execute(*, run_uuid: str, worker: str) -> str:
    """Claim and execute this run (inline commands, benchmarks). Returns the final status (or
    'skipped' when another worker owns the run)."""
    close_old_connections()
    if not run_claim(run_uuid=run_uuid, worker=worker):
        return "skipped"
    return _execute(run_uuid=run_uuid)


def _execute(*, run_uuid: str) -> str:
    """Run the claimed run's engine with a storing sink and finish it; then its last log
    lines and webhooks, and a ticket for the runs waiting, if any."""
    try:
        status = _execute_claimed(run_uuid=run_uuid)
        _run_ended(run_uuid=run_uuid)
        return status
    finally:
        _ticket_if_waiting()


# -- the run log's lifecycle lines ------------------------------------------------------------
# claimed (by which worker), started (what runs, against what, until when), the engine's own
# preflight and affinity lines (through the sink), stopped (why), saved (what): a run's log
# tells its story without a look at the worker's logs.


def _claimed_line(run_obj: Run) -> str:
    waited = ""
    if run_obj.started_at is not None:
        waited = f" after {(run_obj.started_at - run_obj.created_at).total_seconds():.1f} s queued"
    return f"claimed by worker {run_obj.worker or '?'}{waited}"


def _started_line(spec: RunSpec, run_obj: Run) -> str:
    target = spec.target
    if isinstance(target, SimulatedTarget):
        against = (
            f"a simulated cluster of {target.workers} workers ({target.router} router, "
            "virtual time)"
        )
    else:
        against = f"{run_obj.endpoint_name} ({target.url}, model {target.model})"
        if run_obj.endpoint is not None and run_obj.endpoint.affinity_detected:
            against += f"; its last connection test found {run_obj.endpoint.affinity_headline}"
    affinity = spec.affinity if spec.affinity == "none" else f"{spec.affinity} ({spec.scope})"
    until = [
        text
        for text, value in (
            (f"{spec.duration_s:g} s", spec.duration_s),
            (f"{spec.max_requests} requests", spec.max_requests),
            (f"{spec.max_trees} trees", spec.max_trees),
        )
        if value is not None
    ]
    return (
        f"started: {spec.policy} routing, affinity {affinity}, "
        f"{spec.effective_concurrency} lanes on {spec.client_workers} client workers, "
        f"until {' or '.join(until) or 'the workload ends'}; against {against}"
    )


def _stop_line(run_obj: Run) -> tuple[str, str]:
    """(level, line): why the run ended, in a person's words."""
    summary = run_obj.summary or {}
    spec = run_obj.spec or {}
    if run_obj.status == Status.CANCELLED:
        return "warning", "stopped: cancelled"
    if run_obj.status == Status.FAILED:
        reason = (run_obj.reason or "failed").splitlines()[0][:300]
        return "error", f"stopped: failed ({reason})"
    if run_obj.reason:  # succeeded, but ended early (a stalled simulated clock, say)
        why = run_obj.reason[:300]
    elif spec.get("duration_s") and (summary.get("elapsed_s") or 0) >= spec["duration_s"] - 0.5:
        why = f"its duration ({spec['duration_s']:g} s) was reached"
    elif spec.get("max_requests") and (summary.get("requests") or 0) >= spec["max_requests"]:
        why = f"its request count ({spec['max_requests']}) was reached"
    elif spec.get("max_trees") and (summary.get("trees_started") or 0) >= spec["max_trees"]:
        why = f"its tree count ({spec['max_trees']}) was reached"
    else:
        why = "the workload ran to its end"
    cut = summary.get("cut_by_stop") or 0
    tail = f"; {cut} requests in flight were cut by the stop (not errors)" if cut else ""
    return "info", f"stopped: {why}{tail}"


def _saved_line(run_obj: Run) -> str:
    summary = run_obj.summary or {}
    figures = ""
    if summary:
        figures = f": {summary.get('requests', 0)} requests, {summary.get('errors', 0)} errors" + (
            f", {summary['requests_per_s']:.2f} req/s" if summary.get("requests_per_s") else ""
        )
    return (
        f"saved ({run_obj.status}){figures}; {run_obj.records_count} records and "
        f"{run_obj.samples_count} snapshots stored"
    )


def _run_ended(*, run_uuid: str) -> None:
    """After the final save: the log's stop and saved lines, then the run-end webhooks. Never
    raises: the run's outcome is stored, and nothing here may change it."""
    try:
        run_obj = Run.objects.select_related("team", "scenario").get(uuid=run_uuid)
        level, line = _stop_line(run_obj)
        run_log(run_obj=run_obj, level=level, message=line)
        run_log(run_obj=run_obj, level="info", message=_saved_line(run_obj))
    except Exception:
        log.exception("run %s: writing its end to the run log failed", run_uuid)
        return
    from aiperf_web.runs.webhooks import run_webhooks_send

    try:
        run_webhooks_send(run_obj=run_obj)
    except Exception:
        log.exception("run %s: its webhooks failed", run_uuid)


def _execute_claimed(*, run_uuid: str) -> str:
    run_obj = Run.objects.select_related("endpoint").get(uuid=run_uuid)
    stop = threading.Event()
    sink: RunSink | None = None
    watcher: _Watcher | None = None
    try:
        run_log(run_obj=run_obj, level="info", message=_claimed_line(run_obj))
        try:
            spec = spec_parse(run_obj.spec)
        except Invalid as exc:
            _finish(run_obj=run_obj, status=Status.FAILED, reason=f"invalid stored spec: {exc}")
            return Status.FAILED
        run_log(run_obj=run_obj, level="info", message=_started_line(spec, run_obj))
        if isinstance(spec.target, EndpointTarget):
            check_outbound_url(spec.target.url)
            if spec.target.metrics_scrape_url is not None:
                check_outbound_url(spec.target.metrics_scrape_url)
            if run_obj.endpoint is not None:
                spec = endpoint_attach_secrets(spec=spec, endpoint=run_obj.endpoint)
        # Everything allocated so far (Django, the app, the spec) lives as long as the process:
        # moved out of the collector's sight, the engine's frequent collections do not walk it.
        # A full collection first: until one runs, the last run's workload and engine are
        # cyclic garbage, and frozen they were never freed (a pool process grew by the size of
        # each run's workload, ~75 MB for a default live run; issue 13 item 10).
        gc.collect()
        gc.freeze()
        watcher = _Watcher(run_pk=run_obj.pk, stop=stop, limit_s=run_time_limit_s(spec) - 60)
        watcher.start()
        sink = RunSink(run=run_obj, stop=stop)
        with tempfile.TemporaryDirectory(prefix="aiperf-run-") as tmp:
            spec = _materialize_traces(spec, Path(tmp))
            result = run(spec, sink=sink, stop=stop, fleet=fleet_plan(spec))
        sink.close()
        summary = dict(result.summary)
        if sink.failure is not None:
            status, reason = Status.FAILED, f"storing results failed: {sink.failure}"
        elif watcher.cancelled or result.status == "cancelled":
            status, reason = Status.CANCELLED, "cancelled"
        elif watcher.timed_out:
            status, reason = Status.FAILED, "stopped at the run's time limit"
        elif result.status == "failed":
            status, reason = Status.FAILED, result.stopped_reason or "failed"
        else:
            status, reason = Status.SUCCEEDED, result.stopped_reason or ""
        _finish(run_obj=run_obj, status=status, reason=reason, summary=summary, sink=sink)
        return status
    except (RunnerError, Invalid) as exc:
        # The engine's own one-line messages (preflight, bad trace, bad spec).
        if sink is not None:
            sink.close()
        _finish(run_obj=run_obj, status=Status.FAILED, reason=str(exc), sink=sink)
        return Status.FAILED
    except BaseException as exc:
        # Anything else is our bug or the machine's: the log gets the traceback, the person a
        # line. BaseException: Celery's SoftTimeLimitExceeded and worker shutdown included.
        log.exception("run %s failed", run_uuid)
        if sink is not None:
            try:
                sink.close()
            except Exception:
                log.exception("run %s: storing the last records failed", run_uuid)
        _finish(
            run_obj=run_obj,
            status=Status.FAILED,
            reason=f"internal error: {type(exc).__name__}: {str(exc)[:300]}",
            sink=sink,
        )
        if not isinstance(exc, Exception):
            raise
        return Status.FAILED
    finally:
        if watcher is not None:
            watcher.done.set()
            watcher.join(timeout=5)


def runs_requeue_queued() -> int:
    """Send every queued run to the broker again (after an in-memory broker was lost)."""
    count = 0
    for run_uuid in Run.objects.filter(status=Status.QUEUED).values_list("uuid", flat=True):
        tickets_send(str(run_uuid))
        count += 1
    return count


def runs_reconcile_queued() -> int:
    """Send tickets for runs that wait with none in the broker: Redis restarted empty, or a
    worker died holding a ticket it had not yet claimed with (Redis would redeliver it only
    after the 12 h visibility timeout). When runs a worker could start now (under their team's
    running cap, not waiting for an A/B partner, queued over _RECONCILE_GRACE_S ago) exist and
    the queue holds no ticket, one ticket per such run (at most each team's free slots) goes
    out. A ticket too many is harmless (it finds nothing to claim and is dropped); every
    worker and web process calls this periodically. Returns how many were sent."""
    cap = settings.AIPERF_TEAM_MAX_RUNNING
    cutoff = timezone.now() - timedelta(seconds=_RECONCILE_GRACE_S)
    waiting = dict(
        Run.objects.filter(status=Status.QUEUED, created_at__lt=cutoff)
        .exclude(after__status__in=ACTIVE)
        .order_by()
        .values("team")
        .annotate(n=Count("pk"))
        .values_list("team", "n")
    )
    if not waiting:
        return 0
    running = dict(
        Run.objects.filter(status=Status.RUNNING, team__in=waiting)
        .order_by()
        .values("team")
        .annotate(n=Count("pk"))
        .values_list("team", "n")
    )
    startable = sum(min(n, max(0, cap - running.get(team, 0))) for team, n in waiting.items())
    if startable == 0 or tickets_waiting() > 0:
        return 0
    for _ in range(startable):
        tickets_send("")
    return startable


def runs_reap_stale(*, older_than_s: float | None = None) -> int:
    """Mark failed every running run whose worker stopped writing its heartbeat (a killed
    worker process or host), keeping what it stored. Returns how many."""
    limit = settings.AIPERF_STALE_RUN_S if older_than_s is None else older_than_s
    cutoff = timezone.now() - timedelta(seconds=limit)
    reaped = 0
    for pk in Run.objects.filter(status=Status.RUNNING, heartbeat_at__lt=cutoff).values_list(
        "pk", flat=True
    ):
        reaped += Run.objects.filter(pk=pk, status=Status.RUNNING, heartbeat_at__lt=cutoff).update(
            status=Status.FAILED,
            finished_at=timezone.now(),
            reason=Concat(
                Value("worker "),
                "worker",
                Value(
                    f" stopped responding (no heartbeat for over {int(limit)} s); "
                    "samples and records up to its last flush are kept"
                ),
                output_field=TextField(),
            ),
            samples_count=RunSample.objects.filter(run_id=pk).count(),
            records_count=RunRecord.objects.filter(run_id=pk).count(),
        )
        _announce_pk(pk)
    if reaped:
        _ticket_if_waiting()  # their teams' running slots are free again
    return reaped


__all__ = [
    "FINAL",
    "run_cancel",
    "run_claim",
    "run_claim_next",
    "run_delete",
    "run_execute",
    "run_execute_next",
    "run_launch",
    "run_rerun",
    "run_update",
    "runs_reap_stale",
    "runs_reconcile_queued",
]
