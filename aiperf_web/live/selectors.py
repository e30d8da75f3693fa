"""Reads for the live channel and the pages that draw a run's time series: the stored
snapshots as a compact history, resumable by `seq`.

The history a page (or a reconnecting socket) receives is made of *slim* samples: a snapshot
cut down to the fields the time-series charts read, as the chart list declares them
(live/charts.py SLIM_FIELDS: a chart added there is filled after a reload too), with only the
latency points the previous sample did not carry; the server-metrics view rides only on the
sample that first holds a scrape.
The latest snapshot travels whole. A long run is thinned to at most `max_points` samples
(every n-th, the last always kept), so an hour at one snapshot a second opens in one message;
a short gap after a reconnect is always sent sample by sample.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import timedelta
from types import SimpleNamespace
from typing import Any, TypedDict

from django.conf import settings
from django.contrib import auth
from django.contrib.sessions.backends.base import SessionBase
from django.db.models import F, Q, QuerySet
from django.db.models.functions import Mod
from django.urls import reverse
from django.utils import timezone
from django.utils.module_loading import import_string

from aiperf_web.live.charts import SLIM_FIELDS, SlimTree
from aiperf_web.runs.leaks import LeakPoint, leak_flag, leak_point
from aiperf_web.runs.messages import LogLine, RunState, log_line, run_state
from aiperf_web.runs.models import ACTIVE, FINAL, Run, RunLog, RunSample
from aiperf_web.runs.verdict import runs_verdicts
from aiperf_web.teams.models import Membership
from aiperf_web.teams.selectors import AnyUser, team_ids_for, team_list_for_user
from runner import placement_pcts

MAX_HISTORY_POINTS = 720


class SampleMessage(TypedDict):
    seq: int
    t_s: float
    data: dict[str, Any]


class History(TypedDict):
    samples: list[SampleMessage]  # slim, in seq order
    latest: SampleMessage | None  # the last sample, whole
    last_seq: int
    stride: int  # 1 when nothing was thinned


def stored_snapshot(data: Mapping[str, Any]) -> dict[str, Any]:
    """A stored snapshot as the engine writes one now: one stored before the engine's placement
    figures carried their percentages gets them, by the engine's rule (placement_pcts), so the
    page's scripts never divide."""
    placement = data.get("placement")
    if isinstance(placement, Mapping) and "trees_split_pct" not in placement:
        return {**data, "placement": {**placement, **placement_pcts(placement)}}
    return dict(data)


def _pick(value: Any, tree: SlimTree | None) -> Any:
    if tree is None or not isinstance(value, Mapping):
        return value
    return {k: _pick(value[k], sub) for k, sub in tree.items() if k in value}


def sample_slim(
    data: Mapping[str, Any], *, after_t_s: float | None, after_scrape_t_s: float | None = None
) -> dict[str, Any]:
    """A snapshot cut down to what the time-series charts read."""
    slim: dict[str, Any] = _pick(stored_snapshot(data), SLIM_FIELDS)
    server = data.get("server_metrics")
    # A scrape every few seconds, a snapshot every second: its points only once.
    if (
        isinstance(server, Mapping)
        and server.get("t_s") is not None
        and server.get("t_s") == after_scrape_t_s
    ):
        slim.pop("server_metrics", None)
    if "recent" in slim or "recent" in SLIM_FIELDS:
        recent = data.get("recent") or []
        if after_t_s is not None:
            recent = [p for p in recent if p.get("t_s", 0) > after_t_s]
        slim["recent"] = recent
    return slim


def _last_recent_t(data: Mapping[str, Any]) -> float | None:
    recent = data.get("recent") or []
    return max((p.get("t_s", 0.0) for p in recent), default=None)


def thinned_samples(
    *, run_obj: Run, after_seq: int = -1, max_points: int = MAX_HISTORY_POINTS
) -> tuple[QuerySet[RunSample], int, int] | None:
    """The run's samples after `after_seq`, in order, every stride-th one and always the last,
    so that at most about `max_points` are read: (queryset, last seq, stride), or None when
    there is no sample yet."""
    base = RunSample.objects.filter(run=run_obj, seq__gt=after_seq)
    last_seq = base.order_by("-seq").values_list("seq", flat=True).first()
    if last_seq is None:
        return None
    stride = max(1, math.ceil((last_seq - after_seq) / max_points))  # seqs are dense: 0, 1, ...
    qs = base
    if stride > 1:
        qs = base.annotate(k=Mod(F("seq") - after_seq - 1, stride)).filter(Q(k=0) | Q(seq=last_seq))
    return qs.order_by("seq"), last_seq, stride


def run_history(
    *, run_obj: Run, after_seq: int = -1, max_points: int = MAX_HISTORY_POINTS
) -> History:
    thinned = thinned_samples(run_obj=run_obj, after_seq=after_seq, max_points=max_points)
    if thinned is None:
        return {"samples": [], "latest": None, "last_seq": after_seq, "stride": 1}
    qs, last_seq, stride = thinned
    rows = list(qs.values_list("seq", "t_s", "data"))
    samples: list[SampleMessage] = []
    previous_t: float | None = None
    previous_scrape: float | None = None
    for seq, t_s, data in rows:
        slim = sample_slim(data, after_t_s=previous_t, after_scrape_t_s=previous_scrape)
        samples.append({"seq": seq, "t_s": t_s, "data": slim})
        last_t = _last_recent_t(data)
        if last_t is not None:
            previous_t = last_t
        server = data.get("server_metrics")
        if isinstance(server, Mapping) and server.get("t_s") is not None:
            previous_scrape = server["t_s"]
    seq, t_s, data = rows[-1]
    return {
        "samples": samples,
        "latest": {"seq": seq, "t_s": t_s, "data": stored_snapshot(data)},
        "last_seq": last_seq,
        "stride": stride,
    }


def run_samples_between(*, run_obj: Run, after_seq: int, before_seq: int) -> list[SampleMessage]:
    """Whole samples with after_seq < seq < before_seq: a gap the live feed skipped."""
    rows = RunSample.objects.filter(run=run_obj, seq__gt=after_seq, seq__lt=before_seq).order_by(
        "seq"
    )
    return [{"seq": r.seq, "t_s": r.t_s, "data": stored_snapshot(r.data)} for r in rows[:1000]]


def run_leak_points(*, run_obj: Run, max_points: int = MAX_HISTORY_POINTS) -> list[LeakPoint]:
    """The leak monitor's series of a run, read as two JSON paths per sample: the workers'
    books and, for client workers that are processes, their hosts."""
    thinned = thinned_samples(run_obj=run_obj, max_points=max_points)
    if thinned is None:
        return []
    rows = thinned[0].values_list("t_s", "data__client_workers", "data__hosts")
    points = []
    for t_s, workers, hosts in rows:
        point = leak_point(t_s, {"client_workers": workers, "hosts": hosts})
        if point is not None:
            points.append(point)
    return points


def run_log_after(*, run_obj: Run, after_id: int, limit: int = 200) -> list[LogLine]:
    rows = RunLog.objects.filter(run=run_obj, id__gt=after_id).order_by("id")[:limit]
    return [log_line(r) for r in rows]


def run_live_state(*, run_obj: Run) -> RunState | None:
    """The run's row as the live header shows it; None once the run is deleted."""
    row = Run.objects.filter(pk=run_obj.pk).first()
    if row is None:
        return None
    return run_state(
        status=row.status,
        reason=row.reason,
        started_at=row.started_at,
        finished_at=row.finished_at,
        cancel_requested_at=row.cancel_requested_at,
    )


def team_uuids_of(*, user: AnyUser) -> list[str]:
    """The public ids of the user's teams: the runs-list socket's groups."""
    return [str(u) for u in team_list_for_user(user=user).values_list("uuid", flat=True)]


def viewer_still_allowed(*, session_key: str | None, user_pk: int, run_obj: Run | None) -> bool:
    """Whether a socket opened by `user_pk` under `session_key` may go on: the session still
    exists and still logs that user in (logout deletes it; a password change or a deactivated
    user fails Django's own check), and, for a run's socket, the user is still in its team."""
    if not session_key:
        return False
    store: type[SessionBase] = import_string(f"{settings.SESSION_ENGINE}.SessionStore")
    session = store(session_key=session_key)
    if not session.exists(session_key):
        return False
    user = auth.get_user(SimpleNamespace(session=session))  # type: ignore[arg-type]
    if not user.is_authenticated or user.pk != user_pk:
        return False
    if run_obj is None:
        return True
    return Membership.objects.filter(user_id=user_pk, team_id=run_obj.team_id).exists()


# -- the live runs list ------------------------------------------------------------------------

RECENTLY_ENDED_S = 60


def runs_live_rows(*, user: AnyUser) -> list[dict[str, Any]]:
    """The rows the runs list updates in place: active runs of the user's teams and runs that
    ended within the last minute, with progress and the leak flag."""
    since = timezone.now() - timedelta(seconds=RECENTLY_ENDED_S)
    qs = (
        Run.objects.filter(team_id__in=team_ids_for(user=user))
        .filter(status__in=ACTIVE)
        .union(
            Run.objects.filter(
                team_id__in=team_ids_for(user=user), status__in=FINAL, finished_at__gte=since
            )
        )
    )
    runs = list(qs)[:100]
    rows = []
    for r, verdict in zip(runs, runs_verdicts(runs), strict=True):
        latest = (
            RunSample.objects.filter(run_id=r.pk)
            .order_by("-seq")
            .values_list(
                "data__progress",
                "data__eta_s",
                "data__requests",
                "data__errors",
                "data__cut_by_stop",
                "data__routing__orphaned_session_copies",
            )
            .first()
        )
        progress, eta_s, requests, errors, cut_by_stop, orphaned = latest or (None,) * 6
        drain = (r.summary or {}).get("drain") if r.status in FINAL else None
        drain_verdict = drain.get("verdict") if isinstance(drain, dict) else None
        if r.status in FINAL and r.summary:
            requests = r.summary.get("requests", requests)
            errors = r.summary.get("errors", errors)
            cut_by_stop = r.summary.get("cut_by_stop", cut_by_stop)
            orphaned = r.summary.get("orphaned_session_copies", orphaned)
        rows.append(
            {
                "id": str(r.uuid),
                "status": r.status,
                "scenario": r.scenario_name,
                "target": r.endpoint_name,
                "progress": progress,
                "eta_s": eta_s,
                "requests": requests,
                "errors": errors,
                "cut_by_stop": cut_by_stop,  # not errors: in flight when the run stopped
                "orphaned": orphaned,
                "leak": leak_flag(orphaned=orphaned, drain_verdict=drain_verdict),
                # The ended run's verdict, for the list's badge (none while it goes).
                "verdict": None if verdict["verdict"] == "pending" else verdict["verdict"],
                "verdict_message": verdict["message"],
                "url": reverse("run:page", args=[r.uuid]),
            }
        )
    return rows
