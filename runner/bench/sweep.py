"""Sweep benchmark: the simulated twin of issue 20's sweep, wall time on this machine.

Five concurrencies (1, 2, 4, 8, 16) by two arms (lineage vs conversation under
`dynamo-headers`) on the simulated Dynamo 1.6 (2 workers, KV router, header affinity TTL
300 s), the points in parallel processes. Reports the sweep's wall time beside the sum of its
points' own (their serial cost), so the parallel gain reads directly.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from runner.dynamo import Generation
from runner.sweep import parse_sweep, run_sweep

__all__ = ["bench_sweep"]

CONCURRENCIES = (1, 2, 4, 8, 16)


def bench_sweep(
    *, duration_s: float = 1800.0, processes: int | None = None, trace: Path | None = None
) -> dict[str, Any]:
    workload: dict[str, Any] = {"traces": [str(trace)]} if trace is not None else {}
    sweep = parse_sweep(
        {
            "base": {
                "workload": workload,
                "duration_s": duration_s,
                "start_window": [0, 1],
                # A recorded session's think times are minutes: replayed 100x faster, as the
                # demo scenario does; the synthetic workload's are seconds already.
                "speedup": 100.0 if trace is not None else 1.0,
                "affinity": "dynamo-headers",
                "target": {
                    "kind": "simulated",
                    "workers": 2,
                    "router": "kv",
                    "dynamo_version": Generation.V1_6.value,
                    "header_affinity_ttl_s": 300,
                },
            },
            "concurrency": list(CONCURRENCIES),
            "arms": [
                {"name": "lineage", "overrides": {"scope": "lineage"}},
                {"name": "conversation", "overrides": {"scope": "conversation"}},
            ],
        }
    )
    workers = processes or os.cpu_count() or 1
    report = run_sweep(sweep, processes=workers)
    points_s = sum(point.wall_s for point in report.points)
    return {
        "points": len(CONCURRENCIES),
        "arms": len(sweep.arms),
        "runs": report.runs,
        "processes": workers,
        "simulated_s_per_run": duration_s,
        "requests": sum(point.requests for point in report.points),
        "wall_s": report.wall_s,
        "points_wall_s_sum": round(points_s, 2),
        "parallel_gain": round(points_s / report.wall_s, 2) if report.wall_s else None,
        "slowest_point_s": max(point.wall_s for point in report.points),
        "headline": report.headlines[0].text,
    }
