"""The sweep's own pages: its detail page (live), its offline HTML report, its simulated twin,
a scenario's sweep history and two sweeps compared. Thin: parse, call a selector or service,
render (the data: sweeps/page.py; the curves: sweeps/charts.py)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from aiperf_web.core.errors import Invalid, NotFound
from aiperf_web.core.views import page
from aiperf_web.reports.views import STATIC_CSS, _asset, _plotly_js, _script_safe
from aiperf_web.runs.services import SIMULATED
from aiperf_web.scenarios.selectors import scenario_get
from aiperf_web.sweeps import selectors, services
from aiperf_web.sweeps.models import Sweep
from aiperf_web.sweeps.page import cards_of, sweep_history, sweep_page, sweeps_compared
from aiperf_web.teams.models import Role
from aiperf_web.teams.selectors import role_in_team
from runner import csv_rows

PERCENTILES = ("p50", "p90", "p95", "p99")
MAX_COMPARED = 6
HISTORY_SWEEPS = 8


def _percentile(request: HttpRequest) -> str | None:
    raw = request.GET.get("p")
    return raw if raw in PERCENTILES else None


@page
def sweep_detail(request: HttpRequest, sweep_id: str) -> HttpResponse:
    """The sweep page: header, headlines, curves and points, live while the sweep runs."""
    sweep = selectors.sweep_get(user=request.user, sweep_id=sweep_id)
    data = sweep_page(sweep, percentile=_percentile(request))
    role = role_in_team(user=request.user, team=sweep.team)
    can_edit = role in (Role.ADMIN, Role.MEMBER)
    return render(
        request,
        "sweeps/detail.html",
        {
            "page": data,
            "cards": cards_of(data["charts"]),
            "can_edit": can_edit,
            "rerun_url": data["actions"]["rerun"] or _rerun_url(sweep),
            "page_data": {
                "id": data["id"],
                "active": data["active"],
                "percentile": data["percentile"],
                "runs_ended": data["runs_ended"],
                "charts": data["charts"],
            },
        },
    )


def _rerun_url(sweep: Sweep) -> str | None:
    try:
        return reverse("sweeps:rerun", args=[sweep.uuid])
    except NoReverseMatch:
        return None


@page
def sweep_export_html(request: HttpRequest, sweep_id: str) -> HttpResponse:
    """A self-contained report of the sweep: plotly.js, the figures and every table inline;
    opens from a file with no network."""
    sweep = selectors.sweep_get(user=request.user, sweep_id=sweep_id)
    data = sweep_page(sweep, percentile=_percentile(request))
    html = render_to_string(
        "sweeps/export.html",
        {
            "page": data,
            "cards": cards_of(data["charts"]),
            "charts_json": mark_safe(_script_safe(json.dumps(data["charts"]))),
            "plotly_js": mark_safe(_script_safe(_plotly_js())),
            "css": mark_safe(
                _asset(str(STATIC_CSS / "app.css"))
                + _asset(str(STATIC_CSS / "live.css"))
                + _asset(str(STATIC_CSS / "sweeps.css"))
            ),
        },
        request=request,
    )
    response = HttpResponse(html, content_type="text/html; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="sweep-{sweep.uuid}-report.html"'
    return response


@page
def sweep_export_data(request: HttpRequest, sweep_id: str, fmt: str) -> HttpResponse:
    """The sweep's figures for a spreadsheet or a script, from the page (the API's export
    answers a token): CSV, a row per arm and load (runner.sweep.csv_rows: counts, validity,
    the SLO verdict, each figure's mean, min and max over the valid repeats), or JSON, the
    whole report (every point too)."""
    if fmt not in ("csv", "json"):
        raise NotFound(f"no export {fmt!r}: export.csv or export.json")
    sweep = selectors.sweep_get(user=request.user, sweep_id=sweep_id)
    report = selectors.sweep_report(sweep)
    name = f"sweep-{sweep.uuid}"
    if fmt == "json":
        response = HttpResponse(report.model_dump_json(indent=1), content_type="application/json")
    else:
        rows = csv_rows(report)
        out = io.StringIO()
        if rows:
            writer = csv.DictWriter(out, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}.{fmt}"'
    return response


@require_POST
@page
def sweep_twin(request: HttpRequest, sweep_id: str) -> HttpResponse:
    """Launch the sweep's simulated twin: the same scenario, sweep and base overrides on the
    simulated cluster, in virtual time (its points in parallel); drawn dashed on this page."""
    sweep = selectors.sweep_get(user=request.user, sweep_id=sweep_id)
    if sweep.scenario is None:
        messages.error(request, "The sweep's scenario was deleted: no twin can be made.")
        return redirect("sweeps:detail", sweep_id=sweep.uuid)
    try:
        services.sweep_launch(
            actor=request.user,
            scenario_id=sweep.scenario.uuid,
            endpoint_id=SIMULATED,
            sweep=dict(sweep.request),
            overrides=dict(sweep.overrides),
        )
    except Invalid as exc:
        messages.error(request, f"The simulated twin could not be launched: {exc}")
        return redirect("sweeps:detail", sweep_id=sweep.uuid)
    messages.success(
        request, "Simulated twin launched: its curves appear dashed here as its points end."
    )
    return redirect("sweeps:detail", sweep_id=sweep.uuid)


def _ids(values: list[str]) -> list[str]:
    """`?ids=a,b` or `?ids=a&ids=b` (the history page's check boxes)."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


@page
def sweep_compare(request: HttpRequest) -> HttpResponse:
    """Two (up to six) sweeps curve against curve: /sweeps/compare?ids=a,b."""
    ids = _ids(request.GET.getlist("ids"))
    if len(ids) < 2:
        raise NotFound("compare needs two sweeps: /sweeps/compare?ids=<sweep>,<sweep>")
    sweeps = [selectors.sweep_get(user=request.user, sweep_id=i) for i in ids[:MAX_COMPARED]]
    p = _percentile(request) or selectors.sweep_spec(sweeps[0]).percentile
    data = sweeps_compared(sweeps, percentile=p)
    return render(
        request,
        "sweeps/compare.html",
        {
            **data,
            "title": f"Compare {len(sweeps)} sweeps",
            "subtitle": "",
            "page_data": {"charts": data["charts"]},
            "percentiles": PERCENTILES,
            "ids": ",".join(str(s.uuid) for s in sweeps),
        },
    )


@page
def sweep_history_view(request: HttpRequest, scenario_id: str) -> HttpResponse:
    """A scenario's sweeps: the newest one's frontier against earlier ones'."""
    scenario = scenario_get(user=request.user, scenario_id=scenario_id)
    sweeps = list(
        selectors.sweep_list(user=request.user)
        .filter(scenario=scenario)
        .exclude(points__result__isnull=True, status__in=("failed", "cancelled"))
        .distinct()[:HISTORY_SWEEPS]
    )
    p = _percentile(request) or "p90"
    data: dict[str, Any] = (
        sweep_history(sweeps, percentile=p) if sweeps else {"sweeps": [], "charts": []}
    )
    return render(
        request,
        "sweeps/compare.html",
        {
            **data,
            "percentile": p,
            "title": f"{scenario.name}",
            "subtitle": "sweep history: the newest sweep (#1) against earlier ones",
            "scenario": scenario,
            "page_data": {"charts": data["charts"]},
            "percentiles": PERCENTILES,
            "ids": "",
        },
    )
