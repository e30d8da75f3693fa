"""The line of queued runs: the order workers start them in, and why a queued run waits.

One rule, here only. A queued run may start when its A/B partner (the run it is `after`) has
ended and its team runs fewer than AIPERF_TEAM_MAX_RUNNING; of those, the run of the team
running the fewest goes first, then the oldest (so one team's queue of long runs never holds
another team's run behind it). `queue_line()` applies it as if slots freed one at a time and no
run ended meanwhile: each start counts against its team for the starts after it. The worker's
claim takes its candidates from the front of that line (runs.worker.run_claim_next), the
reconciliation counts its startable runs (runs_reconcile_queued), and `run_wait` tells a
queued run's viewers where it stands and what it waits for: its A/B partner, its team's cap, a
worker (none consuming the runs queue within AIPERF_STALE_RUN_S, runs.presence), the runs
holding every worker slot, or the runs ahead of it.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from typing import Literal
from uuid import UUID

from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from aiperf_web.runs.models import ACTIVE, Run, Status
from aiperf_web.runs.presence import last_seen_s, workers_seen

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Queued:
    pk: int
    team_id: int
    created_at: dt.datetime
    partner_active: bool  # its A/B partner is queued or running


@dataclass(frozen=True)
class Line:
    """`startable`: the runs that can start without any run ending, in the order they would;
    `blocked`: the rest (their team at its cap, or their A/B partner not ended), oldest first.
    `running`: runs executing per team id."""

    startable: list[Queued]
    blocked: list[Queued]
    running: dict[int, int] = field(default_factory=dict)

    def place(self, pk: int) -> int | None:
        """1-based place of the run in line (startable ones first), None when not queued."""
        for place, queued in enumerate((*self.startable, *self.blocked), start=1):
            if queued.pk == pk:
                return place
        return None


def queue_line() -> Line:
    cap = settings.AIPERF_TEAM_MAX_RUNNING
    rows = list(
        Run.objects.filter(status=Status.QUEUED)
        .order_by("created_at", "pk")
        .values_list("pk", "team_id", "created_at", "after_id")
    )
    partners = {after for *_, after in rows if after is not None}
    active_partners = set(
        Run.objects.filter(pk__in=partners, status__in=ACTIVE).values_list("pk", flat=True)
    )
    queued = [
        Queued(pk=pk, team_id=team, created_at=at, partner_active=after in active_partners)
        for pk, team, at, after in rows
    ]
    running: dict[int, int] = dict(
        Run.objects.filter(status=Status.RUNNING)
        .order_by()
        .values("team")
        .annotate(n=Count("pk"))
        .values_list("team", "n")
    )
    counts = dict(running)
    waiting = [q for q in queued if not q.partner_active]
    startable: list[Queued] = []
    while True:
        eligible = [q for q in waiting if counts.get(q.team_id, 0) < cap]
        if not eligible:
            break
        nxt = min(eligible, key=lambda q: (counts.get(q.team_id, 0), q.created_at, q.pk))
        startable.append(nxt)
        counts[nxt.team_id] = counts.get(nxt.team_id, 0) + 1
        waiting.remove(nxt)
    chosen = {q.pk for q in startable}
    blocked = [q for q in queued if q.pk not in chosen]
    return Line(startable=startable, blocked=blocked, running=running)


# -- why a queued run waits -----------------------------------------------------------------

Reason = Literal["partner", "team_cap", "no_worker", "slots", "line", "starting"]


@dataclass(frozen=True)
class Holder:
    """A run the waiting run waits for, as its team may see it: a run of another team is
    neither named nor linked."""

    id: UUID | None
    name: str
    ends_in_s: float | None  # by its duration, when it has one


@dataclass(frozen=True)
class RunWait:
    reason: Reason
    message: str
    place: int  # 1: the next run to start
    ahead: int  # runs that start before it
    waits_for: list[Holder]
    workers: int  # consuming the runs queue within the stale window
    slots: int  # their pool processes
    running: int  # runs executing, every team


def _ends_in_s(run_obj: Run, now: dt.datetime) -> float | None:
    duration = (run_obj.spec or {}).get("duration_s")
    if run_obj.started_at is None or not duration:
        return None
    return max(0.0, float(duration) - (now - run_obj.started_at).total_seconds())


def _holders(runs: list[Run], *, team_id: int, now: dt.datetime) -> list[Holder]:
    """The runs as `team_id` may see them, the soonest to end first."""
    holders = [
        Holder(id=r.uuid, name=f"{r.scenario_name} on {r.endpoint_name}", ends_in_s=None)
        if r.team_id == team_id
        else Holder(id=None, name="a run of another team", ends_in_s=None)
        for r in runs
    ]
    holders = [
        Holder(id=h.id, name=h.name, ends_in_s=_ends_in_s(r, now))
        for h, r in zip(holders, runs, strict=True)
    ]
    return sorted(holders, key=lambda h: (h.ends_in_s is None, h.ends_in_s or 0.0))


def _ending(holders: list[Holder]) -> str:
    soonest = min((h.ends_in_s for h in holders if h.ends_in_s is not None), default=None)
    return "" if soonest is None else f"; the first is due to end in about {soonest:.0f} s"


def _named(holders: list[Holder]) -> str:
    own = [h.name for h in holders if h.id is not None]
    others = len(holders) - len(own)
    parts = [*own, *([f"{others} run(s) of other teams"] if others else [])]
    return ", ".join(parts)


def run_wait(run_obj: Run) -> RunWait | None:
    """Where a queued run stands and why it has not started; None when it is not queued."""
    if run_obj.status != Status.QUEUED:
        return None
    now = timezone.now()
    line = queue_line()
    place = line.place(run_obj.pk)
    if place is None:  # it started or ended since it was read
        return None
    window_s = settings.AIPERF_STALE_RUN_S
    queue = settings.AIPERF_RUNS_QUEUE
    try:
        seen = workers_seen(queue, within_s=window_s)
        ago = None if seen else last_seen_s(queue)
    except Exception:
        log.warning("reading which workers consume %s failed", queue, exc_info=True)
        seen, ago = [], None
    slots = sum(p.slots for p in seen)
    executing = list(Run.objects.filter(status=Status.RUNNING).order_by("started_at", "pk"))
    ahead = place - 1
    in_line = "it is next in line" if ahead == 0 else f"{ahead} run(s) are ahead of it in line"

    def wait(reason: Reason, message: str, holders: list[Holder] | None = None) -> RunWait:
        return RunWait(
            reason=reason,
            message=message,
            place=place,
            ahead=ahead,
            waits_for=holders or [],
            workers=len(seen),
            slots=slots,
            running=len(executing),
        )

    if not seen:
        last = f"the last one {ago:.0f} s ago" if ago is not None else "none in the last hour"
        return wait(
            "no_worker",
            f"no worker has taken runs from the queue {queue!r} in the last {window_s} s "
            f"({last}): start one (`celery -A aiperf_web worker -Q {queue}`, or `manage.py "
            "serve`, which starts its own and restarts it), or see /healthz",
        )
    partner = run_obj.after
    if partner is not None and partner.status in ACTIVE:
        return wait(
            "partner",
            "it is the second run of an A/B pair and starts once the first, "
            f"{partner.scenario_name} on {partner.endpoint_name} ({partner.status}), has ended",
            _holders([partner], team_id=run_obj.team_id, now=now),
        )
    if all(q.pk != run_obj.pk for q in line.startable):
        cap = settings.AIPERF_TEAM_MAX_RUNNING
        team_running = [r for r in executing if r.team_id == run_obj.team_id]
        holders = _holders(team_running, team_id=run_obj.team_id, now=now)
        before = sum(1 for q in line.startable if q.team_id == run_obj.team_id)
        return wait(
            "team_cap",
            f"its team may run {cap} runs at once (AIPERF_TEAM_MAX_RUNNING) and runs "
            f"{len(team_running)}"
            + (f", with {before} more of its queued runs starting first" if before else "")
            + f"; it starts when one of its runs ends: {_named(holders)}{_ending(holders)}",
            holders,
        )
    free = slots - len(executing)
    if place <= free:
        return wait("starting", "a worker slot is free: a worker is taking it now")
    if free > 0:
        return wait("line", f"{in_line}, and they take the {free} free worker slot(s) first")
    holders = _holders(executing, team_id=run_obj.team_id, now=now)
    return wait(
        "slots",
        f"all {slots} worker slots are taken, by {_named(holders)}{_ending(holders)}; {in_line}",
        holders,
    )
