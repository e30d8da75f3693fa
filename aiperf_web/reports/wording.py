"""How a summary figure reads on a page: a person's name for each engine key and its value in
the unit people use, the same on the run page, its HTML export, the comparison and the
verdict. Ratios (keys ending `_ratio`, 0..1) read as percentages, as the live page shows them:
0.936 is "93.6 %". The engine's keys stay in the JSON and CSV exports and in a tooltip."""

from __future__ import annotations

import re
from typing import Any

from aiperf_web.reports.cards.placement import LABELS as PLACEMENT_LABELS

# Names of the engine's summary keys (docs/product.md §6 and the extras a run records).
FIGURE_LABELS: dict[str, str] = {
    "requests": "Requests",
    "sessions": "Sessions",
    "trees": "Agent trees",
    "trees_completed": "Trees completed",
    "trees_started": "Trees started",
    "trees_cut": "Trees cut by the stop",
    "trees_skipped": "Trees skipped",
    "sessions_multi_worker": "Sessions on more than one client worker",
    "worker_switches": "Client-worker switches",
    "orphaned_session_copies": "Orphaned session copies",
    "peak_orphaned_session_copies": "Peak orphaned session copies",
    "peak_session_copies": "Peak session copies",
    "session_copies": "Session copies held at the end",
    "context_rebuilds": "Context rebuilds",
    "prefix_cache_hit_ratio": "Prefix-cache hit ratio",
    "child_first_turn_hit_ratio": "Child first-turn hit ratio",
    "affinity_binds": "Affinity binds",
    "affinity_closes": "Affinity closes",
    "affinity_keys_bound_at_end": "Affinity keys bound at the end (client)",
    "affinity_keys_bound_server": "Affinity keys bound at the end (server)",
    "early_closes": "Early affinity closes",
    "errors": "Errors",
    "cut_by_stop": "Requests cut by the stop",
    "warmup_requests": "Warm-up requests (unmeasured)",
    "requests_per_s": "Requests / s",
    "input_tokens_per_s": "Input tokens / s",
    "output_tokens_per_s": "Output tokens / s",
    "achieved_tree_rate_per_s": "Trees started / s",
    "elapsed_s": "Run time (s)",
    "stopped_reason": "Stopped because",
    "ended_by.by": "Ended by",
    "ended_by.detail": "Ended because",
    "ended_by.early": "Ended before its limits",
    "status": "Status",
    "ttft_ms": "Time to first token (ms)",
    "itl_ms": "Inter-token latency (ms)",
    "latency_ms": "End-to-end latency (ms)",
    "schedule_lag_ms": "Schedule lag (ms)",
    "arrival_wait_ms": "Arrival wait (ms)",
    "goodput.good_requests": "Goodput · requests within the SLOs",
    "goodput.good_ratio": "Goodput · share of requests within the SLOs",
    "goodput.goodput_per_s": "Goodput · good requests / s",
    "goodput.slo_ms": "Goodput · SLOs (ms)",
    "drain.verdict": "Drain check",
    "drain.message": "Drain check · what was left",
    "drain.orphaned_copies": "Drain · orphaned copies left",
    "drain.session_copies": "Drain · session copies held",
    "drain.copies_of_cut_sessions": "Drain · copies of sessions cut by the stop",
    "drain.affinity_keys_bound": "Drain · affinity keys left bound (client)",
    "drain.affinity_keys_bound_server": "Drain · affinity keys left bound (server)",
    "drain.early_closes": "Drain · early closes",
}
_STATS = {"p50", "p90", "p95", "p99", "min", "max", "mean", "std"}
_UNITS = (("_per_s", " / s"), ("_ms", " (ms)"), ("_s", " (s)"), ("_bytes", " (bytes)"))


def is_ratio(key: str) -> bool:
    return key.rsplit(".", 1)[-1].endswith("_ratio")


def _words(part: str) -> str:
    for suffix, unit in _UNITS:
        if part.endswith(suffix) and part != suffix.lstrip("_"):
            return part.removesuffix(suffix).replace("_", " ") + unit
    return part.replace("_", " ")


def figure_label(key: str) -> str:
    """'ttft_ms.p99' -> 'Time to first token (ms) · p99'; an unknown key in words."""
    if key in PLACEMENT_LABELS:
        return PLACEMENT_LABELS[key][:1].upper() + PLACEMENT_LABELS[key][1:]
    if key in FIGURE_LABELS:
        return FIGURE_LABELS[key]
    head, _, tail = key.rpartition(".")
    if head and tail in _STATS:
        return f"{figure_label(head)} · {tail}"
    if head.startswith(("by_depth", "by_branch_mode")):
        kind = "depth" if head.startswith("by_depth") else "branch"
        return f"By {kind} · {tail}"
    words = " · ".join(_words(p) for p in key.split("."))
    return words[:1].upper() + words[1:]


def percent(value: Any) -> str:
    """0.936 -> '93.6 %'."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "—" if value is None else str(value)
    return f"{100.0 * value:.1f} %"


def figure_text(key: str, value: Any) -> str:
    """A value as the page shows it: ratios as percentages, counts with thousands separators,
    other numbers to a useful precision, None as a dash."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if is_ratio(key):
        return percent(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != 0 and abs(value) < 10:
            return f"{value:.3g}" if abs(value) < 0.01 else f"{value:,.3f}".rstrip("0").rstrip(".")
        return f"{value:,.1f}".removesuffix(".0")
    text = str(value)
    return re.sub(r"\s+", " ", text)
