"""What a sweep's page shows, read once for the page, its live socket and its offline report:
the header (scenario, endpoint, axis, arms, repeats, status, verdict, progress), the headline
per arm pair, the curves (sweeps/charts.py), the searches, and a row per point with its run.

`sweep_page(sweep, percentile=...)` returns plain JSON-able data; the templates under
templates/sweeps/ render it, and the socket sends the same dict after each nudge, with the
header, headlines and table rendered by the same templates (`sweep_fragments`).
"""

from __future__ import annotations

from typing import Any, Final

from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse

from aiperf_web.reports import wording
from aiperf_web.sweeps import selectors
from aiperf_web.sweeps.charts import arm_colour, sweep_compare_figures, sweep_figures
from aiperf_web.sweeps.models import Sweep, SweepPoint, SweepStatus
from runner import SWEEP_PERCENTILES as PERCENTILES_SHOWN
from runner import SweepReport, SweepSpec

__all__ = [
    "PERCENTILES_SHOWN",
    "find_twin",
    "planned_runs",
    "sweep_fragments",
    "sweep_history",
    "sweep_page",
    "sweeps_compared",
]

TWIN_LOOKUP: Final = 20  # simulated sweeps of the scenario looked at for a twin

# The point table's figures: (key in PointResult.figures, column head, kind). {p}: the page's
# percentile.
COLUMNS: Final[tuple[tuple[str, str, str], ...]] = (
    ("requests_per_s", "req/s", "number"),
    ("output_tokens_per_s", "out tok/s", "number"),
    ("tok_per_user", "tok/s/user {p}", "number"),
    ("ttft_{p}_ms", "TTFT {p} ms", "number"),
    ("itl_{p}_ms", "ITL {p} ms", "number"),
    ("good_ratio", "good", "ratio"),
    ("prefix_cache_hit_ratio", "cache hit", "ratio"),
    ("child_first_turn_hit_ratio", "child 1st hit", "ratio"),
    ("worker_switches", "switches", "count"),
    ("orphaned_session_copies", "orphans", "count"),
)


# The page's sections of curves, in order: (card, title, note).
CARDS: Final[tuple[tuple[str, str, str], ...]] = (
    ("throughput", "Throughput against interactivity",
     "each arm's points and its Pareto frontier (the points no other beats on both)"),
    ("latency", "Latency against load", "the chosen percentile, p50 dotted"),
    ("goodput", "Goodput against load", "requests meeting every SLO threshold"),
    ("cache", "Prefix cache against load", "hits of every request, and of children's first turns"),
    ("copies", "Client-worker migrations and session copies against load",
     "switches, orphaned copies and the memory they hold"),
    ("placement", "Placement against load", "where the server put each agent tree"),
)  # fmt: skip


def cards_of(charts: list[Any]) -> list[dict[str, Any]]:
    """The page's cards with the ids of their charts."""
    return [
        {"id": card, "title": title, "note": note,
         "charts": [c["id"] for c in charts if c["card"] == card]}
        for card, title, note in CARDS
        if any(c["card"] == card for c in charts)
    ]  # fmt: skip


def planned_runs(spec: SweepSpec) -> tuple[int, bool]:
    """How many runs the sweep makes, and whether that is exact: list and auto know; slo
    stops when its bracket is one step wide, at most every load of the axis."""
    per_arm = spec.repeats * len(spec.arms)
    if spec.mode == "list":
        return per_arm * len(spec.loads), True
    if spec.mode == "auto":
        return per_arm * min(len(spec.loads), 2 + spec.auto_points), False
    return per_arm * len(spec.loads), False


def _url(name: str, *args: object) -> str | None:
    """A sweep page's action, when the app routes it (the sweeps app's own views)."""
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return None


def _cell(value: float | None, kind: str) -> str:
    if value is None:
        return "—"
    if kind == "ratio":
        return wording.percent(value)
    if kind == "count":
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:,.3g}"


def _row(spec: SweepSpec, point: SweepPoint, percentile: str) -> dict[str, Any]:
    run = point.run
    figures: dict[str, float | None] = dict((point.result or {}).get("figures") or {})
    itl = figures.get(f"itl_{percentile}_ms")
    figures["tok_per_user"] = 1000.0 / itl if itl else None
    ended = point.result is not None
    if not ended:
        validity = "—"
    elif point.valid:
        validity = "valid"
    else:
        validity = "invalid"
    index = next((i for i, a in enumerate(spec.arms) if a.name == point.arm), 0)
    return {
        "seq": point.seq,
        "arm": point.arm,
        "colour": arm_colour(index),
        "load": point.load,
        "label": spec.load_text(point.load, point.phase),  # type: ignore[arg-type]
        "repeat": point.repeat + 1,
        "phase": point.phase,
        "run_id": str(run.uuid) if run is not None else None,
        "run_url": reverse("run:page", args=[run.uuid]) if run is not None else None,
        "run_status": run.status if run is not None else "not made",
        "ended": ended,
        "validity": validity,
        "invalid_reason": point.invalid_reason,
        "cells": [
            _cell(figures.get(key.format(p=percentile)), kind) if ended else ""
            for key, _, kind in COLUMNS
        ],
    }


def find_twin(sweep: Sweep) -> Sweep | None:
    """The sweep's simulated twin: the latest simulated sweep of the same scenario asking for
    the same sweep (axis, arms, repeats, mode, SLOs: the launch's request) and the same base
    overrides, launched after it ("Run the simulated twin" launches exactly that). A simulated
    sweep has no twin of its own."""
    if sweep.target_kind == "simulated" or sweep.scenario_id is None:
        return None
    candidates = Sweep.objects.filter(
        team_id=sweep.team_id,
        scenario_id=sweep.scenario_id,
        target_kind="simulated",
        created_at__gte=sweep.created_at,
    ).exclude(status=SweepStatus.CANCELLED)
    for found in candidates.order_by("-created_at")[:TWIN_LOOKUP]:
        if found.request == sweep.request and found.overrides == sweep.overrides:
            return found
    return None


def sweep_page(sweep: Sweep, *, percentile: str | None = None) -> dict[str, Any]:
    """Everything the sweep's page draws, as JSON."""
    spec = selectors.sweep_spec(sweep)
    p = percentile if percentile in PERCENTILES_SHOWN else spec.percentile
    points = selectors.sweep_points(sweep)
    report = selectors.sweep_report(sweep, points)
    twin = find_twin(sweep)
    twin_report = selectors.sweep_report(twin) if twin is not None else None
    charts = sweep_figures(report, percentile=p, twin=twin_report)
    planned, exact = planned_runs(spec)
    ended = sum(1 for point in points if point.result is not None)
    made = len(points)
    active = sweep.status in (SweepStatus.QUEUED, SweepStatus.RUNNING)
    if not active:
        progress = f"{ended} point{'s' if ended != 1 else ''} run"
    elif made == 0:
        progress = "waiting for its first point"
    else:
        running = min(made, ended + 1)
        progress = f"point {running} of {'' if exact else 'at most '}{max(planned, made)}"
    return {
        "id": str(sweep.uuid),
        "name": sweep.name,
        "scenario": sweep.scenario_name,
        "scenario_id": str(sweep.scenario.uuid) if sweep.scenario is not None else None,
        "endpoint": sweep.endpoint_name,
        "target_kind": sweep.target_kind,
        "status": sweep.status,
        "active": active,
        "reason": sweep.reason,
        "verdict": sweep.verdict,
        "verdict_message": sweep.verdict_message,
        "cancel_requested": sweep.cancel_requested_at is not None,
        "created_at": sweep.created_at.isoformat(),
        "mode": spec.mode,
        "axis": "concurrency" if spec.axis == "concurrency" else "arrival rate",
        "loads": [spec.load_text(load) for load in spec.loads],
        "repeats": spec.repeats,
        "gpus": spec.gpus,
        "slo": _slo_text(spec),
        "arms": [
            {
                "name": arm.name,
                "colour": arm_colour(i),
                "overrides": ", ".join(f"{k}={v}" for k, v in arm.overrides.items()) or "base",
            }
            for i, arm in enumerate(spec.arms)
        ],
        "percentile": p,
        "percentiles": list(PERCENTILES_SHOWN),
        "progress": progress,
        "runs_made": made,
        "runs_ended": ended,
        "planned": planned,
        "headlines": [
            {"arms": list(h.arms), "text": h.text, "within_noise": h.within_noise}
            for h in report.headlines
        ],
        "searches": [s.statement for s in report.searches.values()],
        "charts": charts,
        "columns": [head.format(p=p) for _, head, _ in COLUMNS],
        "rows": [_row(spec, point, p) for point in points],
        "twin": _twin_json(twin),
        "actions": {
            "cancel": _url("sweeps:cancel", sweep.uuid) if active else None,
            "rerun": _url("sweeps:rerun", sweep.uuid) if not active else None,
            "twin": _url("sweeps:twin", sweep.uuid)
            if twin is None and sweep.target_kind != "simulated"
            else None,
            "export_html": _url("sweeps:export_html", sweep.uuid),
            "export_csv": _url("sweeps:export_data", sweep.uuid, "csv"),
            "export_json": _url("sweeps:export_data", sweep.uuid, "json"),
            "history": _url("sweeps:history", sweep.scenario.uuid) if sweep.scenario else None,
        },
    }


def _twin_json(twin: Sweep | None) -> dict[str, Any] | None:
    if twin is None:
        return None
    return {
        "id": str(twin.uuid),
        "status": twin.status,
        "url": reverse("sweeps:detail", args=[twin.uuid]),
    }


def _slo_text(spec: SweepSpec) -> str | None:
    slo = spec.slo
    if slo is None:
        return None
    limits = [
        f"{name} ≤ {value:g} ms"
        for name, value in (("TTFT", slo.ttft_ms), ("ITL", slo.itl_ms), ("latency", slo.latency_ms))
        if value is not None
    ]
    return f"{' and '.join(limits)} for {slo.goodput_fraction * 100:g} % of requests"


def sweep_fragments(page: dict[str, Any]) -> dict[str, str]:
    """The parts of the page a live update replaces, rendered by the page's own templates."""
    return {
        "header": render_to_string("sweeps/_header.html", {"page": page}),
        "headlines": render_to_string("sweeps/_headlines.html", {"page": page}),
        "points": render_to_string("sweeps/_points.html", {"page": page}),
    }


# -- several sweeps ---------------------------------------------------------------------------


def sweeps_compared(sweeps: list[Sweep], *, percentile: str = "p90") -> dict[str, Any]:
    """Sweeps curve against curve: each one's report, its frontier and curves overlaid."""
    reports: list[tuple[str, SweepReport]] = []
    rows = []
    for i, sweep in enumerate(sweeps):
        report = selectors.sweep_report(sweep)
        # Short in the charts' legends (a phone's legend wraps); the list names the date.
        label = f"#{i + 1}"
        reports.append((label, report))
        rows.append(
            {
                "label": label,
                "when": f"{sweep.created_at:%Y-%m-%d %H:%M}",
                "colour": arm_colour(i),
                "id": str(sweep.uuid),
                "url": reverse("sweeps:detail", args=[sweep.uuid]),
                "name": sweep.name,
                "status": sweep.status,
                "verdict": sweep.verdict,
                "arms": ", ".join(arm.name for arm in report.sweep.arms),
                "loads": ", ".join(report.sweep.load_text(x) for x in report.sweep.loads),
                "runs": report.runs,
                "headlines": [h.text for h in report.headlines],
                "frontiers": {
                    arm: ", ".join(
                        f"{f.label} ({f.throughput:,.0f} tok/s, "
                        f"{f.tokens_per_s_per_user:,.1f} per user)"
                        for f in front
                    )
                    or "no valid point"
                    for arm, front in report.frontiers.items()
                },
            }
        )
    return {
        "sweeps": rows,
        "percentile": percentile,
        "charts": sweep_compare_figures(reports, percentile=percentile),
    }


def sweep_history(sweeps: list[Sweep], *, percentile: str = "p90") -> dict[str, Any]:
    """A scenario's sweeps, newest first: the newest one's frontier against the earlier
    ones' (the compare view of them all)."""
    return sweeps_compared(sweeps, percentile=percentile)
