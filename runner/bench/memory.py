"""Memory benchmark: engine state over a long simulated run under a routing policy.

Simulates the default synthetic workload until `requests` have been issued and samples, at
ten points, the process RSS and the sizes of every structure the engine keeps per session or
tree (router keys, session-cache entries, live trees, affinity books). Under spawn-pin they
must stay flat: bounded by the lanes, not by the requests replayed.
"""

from __future__ import annotations

import gc
import os
import resource
from typing import Any

from runner.affinity.emitters import AffinityConfig, AffinityKind
from runner.cluster import ClusterConfig
from runner.output import RecordDict, Snapshot
from runner.replay.engine import EngineConfig
from runner.replay.scheduler import ReplayConfig
from runner.routing.router import Policy
from runner.sim.simulator import SimConfig, simulate
from runner.trace import SyntheticConfig, generate_synthetic

__all__ = ["bench_memory"]


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):  # not Linux: the peak is the best we have
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_memory(
    *,
    requests: int = 1_000_000,
    concurrency: int = 256,
    server_workers: int = 64,
    policy: str = "spawn-pin",
) -> dict[str, Any]:
    trees = generate_synthetic(SyntheticConfig()).trees
    samples: list[dict[str, Any]] = []
    step = max(1, requests // 10)
    next_mark = [step]

    class Sampler:
        """Samples RSS and the engine's state sizes every tenth of the run; keeps nothing
        else (a million records kept would be the leak it looks for)."""

        def records(self, batch: list[RecordDict]) -> None:
            pass

        def log(self, level: str, message: str) -> None:
            pass

        def snapshot(self, snapshot: Snapshot) -> None:
            done = snapshot["requests"]
            if done < next_mark[0]:
                return
            next_mark[0] += step
            gc.collect()
            samples.append({"requests": done, "rss_mb": round(_rss_mb(), 1), **snapshot["state"]})

    config = SimConfig(
        replay=ReplayConfig(concurrency=concurrency, max_requests=requests),
        engine=EngineConfig(
            policy=Policy(policy),
            affinity=AffinityConfig(kind=AffinityKind.DYNAMO_NVEXT, scope="lineage"),
        ),
        cluster=ClusterConfig(workers=server_workers),
        snapshot_interval_s=30.0,
    )
    result = simulate(trees, config, sink=Sampler())
    return {"policy": policy, "requests": result.summary["requests"], "samples": samples}
