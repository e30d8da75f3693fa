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
from aiperf_web.live.selectors import run_leak_points
from aiperf_web.reports import services
from aiperf_web.reports.selectors import compare as compare_sel
from aiperf_web.runs import selectors as run_sel
from aiperf_web.runs import verdict
from aiperf_web.runs.api import CheckOut, OverlapOut, VerdictOut
from aiperf_web.runs.leaks import leak_assess
from aiperf_web.runs.models import Run

router = Router(tags=["reports"])


class ComparedRun(Schema):
    id: str
    letter: str = Field(description="A, B, ... in the order the runs were named")
    head: str = Field(description="the run's configuration in the fields that differ")
    config: dict[str, str] = Field(description="every configuration field, as a head reads it")
    status: str
    scenario: str
    target: str
    policy: str | None
    affinity: str | None
    scope: str | None
    seed: int | None
    leak: dict[str, Any]
    drain: dict[str, Any] | None
    overlaps: list[OverlapOut] = Field(
        description="runs it overlapped on its endpoint (allow_overlap), when each began"
    )


class CompareCell(CheckOut):
    verdict: str = Field(
        description="reference; repeat (same configuration as the reference); better or worse "
        "(repeats on both sides, ranges apart, beyond the tolerance); within noise (ranges of "
        "repeats overlap); same (within the tolerance); no repeats (one run each: no claim); "
        "n/a. `status` is the figure against the reference's tolerance alone"
    )


class CompareMetric(Schema):
    key: str
    label: str
    unit: str
    better: str
    cells: list[CompareCell]


class CompareOut(Schema):
    runs: list[ComparedRun] = Field(description="the reference first, then the others in order")
    reference: str = Field(description="the reference run's id")
    differs: list[str] = Field(description="the configuration fields that differ")
    same_for_all: str = Field(description="what every run shares, one line")
    sentences: list[str] = Field(description="one per configuration against the reference's")
    noise: str = Field(description="what the verdict words stand on")
    metrics: list[CompareMetric] = Field(description="deltas are against the reference run")


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
    return leak_assess(run_leak_points(run_obj=run_obj), ended=not run_obj.is_active)


@router.get("/compare", response=CompareOut)
def compare(request: HttpRequest, runs: str, reference: str = "") -> Any:
    """Two or more runs (`runs=id1,id2,...`): what differs between them, key figures with
    deltas against the reference (`reference`, default the first named) and a verdict word per
    figure that knows about repeats, and one sentence per configuration."""
    for run_id in list(dict.fromkeys(x.strip() for x in runs.split(",")))[
        : compare_sel.MAX_COMPARED + 1
    ]:
        if run_id:  # an unknown id is 404 before any other rule (OpenAPI: api/contract.py)
            run_sel.run_get(user=request.user, run_id=run_id)
    compared = compare_sel.runs_compare(
        user=request.user, run_ids=runs.split(","), reference=reference
    )
    out_runs = []
    for run_obj, leak, letter, head, config in zip(
        compared["runs"], compared["leaks"], compared["letters"], compared["heads"],
        compared["configs"], strict=True,
    ):  # fmt: skip
        spec = run_obj.spec or {}
        summary = run_obj.summary or {}
        out_runs.append(
            {
                "id": str(run_obj.uuid),
                "letter": letter,
                "head": head,
                "config": dict(config.values),
                "status": run_obj.status,
                "scenario": run_obj.scenario_name,
                "target": run_obj.endpoint_name,
                "policy": spec.get("policy"),
                "affinity": spec.get("affinity"),
                "scope": spec.get("scope"),
                "seed": spec.get("seed"),
                "leak": leak,
                "drain": summary.get("drain"),
                "overlaps": run_obj.overlaps or [],
            }
        )
    return {
        "runs": out_runs,
        "reference": str(compared["runs"][0].uuid),
        "differs": compared["differs"],
        "same_for_all": compared["same_for_all"],
        "sentences": compared["sentences"],
        "noise": compared["noise"],
        "metrics": compared["metrics"],
    }


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
