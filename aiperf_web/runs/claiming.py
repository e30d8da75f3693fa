"""Queue keeping: which queued run a worker claims, and keeping the queue whole.

A ticket (runs/tasks.py) claims the fairest queued run (`run_claim_next`: one conditional
UPDATE under the team's and the endpoint's row locks); inline commands and benchmarks claim a
named run (`run_claim`). After a run ends a ticket goes out for the runs waiting
(`ticket_if_waiting`); the reconciliation sends tickets for queued runs the broker holds none
for; the stale-run reaper, in every worker and web process, fails the running runs whose
heartbeat stopped. Running a claimed run is runs/executing.py, which uses this module, never
the reverse. The web's writes (launch, cancel) are runs.services.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import TextField, Value
from django.db.models.functions import Concat
from django.utils import timezone

from aiperf_web.endpoints.models import Endpoint
from aiperf_web.runs.line import lease_log_waiting, queue_line
from aiperf_web.runs.models import Run, RunLog, RunRecord, RunSample, Status
from aiperf_web.runs.publisher import log_line, publish_log
from aiperf_web.runs.services import run_announce, run_announce_pk, team_lock
from aiperf_web.runs.tickets import tickets_send, tickets_waiting

log = logging.getLogger(__name__)

_CLAIM_TRIES = 5  # candidates a ticket tries when others' claims race it
# A queued run younger than this may still have its launch's ticket on the way (sent after
# commit): the reconciliation leaves it alone.
_RECONCILE_GRACE_S = 5.0


def ticket_if_waiting() -> None:
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
        ticket_if_waiting()  # their teams' running slots are free again
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
