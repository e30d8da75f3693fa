"""The run summary both drivers print: the keys of PRODUCT.md §6, in one place."""

from __future__ import annotations

from typing import Any

from runner.metrics import RunMetrics
from runner.replay.engine import Engine

__all__ = ["run_summary"]


def run_summary(engine: Engine, metrics: RunMetrics, *, elapsed_s: float) -> dict[str, Any]:
    overall = metrics.overall
    percentiles = metrics.summary_percentiles()
    throughput = metrics.throughput(elapsed_s)
    summary: dict[str, Any] = {
        "requests": overall.requests,
        "warmup_requests": metrics.warmup_requests,
        **engine.routing_summary(),
        "trees_cut": engine.scheduler.cut_trees(),
        "prefix_cache_hit_ratio": metrics.prefix_cache_hit_ratio,
        "child_first_turn_hit_ratio": metrics.child_first_turn_hit_ratio,
        "errors": overall.errors,
        "errors_by_category": dict(overall.errors_by_category),
        "elapsed_s": elapsed_s,
        "requests_per_s": throughput["requests_per_s"],
        "input_tokens_per_s": throughput["input_tokens_per_s"],
        "output_tokens_per_s": throughput["output_tokens_per_s"],
    }
    for name in ("ttft_ms", "itl_ms", "latency_ms"):
        summary[name] = dict(percentiles[name])
    return summary
