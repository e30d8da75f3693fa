"""The run page's "Server metrics" card, read from what the engine stored: the summary's
`server_metrics` (a finished live run), else the run spec (a live run still going: which URL
is scraped). The charts themselves come from the snapshots' compact views
(static/js/charts/catalog.js)."""

from __future__ import annotations

from typing import Any, Literal, TypedDict

from aiperf_web.runs.models import Run
from runner import EndpointTarget

State = Literal["scraped", "unavailable", "off", "simulated", "live"]

# figure, label (its unit in it), unit; fractions are shown as percentages.
FIGURES: tuple[tuple[str, str, str], ...] = (
    ("kv_usage", "KV-cache use, % (mean of workers)", "%"),
    ("queue_depth", "waiting requests", "requests"),
    ("running", "running requests", "requests"),
    ("prefix_hit_ratio", "prefix-cache hits, % of prompt", "%"),
    ("requests_total", "requests served", "requests"),
)
_PERCENT = {"kv_usage", "prefix_hit_ratio"}
WORKER_ROWS = 64


class FigureRow(TypedDict):
    name: str
    label: str
    unit: str
    min: float | None
    mean: float | None
    max: float | None
    last: float | None


class WorkerRow(TypedDict):
    id: str
    kv_usage_mean: float | None
    kv_usage_last: float | None
    queue_depth_mean: float | None
    running_mean: float | None
    prefix_hit_ratio: float | None
    requests_total: float | None


class ServerMetricsCard(TypedDict):
    state: State
    kind: str | None
    url: str | None
    interval_s: float | None
    scrapes: int | None
    failures: int | None
    reason: str | None
    rows: list[FigureRow]
    workers: list[WorkerRow]
    workers_more: int  # workers left out of the table


def run_server_metrics(*, run_obj: Run) -> ServerMetricsCard:
    card: ServerMetricsCard = {
        "state": "live",
        "kind": None,
        "url": None,
        "interval_s": None,
        "scrapes": None,
        "failures": None,
        "reason": None,
        "rows": [],
        "workers": [],
        "workers_more": 0,
    }
    target = (run_obj.spec or {}).get("target") or {}
    if target.get("kind") != "endpoint":
        card["state"] = "simulated"
        return card
    try:
        endpoint = EndpointTarget.model_validate(target)
    except ValueError:
        endpoint = None
    if endpoint is not None:
        card["url"] = endpoint.metrics_scrape_url
        card["interval_s"] = endpoint.metrics_interval_s
        if card["url"] is None:
            card["state"] = "off"
    stored = (run_obj.summary or {}).get("server_metrics")
    if not isinstance(stored, dict):
        return card  # still going (or a run from before server metrics)
    card["url"] = stored.get("url") or card["url"]
    card["interval_s"] = stored.get("interval_s") or card["interval_s"]
    card["scrapes"] = stored.get("scrapes")
    card["failures"] = stored.get("failures")
    if not stored.get("available"):
        card["state"] = "off" if stored.get("url") is None else "unavailable"
        card["reason"] = stored.get("reason")
        return card
    card["state"] = "scraped"
    card["kind"] = stored.get("kind")
    figures = stored.get("figures") or {}
    for name, label, unit in FIGURES:
        stats = figures.get(name)
        if isinstance(stats, dict):
            scale = 100.0 if name in _PERCENT else 1.0
            card["rows"].append(
                {
                    "name": name,
                    "label": label,
                    "unit": unit,
                    "min": _scaled(stats.get("min"), scale),
                    "mean": _scaled(stats.get("mean"), scale),
                    "max": _scaled(stats.get("max"), scale),
                    "last": _scaled(stats.get("last"), scale),
                }
            )
    workers = stored.get("workers") or {}
    ids = workers.get("ids") or []
    for i, worker in enumerate(ids[:WORKER_ROWS]):
        card["workers"].append(
            {
                "id": str(worker),
                "kv_usage_mean": _scaled(_at(workers, "kv_usage_mean", i), 100.0),
                "kv_usage_last": _scaled(_at(workers, "kv_usage", i), 100.0),
                "queue_depth_mean": _at(workers, "queue_depth_mean", i),
                "running_mean": _at(workers, "running_mean", i),
                "prefix_hit_ratio": _scaled(_at(workers, "prefix_hit_ratio", i), 100.0),
                "requests_total": _at(workers, "requests_total", i),
            }
        )
    card["workers_more"] = max(0, len(ids) - WORKER_ROWS)
    return card


def _at(workers: dict[str, Any], key: str, index: int) -> float | None:
    values = workers.get(key)
    if not isinstance(values, list) or index >= len(values):
        return None
    value = values[index]
    return float(value) if isinstance(value, int | float) else None


def _scaled(value: Any, scale: float) -> float | None:
    return float(value) * scale if isinstance(value, int | float) else None
