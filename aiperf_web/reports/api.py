"""The reports part of the JSON API (mounted on /api/v1/ by aiperf_web.api.site): compare, the
verdict (what a CI job gates on: the run's own checks, and its figures against a baseline), the
leak monitor, paired A/B launches. Same bearer tokens, same error bodies as the rest of the
API."""

from __future__ import annotations

from typing import Any, Literal

from django.http import HttpRequest
from ninja import Router, Schema, Status
from pydantic import ConfigDict, Field

from aiperf_web.core.errors import Invalid
from aiperf_web.live.leaks import leak_assess
from aiperf_web.live.selectors import run_leak_points
from aiperf_web.reports import selectors, services
from aiperf_web.runs import selectors as run_sel
from aiperf_web.runs import verdict
from aiperf_web.runs.api import CheckOut, VerdictOut
from aiperf_web.runs.models import Run

router = Router(tags=["reports"])


class ComparedRun(Schema):
    id: str
    status: str
    scenario: str
    target: str
    policy: str | None
    affinity: str | None
    scope: str | None
    seed: int | None
    leak: dict[str, Any]
    drain: dict[str, Any] | None


class CompareMetric(Schema):
    key: str
    label: str
    unit: str
    better: str
    cells: list[CheckOut]


class CompareOut(Schema):
    runs: list[ComparedRun]
    metrics: list[CompareMetric] = Field(description="deltas are against the first run")


class ABIn(Schema):
    model_config = ConfigDict(extra="forbid")

    scenario: str
    endpoint: str = Field(default="simulated", description='endpoint id, or "simulated"')
    knob: Literal["policy", "scope"]
    value_a: str | None = Field(default=None, description="default: legacy / conversation")
    value_b: str | None = Field(default=None, description="default: spawn-pin / lineage")
    overrides: dict[str, Any] = Field(default_factory=dict, description="the same for both runs")


class ABOut(Schema):
    id: str
    knob: str
    value_a: str
    value_b: str
    run_a: str
    run_b: str
    compare_url: str


@router.get("/runs/{run_id}/verdict", response=VerdictOut)
def run_verdict(request: HttpRequest, run_id: str, baseline: str = "") -> Any:
    """The run's verdict: its own checks (status, drain check, error share, share cut by the
    stop, SLO goodput), and its figures against a baseline, the scenario's baseline run unless
    `baseline` names one. A CI job launches, waits for a final status, and fails unless
    `verdict` is `pass`."""
    run_obj = run_sel.run_get(user=request.user, run_id=run_id)
    base: Run | None
    if baseline:
        base = run_sel.run_get(user=request.user, run_id=baseline)
    else:
        base = verdict.scenario_baseline(run_obj=run_obj)
    return verdict.run_verdict(run_obj=run_obj, baseline=base)


@router.get("/runs/{run_id}/leak", response=dict[str, Any])
def run_leak(request: HttpRequest, run_id: str) -> Any:
    """The leak monitor's verdict over the run's stored series (live while it runs)."""
    run_obj = run_sel.run_get(user=request.user, run_id=run_id)
    return leak_assess(run_leak_points(run_obj=run_obj))


@router.get("/compare", response=CompareOut)
def compare(request: HttpRequest, runs: str) -> Any:
    """Two or more runs (`runs=id1,id2,...`): key figures with deltas against the first."""
    compared = selectors.runs_compare(user=request.user, run_ids=runs.split(","))
    out_runs = []
    for run_obj, leak in zip(compared["runs"], compared["leaks"], strict=True):
        spec = run_obj.spec or {}
        summary = run_obj.summary or {}
        out_runs.append(
            {
                "id": str(run_obj.uuid),
                "status": run_obj.status,
                "scenario": run_obj.scenario_name,
                "target": run_obj.endpoint_name,
                "policy": spec.get("policy"),
                "affinity": spec.get("affinity"),
                "scope": spec.get("scope"),
                "seed": spec.get("seed"),
                "leak": leak,
                "drain": summary.get("drain"),
            }
        )
    return {"runs": out_runs, "metrics": compared["metrics"]}


@router.post("/ab", response={201: ABOut})
def ab_create(request: HttpRequest, payload: ABIn) -> Any:
    """A paired A/B launch: two runs of one scenario, target and seed that differ in `knob`,
    run one after the other."""
    default_a, default_b = services.AB_DEFAULTS[payload.knob]
    if not isinstance(payload.overrides, dict):
        raise Invalid.field("overrides", "an object of knob: value")
    pair = services.ab_launch(
        actor=request.user,
        scenario_id=payload.scenario,
        endpoint_id=payload.endpoint,
        knob=payload.knob,
        value_a=payload.value_a or default_a,
        value_b=payload.value_b or default_b,
        overrides=payload.overrides,
    )
    return Status(
        201,
        {
            "id": str(pair.uuid),
            "knob": pair.knob,
            "value_a": pair.value_a,
            "value_b": pair.value_b,
            "run_a": str(pair.run_a.uuid),
            "run_b": str(pair.run_b.uuid),
            "compare_url": f"/reports/ab/{pair.uuid}/",
        },
    )
