"""Report pages: the run page's report context, the agent trees, the offline HTML export, the
comparison, the paired A/B launch and the scenario history. Thin: parse, call a selector or
service, render."""

from __future__ import annotations

import functools
from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import mark_safe

from aiperf_web.core.errors import Invalid, NotFound
from aiperf_web.core.forms import add_service_errors
from aiperf_web.core.ids import parse_uuid
from aiperf_web.core.views import page
from aiperf_web.endpoints.selectors import endpoint_list
from aiperf_web.reports import services
from aiperf_web.reports.bundle import export_script
from aiperf_web.reports.cards.placement import NOT_REPORTED
from aiperf_web.reports.forms import ABForm
from aiperf_web.reports.models import ABPair
from aiperf_web.reports.run_page import run_page
from aiperf_web.reports.selectors import compare as compare_sel
from aiperf_web.reports.selectors import history as history_sel
from aiperf_web.reports.selectors import trees as trees_sel
from aiperf_web.runs import selectors as run_sel
from aiperf_web.runs.forms import RunMetaForm
from aiperf_web.runs.models import FINAL
from aiperf_web.scenarios.selectors import scenario_get, scenario_list
from aiperf_web.teams.models import Role
from aiperf_web.teams.selectors import role_in_team, team_ids_for, teams_with_role

STATIC_CSS = Path(settings.BASE_DIR) / "static" / "css"


@page
def run_detail(request: HttpRequest, run_id: str) -> HttpResponse:
    """The run page: live while the run goes (charts over the stored series, extended over the
    WebSocket), its report once it ended."""
    run_obj = run_sel.run_get(user=request.user, run_id=run_id)
    role = role_in_team(user=request.user, team=run_obj.team)
    meta = RunMetaForm(
        initial={
            "tags": ", ".join(run_obj.tag_list),
            "notes": run_obj.notes,
            "is_baseline": run_obj.is_baseline,
        }
    )
    return render(
        request,
        "reports/run.html",
        {
            **run_page(run_obj=run_obj),
            "can_edit": role in (Role.ADMIN, Role.MEMBER),
            "log": run_sel.run_log_tail(run_obj=run_obj),
            "meta": meta,
        },
    )


@page
def run_trees(request: HttpRequest, run_id: str) -> JsonResponse:
    run_obj = run_sel.run_get(user=request.user, run_id=run_id)
    return JsonResponse(trees_sel.run_trees(run_obj=run_obj))


@functools.cache
def _asset(path: str) -> str:
    return Path(path).read_text(encoding="utf-8")


def _plotly_js() -> str:
    import plotly

    return _asset(str(Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"))


def _script_safe(text: str) -> str:
    # Inline <script> content must not close the element early.
    return text.replace("</script", "<\\/script").replace("<!--", "<\\!--")


@page
def run_export_html(request: HttpRequest, run_id: str) -> HttpResponse:
    """A self-contained report: plotly.js, our chart code, the run's series, summary and
    trees inline; opens from a file with no network."""
    run_obj = run_sel.run_get(user=request.user, run_id=run_id)
    context = run_page(run_obj=run_obj)
    page_data = context["page_data"]
    page_data["trees"] = trees_sel.run_trees(run_obj=run_obj) if run_obj.summary else None
    html = render_to_string(
        "reports/export.html",
        {
            **context,
            "plotly_js": mark_safe(_script_safe(_plotly_js())),
            "charts_js": mark_safe(_script_safe(export_script())),
            "css": mark_safe(
                _asset(str(STATIC_CSS / "app.css")) + _asset(str(STATIC_CSS / "live.css"))
            ),
        },
        request=request,
    )
    response = HttpResponse(html, content_type="text/html; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="run-{run_obj.uuid}-report.html"'
    return response


# -- compare -------------------------------------------------------------------------------------


def _run_ids(raw: str | list[str]) -> list[str]:
    values = raw if isinstance(raw, list) else [raw]
    return [part for value in values for part in value.split(",") if part.strip()]


@page
def compare(request: HttpRequest) -> HttpResponse:
    ids = _run_ids(request.GET.getlist("runs"))
    pair = None
    ab_id = parse_uuid(request.GET.get("ab"))
    if ab_id is not None:
        pair = ABPair.objects.filter(
            uuid=ab_id, team_id__in=team_ids_for(user=request.user)
        ).first()
    if len(set(ids)) < 2:
        # The runs list's Compare button lands here with nothing picked: this page is where
        # runs are picked, so fewer than two is a question to the user, not a bad request.
        return _compare_pick(request, ids=ids, error="")
    reference = request.GET.get("ref", "")
    try:
        compared = compare_sel.runs_compare(user=request.user, run_ids=ids, reference=reference)
    except (Invalid, NotFound) as exc:
        return _compare_pick(request, ids=ids, error=str(exc), status=400)
    runs = compared["runs"]
    labels = [
        f"{letter}: {head}"
        for letter, head in zip(compared["letters"], compared["heads"], strict=True)
    ]
    data = {
        "runs": [
            {
                "id": str(r.uuid),
                "label": label,
                "status": r.status,
                "url": reverse("run:page", args=[r.uuid]),
            }
            for r, label in zip(runs, labels, strict=True)
        ],
        "series": compared["series"],
        "active": any(r.status not in FINAL for r in runs),
    }
    return render(
        request,
        "reports/compare.html",
        {
            "runs": list(
                zip(
                    runs,
                    compared["leaks"],
                    labels,
                    # Column heads may break after "·" (a phone keeps both runs in view).
                    [mark_safe(escape(label).replace(" · ", " ·<wbr> ")) for label in labels],
                    compared["slos"],
                    strict=True,
                )
            ),
            "ids": ",".join(str(r.uuid) for r in runs),
            "reference": runs[0],
            "reference_label": labels[0],
            "same_for_all": compared["same_for_all"],
            "differs": compared["differs"],
            "sentences": compared["sentences"],
            "noise": compared["noise"],
            "repeats": any(len(g.members) > 1 for g in compared["groups"]),
            "metrics": compared["metrics"],
            # Runs whose server named no serving worker: their placement cells are blank.
            "placement_missing": ", ".join(
                label.split(":")[0]
                for r, label in zip(runs, labels, strict=True)
                if r.summary and "placement" in r.summary and r.summary["placement"] is None
            ),
            "not_reported": NOT_REPORTED,
            "pair": pair,
            "page_data": data,
        },
    )


COMPARE_PICK_RUNS = 50


def _compare_pick(
    request: HttpRequest, *, ids: list[str], error: str, status: int = 200
) -> HttpResponse:
    """The picker: the team's recent runs with a checkbox each, those already named ticked
    (and listed even when older than the recent ones)."""
    recent = list(
        run_sel.run_list(user=request.user, filters=run_sel.RunFilters())[:COMPARE_PICK_RUNS]
    )
    shown = {str(r.uuid) for r in recent}
    missing = []
    for run_id in ids:
        if run_id not in shown:
            try:
                recent.append(run_sel.run_get(user=request.user, run_id=run_id))
            except NotFound:
                missing.append(run_id)
                continue
            shown.add(run_id)
    if missing and not error:
        # A link naming a run that is gone (or another team's) is bad input, said as such.
        error = f"runs: no run {', '.join(m[:40] for m in missing[:3])} in your teams"
        status = 400
    picked = [i for i in ids if i in shown]
    hint = (
        "Tick two or more runs, then Compare. The highest ticked run in the list is the reference "
        "for the deltas (the comparison lets you choose another)."
        if not picked
        else "One run picked: tick at least one more to compare."
    )
    return render(
        request,
        "reports/compare_pick.html",
        {"error": error, "hint": hint, "recent": recent, "picked": set(picked)},
        status=status,
    )


# -- paired A/B ------------------------------------------------------------------------------------


@page
def ab_new(request: HttpRequest) -> HttpResponse:
    if not teams_with_role(user=request.user, role=Role.MEMBER):
        messages.error(request, "Viewers cannot launch runs.")
        return redirect("runs:list")
    scenarios = list(scenario_list(user=request.user))
    endpoints = list(endpoint_list(user=request.user))
    initial = {"scenario": request.GET.get("scenario", "")}
    form = ABForm(request.POST or None, scenarios=scenarios, endpoints=endpoints, initial=initial)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        value_a, value_b = services.AB_DEFAULTS[d["knob"]]
        try:
            pair = services.ab_launch(
                actor=request.user,
                scenario_id=d["scenario"],
                endpoint_id=d["target"],
                knob=d["knob"],
                value_a=value_a,
                value_b=value_b,
                overrides=d["overrides"],
            )
        except Invalid as exc:
            add_service_errors(form, exc.fields, str(exc))
        else:
            messages.success(
                request,
                f"A/B pair queued: {pair.knob} = {pair.value_a} first, then {pair.value_b}.",
            )
            return redirect("reports:ab", pair_id=pair.uuid)
    return render(request, "reports/ab_new.html", {"form": form})


@page
def ab_detail(request: HttpRequest, pair_id: str) -> HttpResponse:
    uid = parse_uuid(pair_id)
    pair = (
        ABPair.objects.filter(uuid=uid, team_id__in=team_ids_for(user=request.user)).first()
        if uid is not None
        else None
    )
    if pair is None:
        raise NotFound("A/B pair not found")
    compare = reverse("reports:compare")
    return redirect(f"{compare}?runs={pair.run_a.uuid},{pair.run_b.uuid}&ab={pair.uuid}")


# -- scenario history ----------------------------------------------------------------------------


@page
def history(request: HttpRequest, scenario_id: str) -> HttpResponse:
    scenario = scenario_get(user=request.user, scenario_id=scenario_id)
    found = history_sel.scenario_history(scenario=scenario)
    data = {
        "points": found["points"],
        "metrics": found["metrics"],
        "baseline": str(found["baseline"].uuid) if found["baseline"] else None,
    }
    return render(
        request,
        "reports/history.html",
        {"scenario": scenario, **found, "page_data": data},
    )
