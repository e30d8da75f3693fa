"""The run summary both drivers print: the keys of docs/product.md §6, in one place.

Tree accounting: at the end of a run `trees_started = trees_completed + trees_cut`; a tree
with nothing left after t* is `trees_skipped` and never started. `arrival_wait_ms` is null
unless the timing mode is `rate` (no other mode makes a tree wait for a slot).

It reads the composed Engine and fills output.py's shapes, so it sits beside output.py: the
replay package below it never imports the output layer.
"""

from __future__ import annotations

from typing import Any

from runner.metrics import RunMetrics
from runner.output import drain_report, summary_figures
from runner.replay.engine import Engine
from runner.validity import judge

__all__ = ["run_summary"]


def run_summary(
    engine: Engine,
    metrics: RunMetrics,
    *,
    elapsed_s: float,
    server_bound_keys: int | None = None,
) -> dict[str, Any]:
    """`server_bound_keys`: the affinity keys the target still holds, when it can tell (the
    simulated cluster); part of the drain check."""
    overall = metrics.overall
    percentiles = metrics.summary_percentiles()
    throughput = metrics.throughput(elapsed_s)
    summary: dict[str, Any] = {
        "requests": overall.requests,
        "warmup_requests": metrics.warmup_requests,
        **engine.routing_summary(),
        "achieved_tree_rate_per_s": _tree_rate(engine, elapsed_s),
        "arrival_wait_ms": _arrival_waits(engine),
        "prefix_cache_hit_ratio": metrics.prefix_cache_hit_ratio,
        "child_first_turn_hit_ratio": metrics.child_first_turn_hit_ratio,
        "errors": overall.errors,
        "errors_by_category": dict(overall.errors_by_category),
        "cut_by_stop": overall.cut_by_stop,
        "elapsed_s": elapsed_s,
        "requests_per_s": throughput["requests_per_s"],
        "input_tokens_per_s": throughput["input_tokens_per_s"],
        "output_tokens_per_s": throughput["output_tokens_per_s"],
    }
    for name in ("ttft_ms", "itl_ms", "latency_ms"):
        summary[name] = dict(percentiles[name])
    summary.update(summary_figures(metrics, elapsed_s=elapsed_s))
    if server_bound_keys is not None:
        summary["affinity_keys_bound_server"] = server_bound_keys
    summary["drain"] = drain_report(engine, server_bound_keys=server_bound_keys)
    # Whether InferenceX would count this run (runner/validity.py: the sweep's rules).
    summary["validity"] = judge(
        requests=overall.requests,
        errors=overall.errors,
        cut=overall.cut_by_stop,
        completed=overall.completed,
        ttft_measured=overall.ttft_ms.count,
    )
    return summary


def _tree_rate(engine: Engine, elapsed_s: float) -> float | None:
    """Trees started per second of the window in which trees could start (up to the stop,
    else to the last tree start, else the whole run)."""
    scheduler = engine.scheduler
    window_s = scheduler.issuing_window_s() or elapsed_s
    if window_s <= 0:
        return None
    return scheduler.trees_started / window_s


def _arrival_waits(engine: Engine) -> dict[str, float | int | None] | None:
    scheduler = engine.scheduler
    if scheduler.config.timing != "rate":
        return None
    waits = scheduler.arrival_waits
    return {
        "p50": waits.percentile(50.0),
        "p99": waits.percentile(99.0),
        "waited": scheduler.arrivals_waited,
        "never_started": scheduler.arrivals_unstarted,
    }
