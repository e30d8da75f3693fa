"""Sweep pages: the team's sweeps, the launch form, cancel and re-run. The sweep's own page
(live curves over Channels, its report, twin, history, compare) is sweeps/pages.py."""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from aiperf_web.core.errors import Invalid
from aiperf_web.core.forms import add_service_errors
from aiperf_web.core.views import page
from aiperf_web.endpoints.selectors import endpoint_list
from aiperf_web.scenarios.selectors import scenario_list
from aiperf_web.sweeps import selectors, services
from aiperf_web.sweeps.forms import SweepLaunchForm
from aiperf_web.teams.models import Role
from aiperf_web.teams.selectors import teams_with_role


@page
def sweep_list(request: HttpRequest) -> HttpResponse:
    paginator = Paginator(selectors.sweep_list(user=request.user), 25)
    page_obj = paginator.get_page(request.GET.get("page"))
    return render(request, "sweeps/list.html", {"page_obj": page_obj})


@page
def sweep_new(request: HttpRequest) -> HttpResponse:
    if not teams_with_role(user=request.user, role=Role.MEMBER):
        messages.error(request, "Viewers cannot launch sweeps.")
        return redirect("sweeps:list")
    scenarios = list(scenario_list(user=request.user))
    endpoints = list(endpoint_list(user=request.user))
    initial = {}
    for name, param in (("scenario", "scenario"), ("target", "endpoint")):
        if request.GET.get(param):
            initial[name] = request.GET[param]
    form = SweepLaunchForm(
        request.POST or None, scenarios=scenarios, endpoints=endpoints, initial=initial
    )
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            created = services.sweep_launch(
                actor=request.user,
                scenario_id=d["scenario"],
                endpoint_id=d["target"],
                overrides=d["overrides"],
                sweep=form.sweep_body(),
            )
        except Invalid as exc:
            fields = {_form_field(k): v for k, v in exc.fields.items()}
            add_service_errors(form, fields, str(exc))
        else:
            messages.success(request, "Sweep launched.")
            return redirect("sweeps:detail", sweep_id=created.uuid)
    return render(request, "sweeps/new.html", {"form": form})


def _form_field(key: str) -> str:
    """The form field an Invalid key names (`sweep.concurrency.0` -> loads)."""
    head = key.removeprefix("sweep.").split(".")[0]
    return {
        "concurrency": "loads",
        "rate_per_s": "loads",
        "slo": "slo_ttft_ms",
        "auto_points": "auto_points",
        "repeats": "repeats",
        "mode": "mode",
        "arms": "arms",
        "endpoint": "target",
        "scenario": "scenario",
    }.get(head, key)


@require_POST
@page
def sweep_cancel(request: HttpRequest, sweep_id: str) -> HttpResponse:
    sweep_obj = selectors.sweep_get(user=request.user, sweep_id=sweep_id)
    services.sweep_cancel(actor=request.user, sweep_obj=sweep_obj)
    messages.success(request, "Sweep cancelled.")
    return redirect("sweeps:detail", sweep_id=sweep_obj.uuid)


@require_POST
@page
def sweep_rerun(request: HttpRequest, sweep_id: str) -> HttpResponse:
    sweep_obj = selectors.sweep_get(user=request.user, sweep_id=sweep_id)
    try:
        created = services.sweep_rerun(actor=request.user, sweep_obj=sweep_obj)
    except Invalid as exc:
        messages.error(request, str(exc))
        return redirect("sweeps:detail", sweep_id=sweep_obj.uuid)
    messages.success(request, "Re-run launched.")
    return redirect("sweeps:detail", sweep_id=created.uuid)
