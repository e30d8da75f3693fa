"""The run page's read model (and its offline export): everything it draws from the stored
series and the summary, never the records."""

from __future__ import annotations

from typing import Any, TypedDict

from aiperf_web.live.selectors import History, run_history, run_leak_points
from aiperf_web.runs.leaks import LeakVerdict, leak_assess
from aiperf_web.runs.models import FINAL, Run
from aiperf_web.runs.verdict import Verdict, run_verdict, scenario_baseline


class RunReport(TypedDict):
    history: History
    leak: LeakVerdict
    drain: dict[str, Any] | None
    by_depth: dict[str, Any]
    by_branch_mode: dict[str, Any]
    baseline: Run | None
    verdict: Verdict


def run_report(*, run_obj: Run) -> RunReport:
    """Everything the run page draws, from the stored series and the summary (never the
    records): O(thinned samples), whatever the run's length."""
    history = run_history(run_obj=run_obj)
    points = run_leak_points(run_obj=run_obj)
    summary = run_obj.summary or {}
    baseline = scenario_baseline(run_obj=run_obj) if run_obj.status in FINAL else None
    return {
        "history": history,
        "leak": leak_assess(points, ended=run_obj.status in FINAL),
        "drain": summary.get("drain") if isinstance(summary.get("drain"), dict) else None,
        "by_depth": summary.get("by_depth") or {},
        "by_branch_mode": summary.get("by_branch_mode") or {},
        "baseline": baseline,
        "verdict": run_verdict(run_obj=run_obj, baseline=baseline),
    }
