"""Scenario and trace pages: lists, upload with instant validation and statistics, built-in
samples, the scenario editor (every run-spec knob)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from aiperf_web.core.errors import Invalid
from aiperf_web.core.forms import add_service_errors, spec_initial, spec_values
from aiperf_web.core.views import page
from aiperf_web.core.webhooks import webhook_posted
from aiperf_web.scenarios import selectors, services
from aiperf_web.scenarios.forms import SampleImportForm, ScenarioForm, TraceUploadForm
from aiperf_web.scenarios.models import Scenario
from aiperf_web.scenarios.samples import available_samples
from aiperf_web.teams.models import Role
from aiperf_web.teams.selectors import (
    require_role,
    role_in_team,
    team_get_for_user,
    teams_with_role,
)


def _team(request: HttpRequest, form_team: str | None, teams: list[Any]) -> Any:
    return team_get_for_user(user=request.user, team_id=form_team) if form_team else teams[0]


# -- traces ---------------------------------------------------------------------------------------


@page
def trace_list(request: HttpRequest) -> HttpResponse:
    teams = teams_with_role(user=request.user, role=Role.MEMBER)
    upload = TraceUploadForm(teams=teams, prefix="upload")
    sample = SampleImportForm(teams=teams, prefix="sample")
    if request.method == "POST" and teams:
        if "upload-file" in request.FILES or request.POST.get("action") == "upload":
            upload = TraceUploadForm(request.POST, request.FILES, teams=teams, prefix="upload")
            if upload.is_valid():
                f = upload.cleaned_data["file"]
                try:
                    trace = services.trace_upload(
                        actor=request.user,
                        team=_team(request, upload.cleaned_data.get("team"), teams),
                        filename=f.name,
                        chunks=f.chunks(),
                        name=upload.cleaned_data.get("name", ""),
                        format=upload.cleaned_data.get("format", ""),
                        format_fix="choose its format in the Format list",
                    )
                except Invalid as exc:
                    add_service_errors(upload, exc.fields, str(exc))
                else:
                    messages.success(request, f"Trace {trace.name} stored ({trace.format}).")
                    return redirect("scenarios:trace_detail", trace_id=trace.uuid)
        else:
            sample = SampleImportForm(request.POST, teams=teams, prefix="sample")
            if sample.is_valid():
                try:
                    trace = services.trace_import_sample(
                        actor=request.user,
                        team=_team(request, sample.cleaned_data.get("team"), teams),
                        key=sample.cleaned_data["sample"],
                    )
                except Invalid as exc:
                    add_service_errors(sample, exc.fields, str(exc))
                else:
                    messages.success(request, f"Sample {trace.name} imported.")
                    return redirect("scenarios:trace_detail", trace_id=trace.uuid)
    return render(
        request,
        "scenarios/traces.html",
        {
            "traces": selectors.trace_list(user=request.user),
            "upload": upload,
            "sample": sample,
            # Without the public traces the samples card says where they come from instead of
            # offering an empty list.
            "samples_offered": bool(available_samples()),
            "samples_dir": settings.AIPERF_SAMPLES_DIR,
            "can_create": bool(teams),
        },
    )


@page
def trace_detail(request: HttpRequest, trace_id: str) -> HttpResponse:
    trace = selectors.trace_get(user=request.user, trace_id=trace_id)
    try:
        agents: selectors.TraceAgents | None = selectors.trace_agents(trace=trace)
        agents_error = ""
    except Invalid as exc:
        # A trace stored by an older loader that this one refuses: the page still shows
        # what was recorded at upload.
        agents, agents_error = None, str(exc)
    return render(
        request,
        "scenarios/trace.html",
        {
            "trace": trace,
            "scenarios": trace.scenarios.all(),
            "stats": _stats_rows(trace.stats),
            "agents": agents,
            "agents_error": agents_error,
            "can_create": role_in_team(user=request.user, team=trace.team)
            in (Role.ADMIN, Role.MEMBER),
        },
    )


def _stats_rows(stats: dict[str, Any]) -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for key, value in stats.items():
        if isinstance(value, dict):
            rows.extend((f"{key}.{k}", v) for k, v in value.items())
        elif isinstance(value, list):
            rows.append((key, ", ".join(str(v) for v in value) or "—"))
        else:
            rows.append((key, value))
    return rows


@require_POST
@page
def trace_delete(request: HttpRequest, trace_id: str) -> HttpResponse:
    trace = selectors.trace_get(user=request.user, trace_id=trace_id)
    try:
        services.trace_delete(actor=request.user, trace=trace)
    except Invalid as exc:
        messages.error(request, str(exc))
        return redirect("scenarios:trace_detail", trace_id=trace.uuid)
    messages.success(request, f"Trace {trace.name} deleted.")
    return redirect("scenarios:traces")


# -- scenarios ----------------------------------------------------------------------------------


@page
def scenario_list(request: HttpRequest) -> HttpResponse:
    tag = request.GET.get("tag", "")[:40]
    search = request.GET.get("q", "")[:100]
    return render(
        request,
        "scenarios/list.html",
        {
            "scenarios": selectors.scenario_list(user=request.user, tag=tag, search=search),
            "tag": tag,
            "q": search,
            "can_create": bool(teams_with_role(user=request.user, role=Role.MEMBER)),
        },
    )


def _spec_from_form(form: ScenarioForm) -> tuple[dict[str, Any] | None, dict[str, str]]:
    fields = {**form.knob_fields, **form.target_fields}
    if form.cleaned_data.get("use_synthetic"):
        fields.update(form.synthetic_fields)
    values, errors = spec_values(form.cleaned_data, fields, keep_blank=True)
    spec: dict[str, Any] = dict(values[""])
    spec["target"] = {"kind": "simulated", **values["target"]}
    spec["workload"] = {
        "synthetic": values["synthetic"] if form.cleaned_data.get("use_synthetic") else None
    }
    return (None if errors else spec), errors


def _scenario_form(request: HttpRequest, *, scenario: Scenario | None) -> HttpResponse:
    teams = teams_with_role(user=request.user, role=Role.MEMBER)
    team = scenario.team if scenario else None
    traces = [
        t for t in selectors.trace_list(user=request.user) if team is None or t.team_id == team.pk
    ]
    initial: dict[str, Any] = {}
    probe = ScenarioForm(teams=teams, traces=traces, editing=scenario is not None)
    base_spec = scenario.spec if scenario else services.scenario_default_spec()
    initial = spec_initial(
        base_spec, {**probe.knob_fields, **probe.target_fields, **probe.synthetic_fields}
    )
    picked = next((t for t in traces if str(t.uuid) == request.GET.get("trace")), None)
    if scenario is None and picked is not None:
        # "New scenario from this trace" (the trace page): the trace ticked, its name offered.
        initial.update(
            name=picked.name[:100], traces=[str(picked.uuid)], team=str(picked.team.uuid)
        )
    if scenario:
        initial.update(
            name=scenario.name,
            description=scenario.description,
            tags=", ".join(scenario.tag_list),
            traces=[str(t.uuid) for t in scenario.traces.all()],
            use_synthetic=bool((scenario.spec.get("workload") or {}).get("synthetic")),
        )
    form = ScenarioForm(
        request.POST or None,
        teams=teams,
        traces=traces,
        editing=scenario is not None,
        initial=initial,
    )
    if request.method == "POST" and form.is_valid():
        spec, errors = _spec_from_form(form)
        for name, message in errors.items():
            form.add_error(name, message)
        if spec is not None:
            data = form.cleaned_data
            try:
                if scenario is None:
                    scenario = services.scenario_create(
                        actor=request.user,
                        team=_team(request, data.get("team"), teams) if teams else None,  # type: ignore[arg-type]
                        name=data["name"],
                        description=data["description"],
                        tags=data["tags"],
                        trace_ids=data["traces"],
                        spec=spec,
                    )
                else:
                    services.scenario_update(
                        actor=request.user,
                        scenario=scenario,
                        name=data["name"],
                        description=data["description"],
                        tags=data["tags"],
                        trace_ids=data["traces"],
                        spec=spec,
                    )
            except Invalid as exc:
                add_service_errors(form, exc.fields, str(exc))
            else:
                messages.success(request, f"Scenario {scenario.name} saved.")
                return redirect("scenarios:detail", scenario_id=scenario.uuid)
    return render(request, "scenarios/form.html", {"form": form, "scenario": scenario})


@page
def scenario_new(request: HttpRequest) -> HttpResponse:
    if not teams_with_role(user=request.user, role=Role.MEMBER):
        messages.error(request, "Viewers cannot create scenarios.")
        return redirect("scenarios:list")
    return _scenario_form(request, scenario=None)


@page
def scenario_detail(request: HttpRequest, scenario_id: str) -> HttpResponse:
    scenario = selectors.scenario_get(user=request.user, scenario_id=scenario_id)
    if request.method == "POST":
        require_role(user=request.user, team=scenario.team, role=Role.MEMBER)
        return _scenario_form(request, scenario=scenario)
    if request.GET.get("edit"):
        return _scenario_form(request, scenario=scenario)
    return render(
        request,
        "scenarios/detail.html",
        {
            "scenario": scenario,
            "traces": scenario.traces.all(),
            "spec_rows": _stats_rows(scenario.spec),
            "can_edit": role_in_team(user=request.user, team=scenario.team)
            in (Role.ADMIN, Role.MEMBER),
        },
    )


@require_POST
@page
def scenario_webhook(request: HttpRequest, scenario_id: str) -> HttpResponse:
    scenario = selectors.scenario_get(user=request.user, scenario_id=scenario_id)
    try:
        services.scenario_webhook_set(
            actor=request.user,
            scenario=scenario,
            **webhook_posted(request.POST),
        )
        messages.success(request, "Webhook saved.")
    except Invalid as exc:
        messages.error(request, str(exc))
    return redirect("scenarios:detail", scenario_id=scenario.uuid)


@require_POST
@page
def scenario_delete(request: HttpRequest, scenario_id: str) -> HttpResponse:
    scenario = selectors.scenario_get(user=request.user, scenario_id=scenario_id)
    services.scenario_delete(actor=request.user, scenario=scenario)
    messages.success(request, f"Scenario {scenario.name} deleted.")
    return redirect("scenarios:list")
