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
from typing import Any, cast

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


def bench_session_memory(
    trace: str,
    *,
    concurrency: int = 512,
    requests: int = 20_000,
    speedup: float = 100.0,
    policies: tuple[str, ...] = ("spawn-pin", "legacy"),
    client_workers: int = 8,
    start_window: tuple[float, float] = (0.0, 1.0),
) -> dict[str, Any]:
    """Session-copy memory per lane, live, in one process against the built-in mock (in its
    own process): each policy replays `trace` once, and the run's in-process client workers
    hold what they sent as shared pieces (runner.workers.history). Both figures come from
    the same copies in the same run: `logical` (every copy as whole text, as held before)
    and `actual` (pieces once, each copy its references and what is its own), at the peak
    and at the end (what stayed: legacy's orphans)."""
    from runner.cluster import ClusterConfig as MockCluster
    from runner.mockserver.config import MockServerConfig
    from runner.mockserver.server import start_mock_server
    from runner.run import run
    from runner.spec import parse_spec

    out: dict[str, Any] = {"trace": trace, "concurrency": concurrency, "policies": []}
    # The mock's token times run `speedup` times faster too, as the trace's gaps do.
    mock_config = MockServerConfig(cluster=MockCluster(time_scale=1.0 / speedup))
    with start_mock_server(mock_config, process=True) as mock:
        for policy in policies:
            spec = parse_spec(
                {
                    "workload": {"traces": [trace]},
                    "timing": "lanes",
                    "concurrency": concurrency,
                    "speedup": speedup,
                    "start_window": list(start_window),
                    "max_requests": requests,
                    "policy": policy,
                    "client_workers": client_workers,
                    # A one-process mock accepts slowly at this size on a small machine
                    # (issue 23 item 1): connections wait rather than end the run.
                    "target": {
                        "failure_threshold": 0,
                        "kind": "endpoint",
                        "url": mock.url,
                        "model": "mock-model",
                        "connect_timeout_s": 120.0,
                    },
                }
            )
            rss0 = _rss_mb()
            result = run(spec)
            summary = cast(dict[str, Any], result.summary)
            held: dict[str, Any] = summary.get("session_histories") or {}
            lanes = max(1, concurrency)
            out["policies"].append(
                {
                    "policy": policy,
                    "requests": summary.get("requests"),
                    "errors": summary.get("errors"),
                    "peak_logical_bytes_per_lane": held.get("peak_logical_bytes", 0) // lanes,
                    "peak_actual_bytes_per_lane": held.get("peak_actual_bytes", 0) // lanes,
                    "end_copies": held.get("copies"),
                    "end_logical_bytes": held.get("logical_bytes"),
                    "end_actual_bytes": held.get("actual_bytes"),
                    "orphans": held.get("orphans"),
                    "orphan_logical_bytes": held.get("orphan_logical_bytes"),
                    "orphan_own_bytes": held.get("orphan_own_bytes"),
                    "books_orphans": summary.get("orphaned_session_copies"),
                    "rss_mb_before": rss0,
                    "rss_mb_after": round(_rss_mb(), 1),
                }
            )
    return out
