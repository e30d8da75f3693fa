"""The line of queued runs: the order workers start them in, and why a queued run waits.

One rule, here only. A queued run may start when its A/B partner (the run it is `after`) has
ended, its team runs fewer than its cap (AIPERF_TEAM_MAX_RUNNING, and at most
AIPERF_TEAM_SLOT_SHARE of the worker slots seen, at least one), and its endpoint is free (the
endpoint lease: no other run is running on that endpoint row, unless the run sets
allow_overlap; simulated runs take no lease). Of those, the run of the team running the fewest
goes first, then the oldest (so one team's queue of long runs never holds another team's run
behind it). `queue_line()` applies it as if slots freed one at a time and no run ended
meanwhile: each start counts against its team and takes its endpoint for the starts after
it. The worker's claim takes its candidates from the front of that line
(runs.claiming.run_claim_next, which checks the cap and the lease again under locks), the
reconciliation counts its startable runs (runs_reconcile_queued), and `run_wait` tells a
queued run's viewers where it stands and what it waits for: its A/B partner, its team's cap,
the run holding its endpoint, a worker (none consuming the runs queue within
AIPERF_STALE_RUN_S, runs.presence), the runs holding every worker slot, or the runs ahead of
it. `lease_log_waiting` writes the endpoint wait into the waiting runs' logs.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from typing import Literal
from uuid import UUID

from django.conf import settings
from django.utils import timezone

from aiperf_web.runs.models import ACTIVE, Run, RunLog, Status
from aiperf_web.runs.presence import last_seen_s, workers_seen
from aiperf_web.runs.publisher import log_line, publish_log

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Queued:
    pk: int
    team_id: int
    created_at: dt.datetime
    partner_active: bool  # its A/B partner is queued or running
    endpoint_id: int | None = None  # the lease it needs; None: none (simulated)
    allow_overlap: bool = False


@dataclass(frozen=True)
class Line:
    """`startable`: the runs that can start without any run ending, in the order they would;
    `blocked`: the rest (their team at its cap, their endpoint leased, or their A/B partner
    not ended), oldest first. `running`: runs executing per team id. `leased`: a blocked run's
    pk -> the pk of the run holding its endpoint (running, or starting before it). `cap`: the
    running cap of every team now."""

    startable: list[Queued]
    blocked: list[Queued]
    running: dict[int, int] = field(default_factory=dict)
    leased: dict[int, int] = field(default_factory=dict)
    cap: int = 0

    def place(self, pk: int) -> int | None:
        """1-based place of the run in line (startable ones first), None when not queued."""
        for place, queued in enumerate((*self.startable, *self.blocked), start=1):
            if queued.pk == pk:
                return place
        return None


def slots_seen() -> int | None:
    """Worker slots consuming the runs queue within the stale window; None when unknown (no
    worker seen, or the cache unreadable)."""
    try:
        seen = workers_seen(settings.AIPERF_RUNS_QUEUE, within_s=settings.AIPERF_STALE_RUN_S)
    except Exception:
        log.warning("reading which workers consume the runs queue failed", exc_info=True)
        return None
    return sum(p.slots for p in seen) or None


def team_cap(slots: int | None) -> int:
    """Runs one team may execute at once: AIPERF_TEAM_MAX_RUNNING, and at most
    AIPERF_TEAM_SLOT_SHARE of the `slots` seen (at least one; the share alone when no worker
    is seen)."""
    cap = int(settings.AIPERF_TEAM_MAX_RUNNING)
    share = float(settings.AIPERF_TEAM_SLOT_SHARE)
    if slots and share < 1.0:
        cap = min(cap, max(1, int(share * slots + 1e-9)))
    return cap


def queue_line(*, slots: int | None = -1) -> Line:
    """The line now. `slots`: the worker slots to share out (-1: as seen by runs.presence)."""
    cap = team_cap(slots_seen() if slots == -1 else slots)
    rows = list(
        Run.objects.filter(status=Status.QUEUED)
        .order_by("created_at", "pk")
        .values_list("pk", "team_id", "created_at", "after_id", "endpoint_id", "allow_overlap")
    )
    partners = {after for _, _, _, after, _, _ in rows if after is not None}
    active_partners = set(
        Run.objects.filter(pk__in=partners, status__in=ACTIVE).values_list("pk", flat=True)
    )
    queued = [
        Queued(
            pk=pk,
            team_id=team,
            created_at=at,
            partner_active=after in active_partners,
            endpoint_id=endpoint,
            allow_overlap=overlap,
        )
        for pk, team, at, after, endpoint, overlap in rows
    ]
    running: dict[int, int] = {}
    # endpoint id -> the run holding it (the first to have started)
    holding: dict[int, int] = {}
    for pk, team, endpoint in (
        Run.objects.filter(status=Status.RUNNING)
        .order_by("started_at", "pk")
        .values_list("pk", "team_id", "endpoint_id")
    ):
        running[team] = running.get(team, 0) + 1
        if endpoint is not None:
            holding.setdefault(endpoint, pk)
    counts = dict(running)

    def free(q: Queued) -> bool:
        return q.allow_overlap or q.endpoint_id is None or q.endpoint_id not in holding

    waiting = [q for q in queued if not q.partner_active]
    startable: list[Queued] = []
    while True:
        eligible = [q for q in waiting if counts.get(q.team_id, 0) < cap and free(q)]
        if not eligible:
            break
        nxt = min(eligible, key=lambda q: (counts.get(q.team_id, 0), q.created_at, q.pk))
        startable.append(nxt)
        counts[nxt.team_id] = counts.get(nxt.team_id, 0) + 1
        if nxt.endpoint_id is not None:
            holding.setdefault(nxt.endpoint_id, nxt.pk)
        waiting.remove(nxt)
    chosen = {q.pk for q in startable}
    blocked = [q for q in queued if q.pk not in chosen]
    leased = {
        q.pk: holding[q.endpoint_id]
        for q in blocked
        if not q.partner_active and not free(q) and q.endpoint_id is not None
    }
    return Line(startable=startable, blocked=blocked, running=running, leased=leased, cap=cap)


# -- why a queued run waits -----------------------------------------------------------------

Reason = Literal["partner", "team_cap", "endpoint", "no_worker", "slots", "line", "starting"]


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
    if soonest is None:
        return ""
    who = "it is" if len(holders) == 1 else "the first is"
    return f"; {who} due to end in about {soonest:.0f} s"


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
    window_s = settings.AIPERF_STALE_RUN_S
    queue = settings.AIPERF_RUNS_QUEUE
    try:
        seen = workers_seen(queue, within_s=window_s)
        ago = None if seen else last_seen_s(queue)
    except Exception:
        log.warning("reading which workers consume %s failed", queue, exc_info=True)
        seen, ago = [], None
    slots = sum(p.slots for p in seen)
    line = queue_line(slots=slots or None)
    place = line.place(run_obj.pk)
    if place is None:  # it started or ended since it was read
        return None
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
    holder_pk = line.leased.get(run_obj.pk)
    if holder_pk is not None:
        message, holders = _lease_wait(run_obj, holder_pk, line=line, now=now)
        return wait("endpoint", message, holders)
    if all(q.pk != run_obj.pk for q in line.startable):
        team_running = [r for r in executing if r.team_id == run_obj.team_id]
        holders = _holders(team_running, team_id=run_obj.team_id, now=now)
        before = sum(1 for q in line.startable if q.team_id == run_obj.team_id)
        return wait(
            "team_cap",
            f"its team may run {_cap_text(line.cap, slots)} and runs {len(team_running)}"
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


def _cap_text(cap: int, slots: int) -> str:
    limit = settings.AIPERF_TEAM_MAX_RUNNING
    share = float(settings.AIPERF_TEAM_SLOT_SHARE)
    if cap < limit:
        return (
            f"{cap} run(s) at once (AIPERF_TEAM_SLOT_SHARE = {share:g} of the {slots} worker slots)"
        )
    return f"{cap} run(s) at once (AIPERF_TEAM_MAX_RUNNING)"


def _lease_wait(
    run_obj: Run, holder_pk: int, *, line: Line, now: dt.datetime
) -> tuple[str, list[Holder]]:
    """Why `run_obj` waits for its endpoint: the run holding it, running or ahead in line."""
    holder = Run.objects.filter(pk=holder_pk).first()
    endpoint = run_obj.endpoint_name
    if holder is None:  # it ended since the line was read
        return f"its endpoint {endpoint} was in use a moment ago", []
    holders = _holders([holder], team_id=run_obj.team_id, now=now)
    named = _named(holders)
    if holder.status == Status.RUNNING:
        how = f"{named} is running on it{_ending(holders)}"
    else:
        how = f"{named} is ahead of it in line for it"
    return (
        f"its endpoint {endpoint} is in use (endpoint lease): {how}; it starts once that run "
        "has ended and the server has drained (launch with allow_overlap to share the "
        "endpoint)",
        holders,
    )


_LEASE_PREFIX = "waits for its endpoint"


def lease_log_waiting(endpoint_id: int | None) -> int:
    """Write into the log of every queued run lease-blocked on `endpoint_id` which run it
    waits for, unless its last line says so already. Returns how many lines were written."""
    if endpoint_id is None:
        return 0
    line = queue_line()
    written = 0
    waiting = Run.objects.filter(
        pk__in=list(line.leased), endpoint_id=endpoint_id, status=Status.QUEUED
    )
    for run_obj in waiting:
        holder = Run.objects.filter(pk=line.leased[run_obj.pk]).first()
        if holder is None:
            continue
        state = "running on it" if holder.status == Status.RUNNING else "ahead of it in line"
        message = (
            f"{_LEASE_PREFIX} {run_obj.endpoint_name}: run {holder.uuid} "
            f"({holder.scenario_name} on {holder.endpoint_name}) is {state} (endpoint lease; "
            "launch with allow_overlap to share the endpoint)"
        )
        last = RunLog.objects.filter(run=run_obj).order_by("-pk").values_list("message", flat=True)
        if last.first() == message:
            continue
        entry = RunLog.objects.create(run=run_obj, level="info", message=message)
        publish_log(run_uuid=str(run_obj.uuid), lines=[log_line(entry)])
        written += 1
    return written
