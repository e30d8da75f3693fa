"""Running one claimed run: its engine beside a watcher, its end saved, its log's story.

`run_execute_next` (the Celery task's body) and `run_execute` (inline commands, benchmarks)
claim through runs/claiming.py, then: write the run's traces to a temporary folder, run the
engine with a storing sink while `_Watcher` polls for a cancel, writes the heartbeat and stops
the run at its limit, then save its end (retried across a database blip) and write the log's
lifecycle lines (claimed, started, stopped, saved). Queue keeping (claims, the reconciliation,
the reaper) is runs/claiming.py.
"""

from __future__ import annotations

import gc
import json
import logging
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection
from django.utils import timezone

from aiperf_web.core.errors import Invalid, NotFound
from aiperf_web.core.outbound import check_outbound_url
from aiperf_web.core.specs import spec_parse
from aiperf_web.core.text import reason_excerpt
from aiperf_web.endpoints.services import endpoint_attach_secrets
from aiperf_web.runs.claiming import run_claim, run_claim_next, ticket_if_waiting
from aiperf_web.runs.fleet import fleet_plan
from aiperf_web.runs.models import Run, RunLog, Status
from aiperf_web.runs.publisher import log_line, publish_log
from aiperf_web.runs.services import run_announce_pk
from aiperf_web.runs.signals import run_ended
from aiperf_web.runs.sink import DatabaseAway, RunSink, db_retry
from aiperf_web.scenarios.services import TRACE_REF, trace_content
from runner import (
    BadInput,
    Ending,
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


def run_time_limit_s(spec: RunSpec) -> int:
    """The Celery hard time limit of a run: its own length plus room for preflight, draining
    and storage. Simulated runs take seconds of wall time whatever their simulated length."""
    if isinstance(spec.target, SimulatedTarget):
        return 3600
    if spec.duration_s is not None:
        return int(spec.duration_s * 1.2 + 600)
    return 24 * 3600


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
        outcome = _execute_claimed(run_uuid=run_uuid)
        _run_ended(run_uuid=run_uuid, outcome=outcome)
        return outcome.status
    finally:
        ticket_if_waiting()


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


# -- how a run ended: its status, the row's reason and the log's stop line, decided here -------


@dataclass(frozen=True, slots=True)
class Outcome:
    """A run's end as the service stores and tells it: `status` and the row's `reason` (why it
    failed; for a success that stopped before its limits, why), and the log's stop line."""

    status: Status
    reason: str
    level: Literal["info", "warning", "error"]
    line: str


def _failed(reason: str) -> Outcome:
    first = (reason or "failed").splitlines()[0][:300]
    return Outcome(Status.FAILED, reason or "failed", "error", f"stopped: failed ({first})")


_CANCELLED = Outcome(Status.CANCELLED, "cancelled", "warning", "stopped: cancelled")


def run_outcome(
    ended: Ending,
    *,
    cut_by_stop: int = 0,
    cancel_requested: bool = False,
    timed_out: bool = False,
    storing_failed: str | None = None,
) -> Outcome:
    """The engine's `ended_by` (runner.ending) and what only the service knows (the results
    could not be stored, a person asked to cancel, the run's time limit: both stop the engine,
    which then says `cancelled`) as the run's outcome."""
    if storing_failed is not None:
        return _failed(f"storing results failed: {storing_failed}")
    if cancel_requested:
        return _CANCELLED
    if timed_out:
        return _failed("stopped at the run's time limit")
    if ended.status == "cancelled":
        return _CANCELLED
    if ended.status == "failed":
        return _failed(ended.detail)
    tail = (
        f"; {cut_by_stop} requests in flight were cut by the stop (not errors)"
        if cut_by_stop
        else ""
    )
    # Succeeded: by its own limit, or (early) because the workload ran out before them.
    return Outcome(
        Status.SUCCEEDED,
        ended.detail if ended.early else "",
        "info",
        f"stopped: {ended.detail}{tail}",
    )


def _stored_outcome(run_obj: Run) -> Outcome:
    """The outcome of a run whose end another wrote first (the stale-run reaper): its row."""
    if run_obj.status == Status.CANCELLED:
        return _CANCELLED
    if run_obj.status == Status.FAILED:
        return _failed(run_obj.reason)
    return Outcome(
        Status.SUCCEEDED, run_obj.reason, "info", f"stopped: {run_obj.reason or 'succeeded'}"
    )


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


def _run_ended(*, run_uuid: str, outcome: Outcome) -> None:
    """After the final save: the log's stop and saved lines, then the run-end webhooks. Never
    raises: the run's outcome is stored, and nothing here may change it."""
    try:
        run_obj = Run.objects.select_related("team", "scenario").get(uuid=run_uuid)
        if run_obj.status != outcome.status:
            outcome = _stored_outcome(run_obj)  # another ended it first: its verdict stands
        run_log(run_obj=run_obj, level=outcome.level, message=outcome.line)
        run_log(run_obj=run_obj, level="info", message=_saved_line(run_obj))
    except Exception:
        log.exception("run %s: writing its end to the run log failed", run_uuid)
        return
    for receiver, answer in run_ended.send_robust(sender=Run, run_obj=run_obj):
        if isinstance(answer, Exception):
            log.error("run %s: %r failed at its end: %r", run_uuid, receiver, answer)


def _ended(run_obj: Run, outcome: Outcome, **saved: Any) -> Outcome:
    _finish(run_obj=run_obj, status=outcome.status, reason=outcome.reason, **saved)
    return outcome


def _execute_claimed(*, run_uuid: str) -> Outcome:
    run_obj = Run.objects.select_related("endpoint").get(uuid=run_uuid)
    stop = threading.Event()
    sink: RunSink | None = None
    watcher: _Watcher | None = None
    try:
        run_log(run_obj=run_obj, level="info", message=_claimed_line(run_obj))
        try:
            spec = spec_parse(run_obj.spec)
        except Invalid as exc:
            return _ended(run_obj, _failed(f"invalid stored spec: {exc}"))
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
        outcome = run_outcome(
            result.ended_by,
            cut_by_stop=result.summary.get("cut_by_stop") or 0,
            cancel_requested=watcher.cancelled,
            timed_out=watcher.timed_out,
            storing_failed=None if sink.failure is None else str(sink.failure),
        )
        return _ended(run_obj, outcome, summary=summary, sink=sink)
    except (RunnerError, Invalid) as exc:
        # The engine's own one-line messages (preflight, bad trace, bad spec).
        if sink is not None:
            sink.close()
        return _ended(run_obj, _failed(str(exc)), sink=sink)
    except BaseException as exc:
        # Anything else is our bug or the machine's: the log gets the traceback, the person a
        # line. BaseException: Celery's SoftTimeLimitExceeded and worker shutdown included.
        log.exception("run %s failed", run_uuid)
        if sink is not None:
            try:
                sink.close()
            except Exception:
                log.exception("run %s: storing the last records failed", run_uuid)
        outcome = _ended(
            run_obj, _failed(f"internal error: {type(exc).__name__}: {str(exc)[:300]}"), sink=sink
        )
        if not isinstance(exc, Exception):
            raise
        return outcome
    finally:
        if watcher is not None:
            watcher.done.set()
            watcher.join(timeout=5)
