"""The leak monitor: is a run leaking client-side session copies, where, how fast, since when.

Pure functions over the stored (or live) snapshot series; no I/O. One implementation serves the
live page, the report, the runs list flag, the API and the comparison. Live, the verdict is
worked out once per published snapshot by the run's writer (runs/sink.py keeps a LeakSeries and
publishes the verdict with the snapshot), not by each viewer's socket; a socket works one out
only for the history it sends on connect. In runs, below live and reports, because the writer
is here.

What counts as a leak. An *orphaned* copy is a cached session history that nothing will read
again (its session ended, or another worker served its latest turn): every one is a leak, so
any orphan flags the run. *Session copies* also grow while a run ramps up and sessions are
alive; their growth is shown beside, never flagged on its own, because live sessions
legitimately hold their history (spawn-pin runs grow copies and have no orphan).

Real memory beside the books. When client workers are processes (runner/fleet), each snapshot
carries `hosts`: each worker's process (`host:pid`) and its resident set as the operating
system reports it. The verdict gives each process's RSS now and its growth in MiB per minute
over the same window as the orphans, and the fleet's total (processes still answering), so a
reader sees whether memory follows the orphan count. RSS does not set the level: it measures
the whole process, not the sessions it holds. It grows while a run warms up (connection
pools, buffers, live sessions' histories), Python's allocator keeps freed arenas so it seldom
falls back, and a collection or a burst moves it by MiBs either way: growth alone cannot tell a
leak from a warm-up, and no fixed MiB/min threshold fits every workload. Orphans can: each is a
history nothing will read again. A process that shares several client workers
(client_workers_per_host) is counted once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

# Growth is the rate over a fixed recent window: the last WINDOW_S of run time (the whole run
# while it is shorter), from the earliest snapshot inside it to the latest. Fixed and short
# because a verdict is about now: over a window reaching back a minute (or to the start), a
# run whose orphans stopped growing kept saying "leak growing" for that long (issue 16). 30
# snapshots at the live 1 s interval: one new orphan every few seconds still reads as growth.
WINDOW_S = 30.0

# No rate per minute from less run time than this: 5 s of a ramp-up projected to a minute read
# "Session copies grow by 1059.38 per minute" (issue 27). Below it the message gives the
# change itself over the time seen ("+12 in the last 5 s").
MIN_RATE_WINDOW_S = 20.0

# "leak": orphans held, flat over the window (the badge says so: stable). "unmeasured": no
# client-worker figures yet (a queued run, or one whose first snapshot has not come): nothing
# is known, so nothing is green.
LeakLevel = Literal["unmeasured", "ok", "leak", "growing"]
BADGES: dict[str, str] = {
    "unmeasured": "nothing measured yet",
    "ok": "no leak",
    "leak": "leaked, stable",
    "growing": "leak growing",
}


MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class HostPoint:
    """One client-worker process in one sample: its resident set as the OS reports it."""

    host: str  # "hostname:pid"
    workers: tuple[int, ...]  # the client workers it serves
    rss_bytes: int
    lost: bool  # stopped answering: its RSS is its last report, the process is gone


@dataclass(frozen=True, slots=True)
class LeakPoint:
    """One sample of the per-worker books: orphaned copies, session copies, cached bytes; and
    the client-worker processes' RSS when the workers are processes (else empty)."""

    t_s: float
    orphans: Sequence[int]
    copies: Sequence[int]
    cached_bytes: Sequence[int]
    hosts: Sequence[HostPoint] = ()


class WorkerLeak(TypedDict):
    worker: int
    orphaned: int
    orphans_per_min: float
    copies: int
    copies_per_min: float
    cached_bytes: int
    bytes_per_min: float


class HostLeak(TypedDict):
    host: str
    workers: list[int]
    rss_bytes: int
    rss_mib_per_min: float
    lost: bool


class LeakVerdict(TypedDict):
    level: LeakLevel
    badge: str  # the level in words: "no leak", "leaked, stable", "leak growing"
    orphaned: int
    orphans_per_min: float
    copies: int
    copies_per_min: float
    since_t_s: float | None  # run time when the first orphan appeared
    window_s: float
    # The rates per minute rest on at least MIN_RATE_WINDOW_S of run time (else the page shows
    # none: they would project a few seconds onto a minute).
    rated: bool
    leaking_workers: list[int]  # workers holding orphans
    growing_workers: list[int]  # workers whose orphans grew within the window
    workers: list[WorkerLeak]
    # Client-worker processes (runs with client_worker_processes; else empty and None): each
    # one's RSS and its growth over the window, the total of those still answering.
    hosts: list[HostLeak]
    rss_bytes: int | None
    rss_mib_per_min: float | None
    figures: str  # one line: "orphaned copies 120, +40/min · process memory 412 MiB, +35 MiB/min"
    message: str


def leak_point(t_s: float, data: Mapping[str, Any]) -> LeakPoint | None:
    """The leak monitor's view of one snapshot (full or slim); None when it has no books."""
    workers = data.get("client_workers")
    if not isinstance(workers, Mapping):
        return None
    orphans = workers.get("orphaned_copies") or []
    copies = workers.get("session_copies") or []
    cached = workers.get("cached_bytes") or []
    return LeakPoint(
        t_s=float(t_s),
        orphans=orphans,
        copies=copies,
        cached_bytes=cached,
        hosts=_host_points(data.get("hosts")),
    )


def _host_points(rows: Any) -> tuple[HostPoint, ...]:
    """A snapshot's `hosts` rows (one per client worker) as one point per process; rows not
    yet reporting (no heartbeat so far) are left out."""
    if not isinstance(rows, Sequence):
        return ()
    by_host: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        if isinstance(row, Mapping) and row.get("host") and row.get("rss_bytes") is not None:
            by_host.setdefault(str(row["host"]), []).append(row)
    return tuple(
        HostPoint(
            host=host,
            workers=tuple(sorted(int(r["worker"]) for r in group)),
            rss_bytes=max(int(r["rss_bytes"]) for r in group),
            lost=all(r.get("lost_at_s") is not None for r in group),
        )
        for host, group in by_host.items()
    )


def _per_min(now: float, then: float, dt_s: float) -> float:
    return round((now - then) * 60.0 / dt_s, 2) if dt_s > 0 else 0.0


def _at(values: Sequence[int], i: int) -> int:
    return int(values[i]) if i < len(values) else 0


def _fmt_t(t_s: float) -> str:
    if t_s < 120:
        return f"{t_s:.0f} s"
    if t_s < 7200:
        return f"{t_s / 60:.1f} min"
    return f"{t_s / 3600:.1f} h"


def _mib(n_bytes: float) -> str:
    mib = n_bytes / MIB
    # No break between a figure and its unit (the badge line wraps on a phone).
    return f"{mib / 1024:.1f}\u00a0GiB" if mib >= 10240 else f"{mib:.0f}\u00a0MiB"


def _mib_rate(mib_per_min: float) -> str:
    if mib_per_min == 0:
        return "flat"
    digits = 0 if abs(mib_per_min) >= 10 else 1
    return f"{mib_per_min:+.{digits}f}\u00a0MiB/min"


def _host_leaks(window: Sequence[LeakPoint]) -> list[HostLeak]:
    """Each process of the window's last point: its RSS now, and its growth since the first
    point of the window it appears in (a process that answered later is measured from then)."""
    last = window[-1]
    first_seen: dict[str, tuple[float, int]] = {}
    for point in window:
        for host in point.hosts:
            first_seen.setdefault(host.host, (point.t_s, host.rss_bytes))
    leaks: list[HostLeak] = []
    for host in last.hosts:
        then_t, then_rss = first_seen[host.host]
        dt_s = last.t_s - then_t
        leaks.append(
            {
                "host": host.host,
                "workers": list(host.workers),
                "rss_bytes": host.rss_bytes,
                "rss_mib_per_min": _per_min(host.rss_bytes / MIB, then_rss / MIB, dt_s),
                "lost": host.lost,
            }
        )
    return sorted(leaks, key=lambda h: h["workers"])


def _workers_text(ids: Sequence[int], limit: int = 8) -> str:
    shown = ", ".join(str(i) for i in ids[:limit])
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return f"worker{'s' if len(ids) != 1 else ''} {shown}{more}"


def leak_assess(
    points: Iterable[LeakPoint], *, window_s: float = WINDOW_S, ended: bool = False
) -> LeakVerdict:
    """The verdict over a series in time order (the last point is 'now'; with `ended`, the
    run's end: nothing grows any more, the message is in the past tense)."""
    series = list(points)
    if not series:
        return {
            "level": "unmeasured",
            "badge": BADGES["unmeasured"],
            "orphaned": 0,
            "orphans_per_min": 0.0,
            "copies": 0,
            "copies_per_min": 0.0,
            "since_t_s": None,
            "window_s": window_s,
            "rated": False,
            "leaking_workers": [],
            "growing_workers": [],
            "workers": [],
            "hosts": [],
            "rss_bytes": None,
            "rss_mib_per_min": None,
            "figures": "",
            "message": "No client-worker figures yet.",
        }
    last = series[-1]
    # From the newest point at least window_s old (the first point while the run is younger):
    # growth = now - then over their distance. A thinned history may hold no point exactly
    # window_s back; the next older one keeps the rate honest where no point would zero it.
    first = 0
    for first in range(len(series) - 1, -1, -1):
        if last.t_s - series[first].t_s >= window_s:
            break
    start = series[first]
    dt_s = last.t_s - start.t_s
    k = max(len(last.orphans), len(last.copies), len(last.cached_bytes))
    workers: list[WorkerLeak] = []
    for i in range(k):
        workers.append(
            {
                "worker": i,
                "orphaned": _at(last.orphans, i),
                "orphans_per_min": _per_min(_at(last.orphans, i), _at(start.orphans, i), dt_s),
                "copies": _at(last.copies, i),
                "copies_per_min": _per_min(_at(last.copies, i), _at(start.copies, i), dt_s),
                "cached_bytes": _at(last.cached_bytes, i),
                "bytes_per_min": _per_min(
                    _at(last.cached_bytes, i), _at(start.cached_bytes, i), dt_s
                ),
            }
        )
    orphaned = sum(w["orphaned"] for w in workers)
    copies = sum(w["copies"] for w in workers)
    orphans_per_min = round(sum(w["orphans_per_min"] for w in workers), 2)
    copies_per_min = round(sum(w["copies_per_min"] for w in workers), 2)
    since = next((p.t_s for p in series if sum(p.orphans) > 0), None)
    leaking = [w["worker"] for w in workers if w["orphaned"] > 0]
    growing = [w["worker"] for w in workers if w["orphans_per_min"] > 0]
    level: LeakLevel = "ok"
    if orphaned > 0:
        # A run that ended grows no more: what it left is a leak, however it grew at the end.
        level = "growing" if growing and not ended else "leak"
    window_text = f"the last {_fmt_t(dt_s)}" if dt_s > 0 else "the samples so far"
    # A rate per minute only from a window long enough to mean one; before, the change itself.
    rated = dt_s >= MIN_RATE_WINDOW_S
    orphan_growth = sum(w["orphaned"] - _at(start.orphans, w["worker"]) for w in workers)
    copy_growth = copies - sum(_at(start.copies, i) for i in range(k))
    if rated:
        orphan_rate = f"+{orphans_per_min:g} per minute over {window_text}"
    else:
        orphan_rate = (
            f"+{orphan_growth} in {window_text}; a rate per minute after {MIN_RATE_WINDOW_S:g} s"
        )
    if level == "growing":
        message = (
            f"Leaking: orphaned session copies are growing on {_workers_text(growing)} "
            f"({orphan_rate}); "
            f"{orphaned} orphaned copies on {len(leaking)} of {k} workers, "
            f"the first at t = {_fmt_t(since or 0.0)}. These histories will never be read "
            "again: sessions are bouncing between client workers (the spawn-pin policy keeps "
            "each subagent on one worker)."
        )
    elif level == "leak" and ended:
        grew = f", still growing at its end ({orphan_rate})" if growing else ""
        message = (
            f"Leaked: the run left {orphaned} orphaned session copies on "
            f"{_workers_text(leaking)}, the first at t = {_fmt_t(since or 0.0)}{grew}. "
            "Sessions bounced between client workers and left stale histories behind."
        )
    elif level == "leak":
        message = (
            f"Leaked: {orphaned} orphaned session copies on {_workers_text(leaking)} since "
            f"t = {_fmt_t(since or 0.0)}; stable: not growing over {window_text}. "
            "Sessions bounced between client workers and left stale histories behind."
        )
    else:
        message = "No orphaned session copies: no session has bounced between client workers."
        if ended and copies_per_min > 0 and rated:
            message += (
                f" Session copies grew by {copies_per_min:g} per minute over the run's "
                f"{window_text.removeprefix('the ')} ({copies} held at its end): histories of "
                "live sessions, released at their final turn."
            )
        elif copies_per_min > 0 and rated:
            message += (
                f" Session copies grow by {copies_per_min:g} per minute ({copies} held): "
                "histories of live sessions, released at their final turn."
            )
        elif copy_growth > 0 and not ended:
            message += (
                f" Session copies: {copies} held (+{copy_growth} in {window_text}; a rate per "
                f"minute after {MIN_RATE_WINDOW_S:g} s): histories of live sessions, released "
                "at their final turn."
            )
    figures = f"orphaned copies {orphaned}"
    if orphaned or orphans_per_min:
        if ended or orphans_per_min == 0:
            figures += "" if ended else ", flat"
        else:
            figures += (
                f", {orphans_per_min:+g}/min" if rated else f", +{orphan_growth} in {_fmt_t(dt_s)}"
            )
    hosts = _host_leaks(series[first:])
    answering = [h for h in hosts if not h["lost"]]
    rss_bytes: int | None = None
    rss_mib_per_min: float | None = None
    if answering:
        rss_bytes = sum(h["rss_bytes"] for h in answering)
        rss_mib_per_min = round(sum(h["rss_mib_per_min"] for h in answering), 2)
        n = len(answering)
        figures += f" · process memory {_mib(rss_bytes)}, {_mib_rate(rss_mib_per_min)}"
        message += (
            f" Memory: the {n} client-worker {'process holds' if n == 1 else 'processes hold'} "
            f"{_mib(rss_bytes)} (resident, as the OS counts it), "
            f"{_mib_rate(rss_mib_per_min)} over {window_text}"
        )
        # A lost process's last report is memory nobody holds now: named, not counted.
        lost = sorted(w for h in hosts if h["lost"] for w in h["workers"])
        if lost:
            message += (
                f" (the lost process{'es' if len(hosts) - n > 1 else ''} of "
                f"{_workers_text(lost)} not counted)"
            )
        fastest = max(answering, key=lambda h: h["rss_mib_per_min"])
        if n > 1 and fastest["rss_mib_per_min"] > 0:
            message += (
                f"; fastest: the process of {_workers_text(fastest['workers'])} "
                f"({fastest['host']}), {_mib_rate(fastest['rss_mib_per_min'])}"
            )
        message += "."
        if level == "ok" and rss_mib_per_min > 0 and not ended:
            message += (
                " Memory growth alone is not called a leak: a process also grows while it "
                "warms up (connections, buffers, live sessions); watch whether it levels off."
            )
    return {
        "level": level,
        "badge": "leaked" if ended and level == "leak" else BADGES[level],
        "orphaned": orphaned,
        "orphans_per_min": orphans_per_min,
        "copies": copies,
        "copies_per_min": copies_per_min,
        "since_t_s": since,
        "window_s": window_s,
        "rated": rated,
        "leaking_workers": leaking,
        "growing_workers": growing,
        "workers": workers,
        "hosts": hosts,
        "rss_bytes": rss_bytes,
        "rss_mib_per_min": rss_mib_per_min,
        "figures": figures,
        "message": message,
    }


BRIEF_WORKERS = 16


def leak_brief(verdict: LeakVerdict) -> LeakVerdict:
    """The verdict as the live page needs it: only the workers that hold or grow orphans, the
    worst BRIEF_WORKERS of them (64 workers in full would double a snapshot message), and the
    BRIEF_WORKERS processes whose RSS grows fastest."""
    shown = sorted(
        (w for w in verdict["workers"] if w["orphaned"] > 0 or w["orphans_per_min"] > 0),
        key=lambda w: (-w["orphans_per_min"], -w["orphaned"]),
    )[:BRIEF_WORKERS]
    hosts = sorted(verdict["hosts"], key=lambda h: -h["rss_mib_per_min"])[:BRIEF_WORKERS]
    return {**verdict, "workers": shown, "hosts": hosts}


def leak_flag(*, orphaned: int | None, drain_verdict: str | None = None) -> bool:
    """The runs list's flag: a finished run by its drain verdict, a running one by its
    current orphan count."""
    if drain_verdict is not None:
        return drain_verdict == "leaked"
    return bool(orphaned)


# A live series holds at most this many points: past it, every other one of its older half goes
# (the page's history is thinned to live.selectors.MAX_HISTORY_POINTS = 720 the same way).
SERIES_MAX_POINTS = 4 * 720


class LeakSeries:
    """A run's leak points as its writer stores its snapshots, and the verdict as of the latest
    (what the writer publishes with a snapshot, for every viewer at once)."""

    def __init__(self, max_points: int = SERIES_MAX_POINTS) -> None:
        self.points: list[LeakPoint] = []
        self.max_points = max_points

    def add(self, t_s: float, data: Mapping[str, Any]) -> None:
        point = leak_point(t_s, data)
        if point is None:
            return
        self.points.append(point)
        if len(self.points) > self.max_points:
            del self.points[: len(self.points) // 2 : 2]

    def brief(self, *, ended: bool = False) -> LeakVerdict:
        return leak_brief(leak_assess(self.points, ended=ended))
