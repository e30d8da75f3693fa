"""Simulator benchmark: one simulated hour of the default synthetic agentic workload.

Reports requests issued, wall seconds and microseconds per request, with the cluster sized so
it is not the bottleneck (lineage affinity, enough inference workers): the figure measures the
engine, not a saturated queue.
"""

from __future__ import annotations

import gc
import resource
import time
from typing import Any

from runner.affinity.emitters import AffinityConfig, AffinityKind
from runner.cluster import ClusterConfig
from runner.replay.engine import EngineConfig
from runner.replay.scheduler import ReplayConfig
from runner.sim.simulator import SimConfig, simulate
from runner.trace import SyntheticConfig, generate_synthetic

__all__ = ["bench_sim"]


def bench_sim(
    *, concurrency: int = 256, duration_s: float = 3600.0, server_workers: int = 64
) -> dict[str, Any]:
    trees = generate_synthetic(SyntheticConfig()).trees
    config = SimConfig(
        replay=ReplayConfig(concurrency=concurrency, duration_s=duration_s),
        engine=EngineConfig(
            affinity=AffinityConfig(kind=AffinityKind.DYNAMO_NVEXT, scope="lineage")
        ),
        cluster=ClusterConfig(workers=server_workers),
    )
    gc.collect()
    cpu0 = time.process_time()
    wall0 = time.perf_counter()
    result = simulate(trees, config)
    wall_s = time.perf_counter() - wall0
    cpu_s = time.process_time() - cpu0
    summary = result.summary
    requests = int(summary["requests"])
    return {
        "requests": requests,
        "simulated_s": round(float(summary["elapsed_s"]), 1),
        "wall_s": round(wall_s, 2),
        "cpu_s": round(cpu_s, 2),
        "us_per_request": round(1e6 * wall_s / max(1, requests), 1),
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "prefix_cache_hit_ratio": summary["prefix_cache_hit_ratio"],
        "ttft_ms_p50": summary["ttft_ms"]["p50"],
    }
