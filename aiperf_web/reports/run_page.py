"""The run page's context, one selector for the page (live and report) and its offline HTML
export: the stored series and report, the headline and latency table, the "All figures" rows
by one rule, the placement and server-metrics cards, and the data the page's script reads."""

from __future__ import annotations

import json
from typing import Any

from django.urls import reverse

from aiperf_web.reports.cards.placement import LABELS, NOT_REPORTED, placement_card
from aiperf_web.reports.cards.saturation import run_load_points, saturation_assess
from aiperf_web.reports.cards.server_metrics import run_server_metrics
from aiperf_web.reports.selectors import report as report_sel
from aiperf_web.runs import selectors as run_sel
from aiperf_web.runs.leaks import leak_brief
from aiperf_web.runs.models import FINAL, Run
from runner import LATENCY_KEYS, SUMMARY_KEYS

__all__ = ["run_page"]


def run_page(*, run_obj: Run) -> dict[str, Any]:
    report = report_sel.run_report(run_obj=run_obj)
    history = dict(report["history"])
    history["leak"] = leak_brief(report["leak"])
    drain = report["drain"]
    last_log = run_obj.log_lines.order_by("-id").values_list("id", flat=True).first()
    summary = run_obj.summary or {}
    latest_sample = report["history"]["latest"]
    latest = latest_sample["data"] if latest_sample else None
    worker_ids = summary.get("inference_worker_ids")
    page_data = {
        "run_id": str(run_obj.uuid),
        "status": run_obj.status,
        "interval_s": (run_obj.spec or {}).get("snapshot_interval_s") or 1.0,
        "history": history,
        "by_depth": report["by_depth"],
        "by_branch_mode": report["by_branch_mode"],
        "trees_url": reverse("reports:trees", args=[run_obj.uuid]) if run_obj.summary else None,
        "last_log_id": last_log or 0,
        # index -> the server's worker id (Dynamo's 64-bit instance ids), when renumbered.
        "inference_worker_ids": worker_ids if isinstance(worker_ids, dict) else {},
    }
    return {
        "run": run_obj,
        "report": report,
        "drain": drain,
        "drain_workers": [
            (i, n) for i, n in enumerate((drain or {}).get("orphaned_copies_by_worker") or []) if n
        ],
        # Every ended run has one (its own checks, without a baseline too); none while it goes.
        "verdict": report["verdict"] if run_obj.status in FINAL else None,
        "baseline": report["baseline"],
        "page_data": page_data,
        "latest": latest,
        "server_metrics": run_server_metrics(run_obj=run_obj),
        "placement": placement_card(summary=run_obj.summary, latest=latest, spec=run_obj.spec),
        "placement_not_reported": NOT_REPORTED,
        "summary_main": run_sel.summary_headline(run_obj.summary),
        "latency": _latency_table(run_obj.summary),
        "summary_more": _figure_rows(run_obj.summary),
        "spec_json": json.dumps(run_obj.spec, indent=2),
        "progress_pct": int(100 * float(latest.get("progress") or 0)) if latest else 0,
        # Who limits the run (the client's CPU and loop, or the simulated cluster's queue).
        "saturation": saturation_assess(
            run_load_points(run_obj=run_obj),
            simulated=run_obj.target_kind == "simulated",
            duration_s=(run_obj.spec or {}).get("duration_s"),
        ),
    }


def _figure_rows(summary: dict[str, Any] | None) -> list[tuple[str, str, Any]]:
    """The "All figures" table: key, a readable name where one is known (the placement
    figures), value; every figure the headline, the latency table and the server-metrics
    card do not show already (its series would be a wall of numbers here)."""
    return [
        (key, LABELS.get(key, ""), value)
        for key, value in run_sel.summary_flat(summary)
        if key not in SUMMARY_KEYS
        and key.split(".")[0] not in LATENCY_KEYS
        and not key.startswith("server_metrics.")
    ]


def _latency_table(summary: dict[str, Any] | None) -> list[dict[str, Any]]:
    rows = []
    for key in LATENCY_KEYS:
        value = (summary or {}).get(key)
        if isinstance(value, dict):
            rows.append(
                {
                    "name": key,
                    **{p: value.get(p) for p in ("p50", "p90", "p95", "p99", "mean", "max")},
                }
            )
    return rows
