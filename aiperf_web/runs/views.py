"""Run pages: the list with filters, the launch form, the run detail (status, summary, log,
actions) and the exports for the browser session."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from aiperf_web.core.errors import Invalid
from aiperf_web.core.forms import add_service_errors, spec_values
from aiperf_web.core.streaming import stream_response
from aiperf_web.core.views import page
from aiperf_web.endpoints.selectors import endpoint_list
from aiperf_web.runs import selectors, services
from aiperf_web.runs.forms import LaunchForm, RunFilterForm, RunMetaForm
from aiperf_web.runs.verdict import runs_verdicts
from aiperf_web.scenarios.selectors import scenario_list
from aiperf_web.teams.models import Role
from aiperf_web.teams.selectors import teams_with_role


@page
def run_list(request: HttpRequest) -> HttpResponse:
    scenarios = list(scenario_list(user=request.user))
    endpoints = list(endpoint_list(user=request.user))
    form = RunFilterForm(request.GET or None, scenarios=scenarios, endpoints=endpoints)
    filters = selectors.RunFilters()
    if form.is_bound and form.is_valid():
        d = form.cleaned_data
        filters = selectors.RunFilters(
            status=d["status"],
            scenario=d["scenario"],
            endpoint=d["endpoint"],
            tag=d["tag"].strip(),
            search=d["q"].strip(),
            policy=d["policy"],
            scope=d["scope"],
            created_from=d["created_from"],
            created_to=d["created_to"],
        )
    runs = selectors.run_list(user=request.user, filters=filters)
    active = list(
        selectors.run_list(user=request.user, filters=selectors.RunFilters(status="running"))[:20]
    ) + list(
        selectors.run_list(user=request.user, filters=selectors.RunFilters(status="queued"))[:20]
    )
    paginator = Paginator(runs, 25)
    page_obj = paginator.get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    shown = list(page_obj)
    return render(
        request,
        "runs/list.html",
        {
            "form": form,
            "page_obj": page_obj,
            "rows": list(zip(shown, runs_verdicts(shown), strict=True)),
            "active": active,
            "query": query.urlencode(),
        },
    )


@page
def run_new(request: HttpRequest) -> HttpResponse:
    if not teams_with_role(user=request.user, role=Role.MEMBER):
        messages.error(request, "Viewers cannot launch runs.")
        return redirect("runs:list")
    scenarios = list(scenario_list(user=request.user))
    endpoints = list(endpoint_list(user=request.user))
    initial: dict[str, Any] = {}
    for name, param in (("scenario", "scenario"), ("target", "endpoint")):
        if request.GET.get(param):
            initial[name] = request.GET[param]
    form = LaunchForm(
        request.POST or None, scenarios=scenarios, endpoints=endpoints, initial=initial
    )
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        values, errors = spec_values(d, form.knob_fields, keep_blank=False)
        for name, message in errors.items():
            form.add_error(name, message)
        # Blank inputs were left out: they keep the scenario's values.
        overrides: dict[str, Any] = {**values[""], **d["more"]}
        if d.get("sim_workers") and d["target"] == "simulated":
            overrides["target"] = {**overrides.get("target", {}), "workers": d["sim_workers"]}
        if not errors:
            try:
                created = services.run_launch(
                    actor=request.user,
                    scenario_id=d["scenario"],
                    endpoint_id=d["target"],
                    overrides=overrides,
                    tags=d["tags"],
                    notes=d["notes"],
                    allow_overlap=bool(d.get("allow_overlap")),
                )
            except Invalid as exc:
                add_service_errors(form, exc.fields, str(exc))
            else:
                messages.success(request, "Run queued.")
                return redirect("run:page", run_id=created.uuid)
    return render(
        request, "runs/new.html", {"form": form, "affinity_data": form.affinity_by_target}
    )


@require_POST
@page
def run_cancel(request: HttpRequest, run_id: str) -> HttpResponse:
    run_obj = selectors.run_get(user=request.user, run_id=run_id)
    run_obj = services.run_cancel(actor=request.user, run_obj=run_obj)
    if request.headers.get("X-Requested-With") == "fetch":
        # The run page's script: it shows the state itself, and hears the rest on its socket.
        return JsonResponse({"status": run_obj.status, "cancel_requested": True})
    messages.success(request, "Cancel requested.")
    return redirect("run:page", run_id=run_obj.uuid)


@require_POST
@page
def run_rerun(request: HttpRequest, run_id: str) -> HttpResponse:
    run_obj = selectors.run_get(user=request.user, run_id=run_id)
    try:
        created = services.run_rerun(actor=request.user, run_obj=run_obj)
    except Invalid as exc:
        messages.error(request, str(exc))
        return redirect("run:page", run_id=run_obj.uuid)
    messages.success(request, "Re-run queued.")
    return redirect("run:page", run_id=created.uuid)


@require_POST
@page
def run_meta(request: HttpRequest, run_id: str) -> HttpResponse:
    run_obj = selectors.run_get(user=request.user, run_id=run_id)
    form = RunMetaForm(request.POST)
    if form.is_valid():
        try:
            services.run_update(
                actor=request.user,
                run_obj=run_obj,
                tags=form.cleaned_data["tags"],
                notes=form.cleaned_data["notes"],
                is_baseline=form.cleaned_data["is_baseline"],
            )
            messages.success(request, "Saved.")
        except Invalid as exc:
            messages.error(request, str(exc))
    else:
        # The page shows messages, not this form's errors: say what was refused, and why.
        messages.error(
            request,
            "Not saved: "
            + "; ".join(
                f"{name}: {' '.join(map(str, errs))}" for name, errs in form.errors.items()
            ),
        )
    return redirect("run:page", run_id=run_obj.uuid)


@page
def run_records(request: HttpRequest, run_id: str) -> StreamingHttpResponse:
    run_obj = selectors.run_get(user=request.user, run_id=run_id)
    return stream_response(
        request,
        selectors.run_records_jsonl(run_obj=run_obj),
        content_type="application/x-ndjson",
        filename=f"run-{run_obj.uuid}-records.jsonl",
    )


@page
def run_summary_json(request: HttpRequest, run_id: str) -> JsonResponse:
    """summary.json as a file (the same run id, status and summary the API's run carries)."""
    run_obj = selectors.run_get(user=request.user, run_id=run_id)
    response = JsonResponse(
        {"id": str(run_obj.uuid), "status": run_obj.status, "summary": run_obj.summary},
        json_dumps_params={"indent": 2},
    )
    response["Content-Disposition"] = f'attachment; filename="run-{run_obj.uuid}-summary.json"'
    return response


@page
def run_summary_csv(request: HttpRequest, run_id: str) -> HttpResponse:
    run_obj = selectors.run_get(user=request.user, run_id=run_id)
    response = HttpResponse(selectors.run_summary_csv(run_obj=run_obj), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="run-{run_obj.uuid}-summary.csv"'
    return response
