"""The scenario history's read model: its succeeded runs as trend lines, one per
configuration (the fields that differ between them), and the latest run's verdict against the
baseline."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aiperf_web.reports.differences import config_head, differing_fields, same_for_all
from aiperf_web.reports.selectors.compare import config_of
from aiperf_web.runs.models import Run, Status
from aiperf_web.runs.verdict import KEY_METRICS, run_verdict, summary_value

# The trend charts of the scenario history page.
TREND_KEYS = (
    "ttft_ms.p99",
    "requests_per_s",
    "prefix_cache_hit_ratio",
    "worker_switches",
    "orphaned_session_copies",
)

HISTORY_RUNS = 200


def history_groups(runs: Sequence[Run]) -> tuple[list[str], list[str], str]:
    """The trend line each run belongs to: its configuration, read from the fields that differ
    between the scenario's runs (policy, scope, concurrency, endpoint, affinity, ...). Legacy
    and spawn-pin runs, or runs at c=8 and c=64, are different experiments: one line through
    both would draw their difference as a trend. Returns each run's line, the fields that
    differ and the line of what they all share."""
    configs = [config_of(r) for r in runs]
    differs = differing_fields(configs)
    heads = [config_head(c, differs) if differs else "all runs" for c in configs]
    return heads, differs, same_for_all(configs, differs)


def scenario_history(*, scenario: Any) -> dict[str, Any]:
    runs = list(
        Run.objects.filter(scenario=scenario, status=Status.SUCCEEDED)
        .exclude(summary__isnull=True)
        .select_related("endpoint")
        .order_by("-created_at")
        .only(
            "uuid", "created_at", "summary", "is_baseline", "tags", "spec", "status",
            "scenario_name", "endpoint_name", "team_id", "scenario_id", "target_kind",
            "endpoint__server_kind",
        )[:HISTORY_RUNS]
    )  # fmt: skip
    runs.reverse()
    heads, differs, shared = history_groups(runs)
    for r, head in zip(runs, heads, strict=True):
        r.history_line = head  # type: ignore[attr-defined]  # the Runs table's column
    baseline = next((r for r in reversed(runs) if r.is_baseline), None)
    points = [
        {
            "id": str(r.uuid),
            "created_at": r.created_at.isoformat(),
            "group": head,
            "label": f"{r.created_at:%Y-%m-%d %H:%M} · {head}",
            "baseline": r.is_baseline,
            "values": {k: summary_value(r.summary, k) for k in TREND_KEYS},
        }
        for r, head in zip(runs, heads, strict=True)
    ]
    latest = runs[-1] if runs else None
    verdict = None
    if latest is not None:
        # When the latest run is the baseline itself there is nothing to judge it against.
        base = baseline if baseline is not None and baseline.pk != latest.pk else None
        verdict = run_verdict(run_obj=latest, baseline=base)
    trend_metrics = [
        {"key": m.key, "label": m.label, "unit": m.unit, "better": m.better}
        for m in KEY_METRICS
        if m.key in TREND_KEYS
    ]
    return {
        "runs": runs,
        "points": points,
        "baseline": baseline,
        "latest": latest,
        "verdict": verdict,
        "metrics": trend_metrics,
        "differs": differs,
        "same_for_all": shared,
    }
