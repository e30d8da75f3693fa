"""Run-end webhooks: when a run ends (succeeded, failed, cancelled), the worker POSTs one JSON
body to its scenario's webhook URL and to its team's (each once; both when both are set), so CI
and chat hear about regressions without polling.

Called after the final save (the body is what the database holds), delivered by
core/webhooks.py (allowlist, no redirects, short timeout, one retry, optional HMAC signature);
never fails the run: each outcome is a line in the run log.
"""

from __future__ import annotations

import json
from typing import Any, TypedDict

from django.conf import settings
from django.urls import reverse

from aiperf_web.core.webhooks import webhook_deliver
from aiperf_web.runs.executing import run_log
from aiperf_web.runs.models import Run
from aiperf_web.runs.verdict import run_verdict, scenario_baseline

__all__ = ["EVENT", "WebhookBody", "run_webhook_body", "run_webhooks_on_end", "run_webhooks_send"]

EVENT = "run.ended"

# The summary's figures a reader of the message wants first (dotted paths into the summary).
KEY_FIGURES = (
    "requests",
    "errors",
    "cut_by_stop",
    "requests_per_s",
    "output_tokens_per_s",
    "ttft_ms.p50",
    "ttft_ms.p99",
    "itl_ms.p99",
    "latency_ms.p99",
    "prefix_cache_hit_ratio",
    "worker_switches",
    "orphaned_session_copies",
    "early_closes",
    "elapsed_s",
)


class WebhookBody(TypedDict):
    event: str  # "run.ended"
    run_id: str
    name: str  # "<scenario> on <endpoint>"
    status: str  # succeeded | failed | cancelled
    reason: str
    team: str
    scenario: str
    scenario_id: str | None
    endpoint: str
    tags: list[str]
    started_at: str | None
    finished_at: str | None
    # The run's verdict (runs/verdict.py): pass / fail with the reasons, its own checks, and
    # its figures against the scenario's baseline when there is one.
    verdict: dict[str, Any]
    figures: dict[str, Any]
    links: dict[str, str]  # absolute: run page, report (offline HTML), summary.json


def _figure(summary: dict[str, Any], path: str) -> Any:
    value: Any = summary
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def run_webhook_body(*, run_obj: Run) -> WebhookBody:
    summary = run_obj.summary or {}
    base = settings.AIPERF_PUBLIC_URL.rstrip("/")
    judged = run_verdict(run_obj=run_obj, baseline=scenario_baseline(run_obj=run_obj))
    verdict = {
        "verdict": judged["verdict"],
        "reasons": judged["reasons"],
        "message": judged["message"],
        "run_checks": [
            {"key": c["key"], "label": c["label"], "status": c["status"], "message": c["message"]}
            for c in judged["run_checks"]
        ],
        "baseline_id": judged["baseline"],
        "regressions": judged["regressions"],
        "checks": [
            {
                "key": check["key"],
                "label": check["label"],
                "baseline": check["baseline"],
                "value": check["value"],
                "status": check["status"],
            }
            for check in judged["checks"]
            if check["status"] != "n/a"
        ],
        "drain": (judged["drain"] or {}).get("verdict"),
    }
    return {
        "event": EVENT,
        "run_id": str(run_obj.uuid),
        "name": f"{run_obj.scenario_name} on {run_obj.endpoint_name}",
        "status": run_obj.status,
        "reason": run_obj.reason,
        "team": run_obj.team.name,
        "scenario": run_obj.scenario_name,
        "scenario_id": str(run_obj.scenario.uuid) if run_obj.scenario else None,
        "endpoint": run_obj.endpoint_name,
        "tags": run_obj.tag_list,
        "started_at": run_obj.started_at.isoformat() if run_obj.started_at else None,
        "finished_at": run_obj.finished_at.isoformat() if run_obj.finished_at else None,
        "verdict": verdict,
        "figures": {path: _figure(summary, path) for path in KEY_FIGURES},
        "links": {
            "run": base + reverse("run:page", args=[run_obj.uuid]),
            "report": base + reverse("reports:export_html", args=[run_obj.uuid]),
            "summary": base + reverse("runs:summary_json", args=[run_obj.uuid]),
        },
    }


def run_webhook_targets(*, run_obj: Run) -> list[tuple[str, str, str]]:
    """(whose, url, secret token): the scenario's, then the team's, each URL once."""
    targets: list[tuple[str, str, str]] = []
    owners: list[tuple[str, Any]] = []
    if run_obj.scenario is not None:
        owners.append(("scenario", run_obj.scenario))
    owners.append(("team", run_obj.team))
    for whose, owner in owners:
        url = owner.webhook_url
        if url and url not in {t[1] for t in targets}:
            targets.append((whose, url, owner.webhook_secret))
    return targets


def run_webhooks_send(*, run_obj: Run) -> int:
    """Deliver the run-end body to every target; each outcome goes to the run log. Returns
    how many were delivered."""
    targets = run_webhook_targets(run_obj=run_obj)
    if not targets:
        return 0
    body = json.dumps(run_webhook_body(run_obj=run_obj), separators=(",", ":")).encode()
    delivered = 0
    for whose, url, secret_token in targets:
        outcome = webhook_deliver(url, body=body, event=EVENT, secret_token=secret_token)
        delivered += outcome.ok
        run_log(
            run_obj=run_obj,
            level="info" if outcome.ok else "warning",
            message=f"{whose} {outcome.message}",
        )
    return delivered


def run_webhooks_on_end(sender: object, *, run_obj: Run, **_: object) -> None:
    """The receiver of runs' `run_ended` signal."""
    run_webhooks_send(run_obj=run_obj)
