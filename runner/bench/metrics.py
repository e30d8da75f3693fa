"""Micro-benchmarks of the metrics hot path; they print figures and never pass or fail.

Owns timing `LatencyHistogram.record` and `RunMetrics.record` on seeded synthetic data. It
must not run inside the test suite as a timing check (these machines are too noisy): run
`python -m runner bench metrics` and read the figures side by side.
"""

from __future__ import annotations

import random
import time

from runner.metrics.aggregate import RunMetrics
from runner.metrics.histogram import LatencyHistogram
from runner.metrics.records import ERROR_CATEGORIES, RequestRecord

__all__ = ["bench_call_overhead", "bench_record", "bench_run_metrics_record"]


def _latencies_ms(n: int, seed: int) -> list[float]:
    # Lognormal around 20 ms with a long tail: the shape of real TTFT/latency data, so the
    # benchmark touches as many buckets as a run does.
    rng = random.Random(seed)
    return [rng.lognormvariate(3.0, 1.5) for _ in range(n)]


def bench_record(n: int = 1_000_000, *, repeat: int = 3, seed: int = 0) -> float:
    """Nanoseconds per `LatencyHistogram.record`, best of `repeat` passes over n values."""
    values_ms = _latencies_ms(n, seed)
    best_ns = float("inf")
    for _ in range(repeat):
        record = LatencyHistogram().record
        started_ns = time.perf_counter_ns()
        for value_ms in values_ms:
            record(value_ms)
        best_ns = min(best_ns, (time.perf_counter_ns() - started_ns) / n)
    return best_ns


def bench_call_overhead(n: int = 1_000_000, *, repeat: int = 3) -> float:
    """Nanoseconds per call of a method that does nothing: the floor under `record`, printed
    beside it so figures from a loaded machine can be read as ratios."""

    class _Nothing:
        __slots__ = ()

        def record(self, value_ms: float) -> None:
            pass

    values_ms = [1.0] * n
    best_ns = float("inf")
    for _ in range(repeat):
        record = _Nothing().record
        started_ns = time.perf_counter_ns()
        for value_ms in values_ms:
            record(value_ms)
        best_ns = min(best_ns, (time.perf_counter_ns() - started_ns) / n)
    return best_ns


def bench_run_metrics_record(n: int = 100_000, *, repeat: int = 3, seed: int = 0) -> float:
    """Nanoseconds per `RunMetrics.record` (3 slices × 3 histograms), best of `repeat`."""
    rng = random.Random(seed)
    records = []
    for i in range(n):
        start_s = i * 0.001
        ttft_s = rng.lognormvariate(-3.0, 1.0)
        records.append(
            RequestRecord(
                request_id=i,
                session_id=f"s{i % 500}",
                root_id=f"s{i % 100}",
                turn_index=i % 7,
                num_turns=7,
                depth=rng.choice((0, 0, 1, 1, 2, 3, 4)),
                branch_mode=rng.choice(("root", "fork", "spawn")),
                client_worker=i % 8,
                inference_worker=i % 4,
                start_s=start_s,
                first_token_s=start_s + ttft_s,
                end_s=start_s + ttft_s + rng.lognormvariate(0.0, 0.5),
                prompt_tokens=rng.randrange(100, 20_000),
                cached_tokens=rng.randrange(0, 100),
                output_tokens=rng.randrange(1, 500),
                itl_ms=rng.lognormvariate(2.0, 0.3),
                status=200,
                error=rng.choice(ERROR_CATEGORIES) if rng.random() < 0.01 else None,
            )
        )
    best_ns = float("inf")
    for _ in range(repeat):
        record = RunMetrics(slo_ms={"ttft_ms": 200.0, "itl_ms": 10.0}).record
        started_ns = time.perf_counter_ns()
        for request in records:
            record(request)
        best_ns = min(best_ns, (time.perf_counter_ns() - started_ns) / n)
    return best_ns
