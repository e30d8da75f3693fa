"""The verdict on a run: `pass` or `fail` with the reasons, what a CI job gates on; `pending`
while the run has not ended. The run page, the runs list, the API and the run-end webhook all
show this one verdict.

Two kinds of checks judge a finished run:
- its own (run_checks), which need nothing but the run: it succeeded; its drain check left no
  orphaned session copy; its error share and the share of requests its stop cut stay under
  their limits; where its spec sets SLOs, enough requests met them. Every run has these, so a
  leaking run fails without a baseline.
- with a baseline (the scenario's, or one named), the figures of KEY_METRICS: each has a
  direction (lower or higher is better) and a tolerance; a figure worse than the baseline's
  by more than the tolerance is a regression.
The own checks' limits are settings (AIPERF_VERDICT_*; settings.py says why each default),
read at each call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from django.conf import settings

from aiperf_web.runs.models import FINAL, Run, Status
from runner import placement_pcts

__all__ = [
    "KEY_METRICS",
    "Check",
    "Metric",
    "RunCheck",
    "Verdict",
    "metric_check",
    "run_checks",
    "run_verdict",
    "runs_verdicts",
    "scenario_baseline",
    "summary_value",
]

Better = Literal["lower", "higher", "none"]


@dataclass(frozen=True)
class Metric:
    key: str  # dotted path into the summary
    label: str
    unit: str
    better: Better
    # A regression: worse than the baseline by more than this fraction (relative) ...
    rel_tolerance: float = 0.10
    # ... and by more than this absolute amount (keeps 0 -> 1 orphan a regression, but
    # 1.00 -> 1.02 ms not).
    abs_tolerance: float = 0.0


KEY_METRICS: tuple[Metric, ...] = (
    Metric("ttft_ms.p50", "TTFT p50", "ms", "lower", abs_tolerance=1.0),
    Metric("ttft_ms.p99", "TTFT p99", "ms", "lower", abs_tolerance=1.0),
    Metric("itl_ms.p99", "ITL p99", "ms", "lower", abs_tolerance=0.5),
    Metric("latency_ms.p99", "Latency p99", "ms", "lower", abs_tolerance=5.0),
    Metric("requests_per_s", "Requests per second", "req/s", "higher", abs_tolerance=0.01),
    Metric("output_tokens_per_s", "Output tokens per second", "tok/s", "higher"),
    Metric("prefix_cache_hit_ratio", "Prefix-cache hit ratio", "", "higher", 0.0, 0.02),
    Metric("child_first_turn_hit_ratio", "Child first-turn hit ratio", "", "higher", 0.0, 0.02),
    Metric("sessions_multi_worker", "Sessions served by >1 client worker", "", "lower", 0.0, 0.5),
    Metric("worker_switches", "Client-worker switches", "", "lower", 0.0, 0.5),
    Metric("orphaned_session_copies", "Orphaned session copies", "", "lower", 0.0, 0.5),
    Metric("early_closes", "Early affinity closes", "", "lower", 0.0, 0.5),
    Metric("errors", "Errors", "", "lower", 0.0, 0.5),
    # In flight when the run stopped and cut by it: shown beside errors; its share is one of
    # the run's own checks, its count against a baseline never a check.
    Metric("cut_by_stop", "Requests cut by the stop", "", "none"),
    Metric("requests", "Requests", "", "none"),
)


def summary_value(summary: Mapping[str, Any] | None, key: str) -> float | None:
    head, _, name = key.partition(".")
    if head == "placement" and name.endswith("_pct"):
        placement = (summary or {}).get("placement")
        return placement_pcts(placement if isinstance(placement, Mapping) else None).get(name)
    value: Any = summary or {}
    for part in key.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


class Check(TypedDict):
    """One figure against the baseline's."""

    key: str
    label: str
    unit: str
    better: Better
    baseline: float | None
    value: float | None
    delta: float | None
    delta_pct: float | None
    status: Literal["ok", "regressed", "improved", "n/a"]


RunCheckKey = Literal["status", "drain", "error_share", "cut_by_stop_share", "slo_goodput"]
RunCheckStatus = Literal["pass", "fail", "n/a"]


class RunCheck(TypedDict):
    """One of the run's own checks: what was found, against which limit."""

    key: RunCheckKey
    label: str
    status: RunCheckStatus
    value: float | None  # the share in % (error, cut, goodput); the orphans left (drain)
    limit: float | None  # the setting it is held to (%); 0 orphans for the drain check
    message: str  # what was found, with the figures (a failing one, after its label, is a reason)


class Verdict(TypedDict):
    run: str
    baseline: str | None  # the baseline's id when figures were compared with one
    verdict: Literal["pass", "fail", "pending"]
    reasons: list[str]  # why it fails: failing own checks first, then regressed figures
    run_checks: list[RunCheck]
    regressions: list[str]  # labels of the figures worse than the baseline's
    checks: list[Check]  # figure by figure against the baseline (empty without one)
    drain: dict[str, Any] | None
    message: str


def metric_check(metric: Metric, value: float | None, baseline: float | None) -> Check:
    delta = delta_pct = None
    status: Literal["ok", "regressed", "improved", "n/a"] = "n/a"
    if value is not None and baseline is not None:
        delta = value - baseline
        delta_pct = None if baseline == 0 else round(100.0 * delta / abs(baseline), 2)
        if metric.better != "none":
            worse = delta if metric.better == "lower" else -delta
            limit = max(metric.abs_tolerance, metric.rel_tolerance * abs(baseline))
            if worse > limit:
                status = "regressed"
            elif -worse > limit:
                status = "improved"
            else:
                status = "ok"
    return {
        "key": metric.key,
        "label": metric.label,
        "unit": metric.unit,
        "better": metric.better,
        "baseline": baseline,
        "value": value,
        "delta": None if delta is None else round(delta, 4),
        "delta_pct": delta_pct,
        "status": status,
    }


# -- the run's own checks ------------------------------------------------------------------------

DRAIN_WORKERS_NAMED = 8  # a 64-worker leak names the first few and counts the rest


def _num(x: float) -> str:
    """A figure as a sentence shows it: 14,528 (never 1.453e+04), 330.2, 2.366."""
    if x == int(x) or abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:,.1f}" if abs(x) >= 100 else f"{x:.4g}"


def _share(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 2)


def _int(summary: Mapping[str, Any], key: str) -> int | None:
    value = summary.get(key)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _check(
    key: RunCheckKey, label: str, status: RunCheckStatus, message: str,
    value: float | None = None, limit: float | None = None,
) -> RunCheck:  # fmt: skip
    return {"key": key, "label": label, "status": status, "value": value, "limit": limit,
            "message": message}  # fmt: skip


def _status_check(status: str, reason: str) -> RunCheck:
    if status == Status.SUCCEEDED:
        return _check("status", "Run status", "pass", "the run succeeded")
    if status == Status.CANCELLED:
        return _check(
            "status", "Run status", "fail",
            "the run was cancelled: its figures cover part of the workload",
        )  # fmt: skip
    return _check(
        "status", "Run status", "fail",
        f"the run failed: {reason}" if reason else "the run failed",
    )  # fmt: skip


def _drain_check(drain: Mapping[str, Any] | None) -> RunCheck:
    if drain is None:
        return _check("drain", "Drain check", "n/a", "not in this run's summary (an older run)")
    orphaned = int(drain.get("orphaned_copies") or 0)
    if drain.get("verdict") != "leaked" and not orphaned:
        return _check("drain", "Drain check", "pass", "no orphaned session copy left", 0, 0)
    by_worker = [(i, int(n)) for i, n in enumerate(drain.get("orphaned_copies_by_worker") or [])]
    holding = [(i, n) for i, n in by_worker if n]
    where = ", ".join(f"worker {i}: {n}" for i, n in holding[:DRAIN_WORKERS_NAMED])
    if len(holding) > DRAIN_WORKERS_NAMED:
        where += f" and {len(holding) - DRAIN_WORKERS_NAMED} more workers"
    copies = f"{orphaned} orphaned session {'copy' if orphaned == 1 else 'copies'}"
    return _check(
        "drain", "Drain check", "fail",
        f"{copies} left{f' ({where})' if where else ''}: histories no request "
        "will read again, left by sessions that moved between client workers (the spawn-pin "
        "policy keeps each session on one)",
        orphaned, 0,
    )  # fmt: skip


def _error_check(summary: Mapping[str, Any]) -> RunCheck:
    requests, errors = _int(summary, "requests"), _int(summary, "errors")
    if requests is None or errors is None:
        return _check("error_share", "Errors", "n/a", "no request counts in the summary")
    limit = float(settings.AIPERF_VERDICT_MAX_ERROR_PCT)
    # Over the requests that ran their course, as the runner's error_rate: cut requests
    # neither failed nor succeeded.
    finished = requests - (_int(summary, "cut_by_stop") or 0)
    if finished <= 0:
        return _check(
            "error_share", "Errors", "fail",
            "no request ran its course: the run measured nothing", None, limit,
        )  # fmt: skip
    pct = _share(errors, finished)
    found = f"{errors} of {finished} finished requests ({pct:.1f} %)"
    if pct > limit:
        return _check(
            "error_share", "Errors", "fail", f"{found}, over the {limit:g} % limit", pct, limit
        )
    return _check("error_share", "Errors", "pass", f"{found}, limit {limit:g} %", pct, limit)


def _cut_check(summary: Mapping[str, Any]) -> RunCheck:
    requests, cut = _int(summary, "requests"), _int(summary, "cut_by_stop")
    label = "Requests cut by the stop"
    if not requests or cut is None:
        return _check(
            "cut_by_stop_share", label, "n/a", "not counted in this run's summary (an older run)"
        )
    limit = float(settings.AIPERF_VERDICT_MAX_CUT_PCT)
    pct = _share(cut, requests)
    found = f"{cut} of {requests} requests ({pct:.1f} %)"
    if pct > limit:
        return _check(
            "cut_by_stop_share", label, "fail",
            f"{found}, over the {limit:g} % limit: the figures leave out the requests that "
            "ran longest; give the run a longer duration or a lower concurrency",
            pct, limit,
        )  # fmt: skip
    return _check("cut_by_stop_share", label, "pass", f"{found}, limit {limit:g} %", pct, limit)


SLO_NAMES = {"ttft_ms": "TTFT", "itl_ms": "ITL", "latency_ms": "latency"}


def _goodput_check(summary: Mapping[str, Any]) -> RunCheck:
    goodput = summary.get("goodput")
    slos = goodput.get("slo_ms") if isinstance(goodput, Mapping) else None
    label = "SLO goodput"
    if not isinstance(goodput, Mapping) or not slos:
        return _check("slo_goodput", label, "n/a", "no SLO set in the run's spec")
    limit = float(settings.AIPERF_VERDICT_MIN_GOOD_PCT)
    named = ", ".join(f"{SLO_NAMES.get(k, k)} ≤ {_num(float(v))} ms" for k, v in slos.items())
    ratio = goodput.get("good_ratio")
    if not isinstance(ratio, int | float):
        return _check(
            "slo_goodput", label, "fail",
            f"no request ran its course to meet the SLOs ({named})", None, limit,
        )  # fmt: skip
    pct = round(100.0 * float(ratio), 2)
    found = f"{pct:.1f} % of finished requests met every SLO ({named})"
    if pct < limit:
        return _check(
            "slo_goodput", label, "fail",
            f"only {found}, under the {limit:g} % required", pct, limit,
        )  # fmt: skip
    return _check("slo_goodput", label, "pass", f"{found}, {limit:g} % required", pct, limit)


def run_checks(*, status: str, reason: str, summary: Mapping[str, Any] | None) -> list[RunCheck]:
    """The checks a finished run passes or fails on its own, without a baseline."""
    checks = [_status_check(status, reason)]
    if not summary:
        return checks
    drain = summary.get("drain")
    return [
        *checks,
        _drain_check(drain if isinstance(drain, Mapping) else None),
        _error_check(summary),
        _cut_check(summary),
        _goodput_check(summary),
    ]


# -- the verdict -----------------------------------------------------------------------------------


def _regression_reason(check: Check) -> str:
    value, base = check["value"], check["baseline"]
    assert value is not None and base is not None  # a regressed check compared two figures
    if check["key"].endswith("_ratio"):
        # Ratios read as percentages, their change in points (as the report shows them).
        figures = f"{100 * value:.1f} % against {100 * base:.1f} %"
        change = f" ({100 * (value - base):+.1f} points)"
    else:
        unit = f" {check['unit']}" if check["unit"] else ""
        figures = f"{_num(value)}{unit} against {_num(base)}{unit}"
        change = "" if check["delta_pct"] is None else f" ({round(check['delta_pct'], 1):+g} %)"
    return f"{check['label']} regressed: {figures} on the baseline{change}"


def _own_reason(check: RunCheck) -> str:
    # The status check's sentence names the run already ("the run failed: ...").
    return check["message"] if check["key"] == "status" else f"{check['label']}: {check['message']}"


def run_verdict(*, run_obj: Run, baseline: Run | None) -> Verdict:
    summary = run_obj.summary or {}
    drain = summary.get("drain") if isinstance(summary.get("drain"), dict) else None
    base_id = str(baseline.uuid) if baseline is not None else None
    if run_obj.status not in FINAL:
        return {
            "run": str(run_obj.uuid), "baseline": base_id, "verdict": "pending", "reasons": [],
            "run_checks": [], "regressions": [], "checks": [], "drain": drain,
            "message": "The run has not ended: its verdict comes when it does.",
        }  # fmt: skip
    own = run_checks(status=run_obj.status, reason=run_obj.reason, summary=summary)
    checks: list[Check] = []
    if baseline is not None and summary:
        checks = [
            metric_check(m, summary_value(summary, m.key), summary_value(baseline.summary, m.key))
            for m in KEY_METRICS
        ]
    regressed = [c for c in checks if c["status"] == "regressed"]
    reasons = [_own_reason(c) for c in own if c["status"] == "fail"]
    reasons += [_regression_reason(c) for c in regressed]
    if reasons:
        message = "Fail: " + "; ".join(reasons) + "."
    elif checks:
        message = "Pass: the run's own checks hold and no figure regressed against the baseline."
    else:
        message = (
            "Pass on the run's own checks. No baseline to compare its figures with: mark a "
            "finished run of this scenario as its baseline."
        )
    return {
        "run": str(run_obj.uuid),
        "baseline": base_id if checks else None,
        "verdict": "fail" if reasons else "pass",
        "reasons": reasons,
        "run_checks": own,
        "regressions": [c["label"] for c in regressed],
        "checks": checks,
        "drain": drain,
        "message": message,
    }


def scenario_baseline(*, run_obj: Run) -> Run | None:
    """The scenario's baseline for this run: its latest finished run marked baseline, other
    than the run itself."""
    if run_obj.scenario_id is None:
        return None
    return (
        Run.objects.filter(
            team_id=run_obj.team_id,
            scenario_id=run_obj.scenario_id,
            is_baseline=True,
            status__in=FINAL,
        )
        .exclude(pk=run_obj.pk)
        .order_by("-created_at")
        .first()
    )


def runs_verdicts(runs: Sequence[Run]) -> list[Verdict]:
    """The verdicts of a page of runs (the runs list), each against its scenario's baseline as
    scenario_baseline picks it, with one query for every baseline the page needs."""
    scenario_ids = {r.scenario_id for r in runs if r.scenario_id is not None and r.status in FINAL}
    baselines: dict[tuple[int, int], list[Run]] = {}
    if scenario_ids:
        for base in (
            Run.objects.filter(scenario_id__in=scenario_ids, is_baseline=True, status__in=FINAL)
            .only("pk", "uuid", "team_id", "scenario_id", "summary", "created_at")
            .order_by("-created_at")
        ):
            assert base.scenario_id is not None  # filtered on it
            baselines.setdefault((base.team_id, base.scenario_id), []).append(base)
    verdicts = []
    for r in runs:
        candidates = baselines.get((r.team_id, r.scenario_id or 0), [])
        baseline = next((b for b in candidates if b.pk != r.pk), None)
        verdicts.append(run_verdict(run_obj=r, baseline=baseline))
    return verdicts
