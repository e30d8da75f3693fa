"""The metrics micro-benchmarks run and report a figure (never a timing assertion)."""

from __future__ import annotations

from runner.bench.metrics import bench_record, bench_run_metrics_record


def test_bench_record_reports_nanoseconds_per_record() -> None:
    assert bench_record(1_000, repeat=1) > 0.0


def test_bench_run_metrics_record_reports_nanoseconds_per_record() -> None:
    assert bench_run_metrics_record(200, repeat=1) > 0.0
