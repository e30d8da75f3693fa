"""The worker's side of runs: claim a queued run, execute it beside a watcher, finish it, and
keep the queue whole (tickets after a run ends, the reconciliation, the stale-run reaper).

A ticket (runs/tasks.py) runs `run_execute_next`: claim the fairest queued run (one
conditional UPDATE under the team's row lock), write its traces to a temporary folder, run the
engine with a storing sink while `_Watcher` polls for a cancel, writes the heartbeat and stops
the run at its limit, then save its end (retried across a database blip). The reaper, in every
worker and web process, fails the running runs whose heartbeat stopped. The web's writes
(launch, cancel) are runs.services; this module uses them, never the reverse.
"""

from __future__ import annotations

import gc
import json
import logging
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection, transaction
from django.db.models import TextField, Value
from django.db.models.functions import Concat
from django.utils import timezone

from aiperf_web.core.errors import Invalid, NotFound
from aiperf_web.core.outbound import check_outbound_url
from aiperf_web.core.specs import spec_parse
from aiperf_web.core.text import reason_excerpt
from aiperf_web.endpoints.models import Endpoint
from aiperf_web.endpoints.services import endpoint_attach_secrets
from aiperf_web.runs.fleet import fleet_plan
from aiperf_web.runs.line import lease_log_waiting, queue_line
from aiperf_web.runs.models import Run, RunLog, RunRecord, RunSample, Status
from aiperf_web.runs.publisher import log_line, publish_log
from aiperf_web.runs.services import run_announce, run_announce_pk, team_lock
from aiperf_web.runs.signals import run_ended
from aiperf_web.runs.sink import DatabaseAway, RunSink, db_retry
from aiperf_web.runs.tickets import tickets_send, tickets_waiting
from aiperf_web.scenarios.services import TRACE_REF, trace_content
from runner import (
    BadInput,
    EndpointTarget,
    RunnerError,
    RunSpec,
    SimulatedTarget,
    run,
    wait_until_drained,
)

log = logging.getLogger(__name__)

# How often the worker looks for a cancel request; Cancel must stop a run within 2 s.
_CANCEL_POLL_S = 0.25
_HEARTBEAT_S = 5.0
# A log line's length: enough for a server's whole error answer as the engine quotes it (at
# most 16 KiB of body) with its context.
_LOG_LINE_CHARS = 20_000
_CLAIM_TRIES = 5  # candidates a ticket tries when others' claims race it
# A queued run younger than this may still have its launch's ticket on the way (sent after
# commit): the reconciliation leaves it alone.
_RECONCILE_GRACE_S = 5.0


def run_time_limit_s(spec: RunSpec) -> int:
    """The Celery hard time limit of a run: its own length plus room for preflight, draining
    and storage. Simulated runs take seconds of wall time whatever their simulated length."""
    if isinstance(spec.target, SimulatedTarget):
        return 3600
    if spec.duration_s is not None:
        return int(spec.duration_s * 1.2 + 600)
    return 24 * 3600


def _ticket_if_waiting() -> None:
    """After a run ended (a running slot of its team is free): a ticket when runs wait, since
    the tickets of runs passed over at their team's cap were dropped."""
    try:
        if Run.objects.filter(status=Status.QUEUED).exists():
            tickets_send("")
    except Exception:
        log.exception("sending a ticket for the waiting runs failed")


def run_claim(*, run_uuid: str, worker: str) -> bool:
    """queued → running, as one conditional UPDATE: True for exactly one caller. A named run
    (inline commands, benchmarks): no team cap, no fairness."""
    now = timezone.now()
    claimed = Run.objects.filter(uuid=run_uuid, status=Status.QUEUED).update(
        status=Status.RUNNING, started_at=now, heartbeat_at=now, worker=worker[:200]
    )
    if claimed == 1:
        run_announce(Run.objects.get(uuid=run_uuid))
    return claimed == 1


def run_claim_next(*, worker: str) -> Run | None:
    """Claim the queued run fairest to start: the front of the line (runs.line: of the teams
    under their cap, the one with the fewest runs running, its oldest run not waiting for its
    A/B partner nor for its endpoint's lease). The cap and the lease are checked again under
    the team's and the endpoint's row locks (in that order, everywhere): two workers never
    both take a team's last slot nor one endpoint. None when no run may start now."""
    line = queue_line()
    for candidate in line.startable[:_CLAIM_TRIES]:
        with transaction.atomic():
            team_lock(candidate.team_id)
            # Counted again under the lock: another worker may have filled the last slot.
            running = Run.objects.filter(team_id=candidate.team_id, status=Status.RUNNING)
            if running.count() >= line.cap:
                continue
            sharing: list[Run] = []
            if candidate.endpoint_id is not None:
                endpoint_lock(candidate.endpoint_id)
                sharing = list(
                    Run.objects.filter(
                        endpoint_id=candidate.endpoint_id, status=Status.RUNNING
                    ).order_by("started_at", "pk")
                )
                if sharing and not candidate.allow_overlap:
                    continue
            now = timezone.now()
            claimed = Run.objects.filter(pk=candidate.pk, status=Status.QUEUED).update(
                status=Status.RUNNING, started_at=now, heartbeat_at=now, worker=worker[:200]
            )
            if claimed == 1 and sharing:
                _record_overlap(Run.objects.get(pk=candidate.pk), sharing, at=now)
        if claimed == 1:
            started = Run.objects.get(pk=candidate.pk)
            run_announce(started)
            if started.endpoint_id is not None:
                try:
                    lease_log_waiting(started.endpoint_id)
                except DatabaseError:
                    log.warning("writing the endpoint's waiting runs' logs failed", exc_info=True)
            return started
    return None


def endpoint_lock(endpoint_id: int) -> None:
    """Serialize the claims of runs on one endpoint until the transaction ends (the lease)."""
    list(Endpoint.objects.select_for_update().filter(pk=endpoint_id).values_list("pk", flat=True))


def _overlap_entry(other: Run, at: Any) -> dict[str, Any]:
    return {
        "run": str(other.uuid),
        "name": f"{other.scenario_name} on {other.endpoint_name}",
        "at": at.isoformat(),
    }


def _record_overlap(started: Run, sharing: list[Run], *, at: Any) -> None:
    """An opted-in run started beside `sharing` on its endpoint: kept on every one of them
    (under the endpoint's lock, so read-modify-write is safe)."""
    started.overlaps = [*started.overlaps, *(_overlap_entry(o, at) for o in sharing)]
    started.save(update_fields=["overlaps"])
    for other in sharing:
        other.overlaps = [*other.overlaps, _overlap_entry(started, at)]
        other.save(update_fields=["overlaps"])
    names = ", ".join(f"{o.uuid} ({o.scenario_name})" for o in sharing)
    _log_on_commit(
        started,
        f"overlap: started beside run(s) {names} on {started.endpoint_name} (allow_overlap): "
        "their latencies include each other's load",
    )
    for other in sharing:
        _log_on_commit(
            other,
            f"overlap: run {started.uuid} ({started.scenario_name}) started beside this one on "
            f"{other.endpoint_name} (it set allow_overlap): latencies from now on include its "
            "load",
        )


def _log_on_commit(run_obj: Run, message: str) -> None:
    entry = RunLog.objects.create(run=run_obj, level="warning", message=message)
    run_uuid = str(run_obj.uuid)

    def publish() -> None:
        publish_log(run_uuid=run_uuid, lines=[log_line(entry)])

    transaction.on_commit(publish)


def run_log(*, run_obj: Run, level: str, message: str) -> None:
    """A line of the run's log, stored across a database blip (runs.sink.db_retry)."""
    line = db_retry(
        lambda: RunLog.objects.create(run=run_obj, level=level, message=message[:_LOG_LINE_CHARS]),
        what=f"run {run_obj.uuid}: storing a log line",
    )
    if line is not None:
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
    attempt drops the connection (a pooled one may be dead too) and tries again on a fresh one
    (runs.sink.db_retry), for up to AIPERF_DB_OUTAGE_S; the watcher keeps the heartbeat
    meanwhile, so no reaper takes the run for a dead one once the database is back."""
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
        except (DatabaseError, DatabaseAway):
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
    try:
        updated = db_retry(
            lambda: Run.objects.filter(pk=run_obj.pk, status=Status.RUNNING).update(**values),
            what=f"run {run_obj.uuid}: saving its end ({status})",
        )
    except DatabaseAway:
        # Out of tries: the summary goes to the log, where an operator can restore it.
        log.error(
            "run %s: saving its end (%s) failed; summary: %s",
            run_obj.uuid,
            status,
            json.dumps(summary, default=str),
        )
        raise
    if updated:
        run_announce_pk(run_obj.pk)


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
        away_since: float | None = None
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
                    if away_since is not None:
                        log.warning(
                            "run watcher: the database is back after %.1f s",
                            now - away_since,
                        )
                        away_since = None
                except DatabaseError as exc:
                    # A blip must not end the heartbeats for the rest of the run (the reaper
                    # would fail a healthy run): drop the connection and try at the next poll
                    # (said once per outage, not at every poll).
                    if away_since is None:
                        away_since = now
                        log.warning("run watcher: database error (%s), retrying", exc)
                    connection.close()
        finally:
            connection.close()


def _drain_endpoint(*, run_obj: Run, spec: RunSpec, stop: threading.Event) -> None:
    """The first phase of a run that holds its endpoint's lease: wait until the server is
    drained (its /metrics show nothing running or queued, at most
    AIPERF_ENDPOINT_DRAIN_TIMEOUT_S), or, where it has no such metrics, until
    AIPERF_ENDPOINT_COOLDOWN_S have passed since the last run on it ended. The run holds its
    slot meanwhile (seconds), says so in its log, and its started_at moves to the end of the
    wait. Opted-in overlaps and simulated runs do not wait."""
    target = spec.target
    if run_obj.allow_overlap or run_obj.endpoint_id is None:
        return
    if not isinstance(target, EndpointTarget):
        return
    last = (
        Run.objects.filter(endpoint_id=run_obj.endpoint_id, finished_at__isnull=False)
        .exclude(pk=run_obj.pk)
        .order_by("-finished_at")
        .values_list("finished_at", flat=True)
        .first()
    )
    cooldown_s = 0.0
    if last is not None:
        since = (timezone.now() - last).total_seconds()
        cooldown_s = max(0.0, float(settings.AIPERF_ENDPOINT_COOLDOWN_S) - since)
    if target.metrics_scrape_url is None and cooldown_s <= 0:
        return
    began = time.monotonic()

    def note(level: Literal["info", "warning", "error"], message: str) -> None:
        run_log(run_obj=run_obj, level=level, message=f"drain: {message}")

    wait_until_drained(
        target,
        timeout_s=float(settings.AIPERF_ENDPOINT_DRAIN_TIMEOUT_S),
        cooldown_s=cooldown_s,
        stop=stop,
        log=note,
    )
    waited = time.monotonic() - began
    if waited >= 0.5:
        now = timezone.now()
        Run.objects.filter(pk=run_obj.pk, status=Status.RUNNING).update(started_at=now)
        run_obj.started_at = now
        note("info", f"the endpoint was drained after {waited:.1f} s; the run starts now")
    else:
        note("info", "the endpoint has nothing running or queued; the run starts now")


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
            # A format of None raises: a spec without duration_s failed the run before it began.
            ("" if spec.duration_s is None else f"{spec.duration_s:g} s", spec.duration_s),
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
    for receiver, outcome in run_ended.send_robust(sender=Run, run_obj=run_obj):
        if isinstance(outcome, Exception):
            log.error("run %s: %r failed at its end: %r", run_uuid, receiver, outcome)


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
        _drain_endpoint(run_obj=run_obj, spec=spec, stop=stop)
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
    after the 12 h visibility timeout). When runs a worker could start now (runs.line's
    startable ones, queued over _RECONCILE_GRACE_S ago) exist and the queue holds no ticket,
    one ticket per such run goes out. A ticket too many is harmless (it finds nothing to claim
    and is dropped); every worker and web process calls this periodically. Returns how many
    were sent."""
    cutoff = timezone.now() - timedelta(seconds=_RECONCILE_GRACE_S)
    startable = sum(1 for queued in queue_line().startable if queued.created_at < cutoff)
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
        run_announce_pk(pk)
    if reaped:
        _ticket_if_waiting()  # their teams' running slots are free again
    return reaped


class StaleRunReaper(threading.Thread):
    """Every `interval_s`: marks failed the running runs whose worker stopped writing
    heartbeats (a killed worker process), and sends tickets for queued runs that have none in
    the broker (runs_reconcile_queued: Redis lost its data, a worker died holding one). Runs
    in every web process and worker; the UPDATE is conditional, so several reapers agree, and
    a surplus ticket is dropped by the worker that takes it."""

    def __init__(self, *, interval_s: float = 10.0) -> None:
        super().__init__(name="stale-run-reaper", daemon=True)
        self.interval_s = interval_s
        self.done = threading.Event()

    def run(self) -> None:
        # After a database outage the running runs' heartbeats are as old as the outage: their
        # watchers get a whole AIPERF_STALE_RUN_S to write one before any is judged stale.
        quiet_until = 0.0
        while not self.done.wait(self.interval_s):
            try:
                if time.monotonic() >= quiet_until:
                    reaped = runs_reap_stale()
                    if reaped:
                        log.warning(
                            "marked %d run(s) failed: their worker stopped responding", reaped
                        )
            except DatabaseError:
                quiet_until = time.monotonic() + settings.AIPERF_STALE_RUN_S
                log.warning("stale-run reaper: the database is away", exc_info=True)
            except Exception:
                log.exception("stale-run reaper failed")
            try:
                sent = runs_reconcile_queued()
                if sent:
                    log.warning("sent %d ticket(s) for queued runs the broker had none for", sent)
            except Exception:
                log.exception("reconciling queued runs with the broker failed")
            finally:
                connection.close()
