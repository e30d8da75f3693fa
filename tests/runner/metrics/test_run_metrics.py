"""RunMetrics: what is counted, how it is split, goodput, and exact merges and snapshots."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from runner.errors import SpecError
from runner.metrics import (
    ERROR_CATEGORIES,
    RequestRecord,
    RunMetrics,
    metrics_from_dict,
    metrics_to_dict,
    stats_to_dict,
)
from tests.runner.metrics.builders import request

PERCENTILE_KEYS = ["p50", "p90", "p95", "p99", "min", "max", "mean", "std"]


def metrics_of(records: list[RequestRecord], **options: Any) -> RunMetrics:
    metrics = RunMetrics(**options)
    for record in records:
        metrics.record(record)
    return metrics


def random_records(seed: int, n: int) -> list[RequestRecord]:
    """A mixed stream: every depth, branch mode and error category, some warmup."""
    rng = random.Random(seed)
    records = []
    for i in range(n):
        cached_tokens = rng.choice((None, rng.randrange(0, 64)))
        records.append(
            request(
                start_s=i * 0.01,
                ttft_ms=rng.choice((None, rng.lognormvariate(4.0, 1.0))),
                latency_ms=rng.lognormvariate(7.0, 0.5),
                itl_ms=rng.choice((None, rng.lognormvariate(2.0, 0.3))),
                depth=rng.randrange(6),
                branch_mode=rng.choice(("root", "fork", "spawn")),
                client_worker=rng.randrange(8),
                inference_worker=rng.choice((None, 0, 1, 2, 17_000_000_000)),
                prompt_tokens=rng.randrange(64, 128),
                cached_tokens=cached_tokens,
                output_tokens=rng.randrange(1, 300),
                error=rng.choice(ERROR_CATEGORIES) if rng.random() < 0.1 else None,
                warmup=rng.random() < 0.05,
            )
        )
    return records


def test_warmup_records_are_excluded_from_percentiles() -> None:
    metrics = metrics_of(
        [
            request(ttft_ms=10.0, warmup=True),
            request(ttft_ms=9_000.0, latency_ms=9_500.0, warmup=True),
            request(ttft_ms=20.0),
        ]
    )
    summary = metrics.summary()
    assert summary["warmup_requests"] == 2
    assert summary["requests"] == 1
    assert summary["ttft_ms"]["max"] == pytest.approx(20.0)
    assert summary["ttft_ms"]["min"] == pytest.approx(20.0)
    assert metrics.client_workers()["completed"] == [1]


def test_prefix_cache_hit_ratio_ignores_requests_without_reported_cached_tokens() -> None:
    metrics = metrics_of(
        [
            request(prompt_tokens=1_000, cached_tokens=900),
            request(prompt_tokens=1_000, cached_tokens=500),
            request(prompt_tokens=8_000, cached_tokens=None),  # server said nothing
        ]
    )
    assert metrics.prefix_cache_hit_ratio == pytest.approx(0.7)
    assert metrics.summary()["input_tokens"] == 10_000


def test_prefix_cache_hit_ratio_is_none_when_no_server_reported() -> None:
    assert metrics_of([request(cached_tokens=None)]).prefix_cache_hit_ratio is None


def test_errors_are_counted_by_category() -> None:
    metrics = metrics_of(
        [
            request(error="timeout"),
            request(error="timeout"),
            request(error="http_429", status=429),
            request(error="worker_lost"),
            request(),
        ]
    )
    summary = metrics.summary()
    assert summary["errors_by_category"] == {"http_429": 1, "timeout": 2, "worker_lost": 1}
    assert summary["errors"] == 4
    assert summary["requests"] == 5
    assert summary["completed"] == 1
    assert summary["error_rate"] == pytest.approx(0.8)


def test_requests_cut_by_the_stop_are_counted_apart_never_as_errors_or_against_goodput() -> None:
    # Issue 16: a clean run stopped by its duration reported "errors 3", the requests its
    # drain deadline cancelled.
    metrics = metrics_of(
        [
            request(client_worker=0, inference_worker=1),
            request(client_worker=1, error="timeout"),
            request(client_worker=0, inference_worker=1, error="cancelled"),
            request(client_worker=1, error="cancelled"),
        ]
    )
    summary = metrics.summary()
    assert summary["requests"] == 4 and summary["completed"] == 1
    assert summary["errors"] == 1 and summary["errors_by_category"] == {"timeout": 1}
    assert summary["cut_by_stop"] == 2
    assert summary["error_rate"] == pytest.approx(0.5)  # of the two that ran their course
    assert summary["client_workers"]["errors"] == [0, 1]
    assert summary["inference_workers"]["errors"] == [0]
    assert metrics.overall.finished == 2
    restored = metrics_from_dict(json.loads(json.dumps(metrics_to_dict(metrics))))
    assert restored.summary() == summary
    twice = metrics_of([])
    twice.merge(metrics)
    twice.merge(restored)
    assert twice.summary()["cut_by_stop"] == 4 and twice.summary()["errors"] == 2


def test_a_snapshot_from_before_cut_by_stop_still_reads() -> None:
    data = metrics_to_dict(metrics_of([request(), request(error="timeout")]))
    for group in (*data["by_depth"].values(), *data["by_branch_mode"].values()):
        del group["cut_by_stop"]
    assert metrics_from_dict(data).summary()["cut_by_stop"] == 0


def test_failed_requests_stay_out_of_latencies_and_tokens() -> None:
    metrics = metrics_of(
        [
            request(latency_ms=100.0, output_tokens=10),
            request(latency_ms=60_000.0, output_tokens=5, error="timeout"),
        ]
    )
    summary = metrics.summary()
    assert summary["latency_ms"]["max"] == pytest.approx(100.0)
    assert summary["output_tokens"] == 10


def test_splits_by_depth_and_branch_mode() -> None:
    metrics = metrics_of(
        [
            request(depth=0, branch_mode="root", ttft_ms=10.0),
            request(depth=1, branch_mode="fork", ttft_ms=20.0),
            request(depth=1, branch_mode="spawn", ttft_ms=30.0),
            request(depth=2, branch_mode="spawn", ttft_ms=40.0, error="http_5xx"),
        ]
    )
    summary = metrics.summary()
    by_depth = summary["by_depth"]
    by_mode = summary["by_branch_mode"]
    assert list(by_depth) == ["0", "1", "2", "3+"]
    assert [by_depth[d]["requests"] for d in by_depth] == [1, 2, 1, 0]
    assert by_depth["1"]["ttft_ms"]["min"] == pytest.approx(20.0)
    assert by_depth["1"]["ttft_ms"]["max"] == pytest.approx(30.0)
    assert by_depth["2"]["errors_by_category"] == {"http_5xx": 1}
    assert by_depth["3+"]["ttft_ms"]["p50"] is None
    assert {mode: s["requests"] for mode, s in by_mode.items()} == {
        "root": 1,
        "fork": 1,
        "spawn": 2,
    }
    assert by_mode["spawn"]["errors"] == 1
    assert by_mode["fork"]["ttft_ms"]["p50"] == pytest.approx(20.0, rel=0.006)


def test_depth_three_and_deeper_share_a_group() -> None:
    metrics = metrics_of([request(depth=3), request(depth=4), request(depth=12)])
    assert metrics.by_depth["3+"].requests == 3


def test_a_negative_depth_is_rejected() -> None:
    with pytest.raises(ValueError, match="depth"):
        RunMetrics().record(request(depth=-1))


def test_goodput_counts_only_successful_requests_meeting_every_slo() -> None:
    metrics = metrics_of(
        [
            request(ttft_ms=100.0, itl_ms=5.0),  # good
            request(ttft_ms=300.0, itl_ms=5.0),  # TTFT too slow
            request(ttft_ms=100.0, itl_ms=12.0),  # ITL too slow
            request(ttft_ms=None, itl_ms=None),  # nothing to judge: good
            request(ttft_ms=100.0, itl_ms=5.0, error="stream_broken"),  # failed
        ],
        slo_ms={"ttft_ms": 200, "itl_ms": 10},
    )
    assert metrics.summary()["good_requests"] == 2
    throughput = metrics.throughput(elapsed_s=2.0)
    assert throughput["goodput_per_s"] == pytest.approx(1.0)
    assert throughput["requests_per_s"] == pytest.approx(2.0)


def test_without_slos_every_successful_request_is_good() -> None:
    metrics = metrics_of([request(), request(latency_ms=1e6), request(error="timeout")])
    assert metrics.overall.good == 2


@pytest.mark.parametrize(
    "slo_ms", [{"tpot_ms": 5.0}, {"ttft_ms": 0}, {"ttft_ms": -1.0}, {"itl_ms": float("inf")}]
)
def test_a_bad_slo_is_a_spec_error(slo_ms: dict[str, float]) -> None:
    with pytest.raises(SpecError):
        RunMetrics(slo_ms=slo_ms)


def test_throughput_is_measured_over_the_given_elapsed_time() -> None:
    metrics = metrics_of(
        [
            request(prompt_tokens=300, output_tokens=40),
            request(prompt_tokens=500, output_tokens=60),
            request(prompt_tokens=999, output_tokens=999, error="cancelled"),
        ]
    )
    throughput = metrics.throughput(elapsed_s=4.0)
    assert throughput == {
        "elapsed_s": 4.0,
        "requests_per_s": 0.5,
        "input_tokens_per_s": 200.0,
        "output_tokens_per_s": 25.0,
        "goodput_per_s": 0.5,
    }
    assert metrics.summary(elapsed_s=4.0)["throughput"] == throughput
    assert metrics.summary()["throughput"] is None


def test_throughput_is_unknown_before_any_time_has_elapsed() -> None:
    throughput = metrics_of([request()]).throughput(elapsed_s=0.0)
    assert throughput["requests_per_s"] is None
    assert throughput["output_tokens_per_s"] is None


def test_client_workers_are_arrays_indexed_by_worker() -> None:
    metrics = metrics_of(
        [
            request(client_worker=0),
            request(client_worker=3),
            request(client_worker=3, error="connect"),
            request(client_worker=3),
        ]
    )
    assert metrics.client_workers() == {"completed": [1, 0, 0, 2], "errors": [0, 0, 0, 1]}


def test_inference_workers_are_parallel_arrays_ordered_by_id() -> None:
    metrics = metrics_of(
        [
            request(inference_worker=9, prompt_tokens=100, cached_tokens=50),
            request(inference_worker=2, prompt_tokens=100, cached_tokens=None),
            request(inference_worker=9, prompt_tokens=300, cached_tokens=250),
            request(inference_worker=9, error="http_5xx"),
            request(inference_worker=None),
        ]
    )
    workers = metrics.summary()["inference_workers"]
    assert workers == {
        "ids": [2, 9],
        "requests": [1, 3],
        "errors": [0, 1],
        "prompt_tokens": [100, 400],
        "cached_tokens": [0, 300],
        "cache_reported_prompt_tokens": [0, 400],
        "prefix_cache_hit_ratio": [None, 0.75],
    }


def test_summary_percentiles_have_the_documented_keys() -> None:
    metrics = metrics_of([request(ttft_ms=10.0, itl_ms=2.0, latency_ms=100.0)])
    percentiles = metrics.summary_percentiles()
    assert list(percentiles) == ["ttft_ms", "itl_ms", "latency_ms"]
    for values in percentiles.values():
        assert list(values) == PERCENTILE_KEYS
        assert all(isinstance(value, float) for value in values.values())


def test_summary_percentiles_are_none_when_nothing_was_measured() -> None:
    percentiles = RunMetrics().summary_percentiles()
    assert percentiles["ttft_ms"] == dict.fromkeys(PERCENTILE_KEYS)


def test_summary_is_plain_json() -> None:
    metrics = metrics_of(random_records(seed=4, n=500), slo_ms={"ttft_ms": 100.0})
    summary = metrics.summary(elapsed_s=5.0)
    assert json.loads(json.dumps(summary)) == summary


def test_merged_run_metrics_equal_one_run_fed_both_streams() -> None:
    records = random_records(seed=8, n=3_000)
    options = {"slo_ms": {"ttft_ms": 60.0, "latency_ms": 1_500.0}}
    merged = metrics_of(records[::3], **options)
    merged.merge(metrics_of(records[1::3], **options))
    merged.merge(metrics_of(records[2::3], **options))
    single = metrics_of(records, **options)
    assert metrics_to_dict(merged) == metrics_to_dict(single)
    assert merged.summary(elapsed_s=30.0) == single.summary(elapsed_s=30.0)


def test_merge_rejects_metrics_judged_against_other_slos() -> None:
    with pytest.raises(ValueError, match="SLO"):
        RunMetrics(slo_ms={"ttft_ms": 100}).merge(RunMetrics(slo_ms={"ttft_ms": 200}))


def test_snapshot_round_trips_exactly() -> None:
    metrics = metrics_of(random_records(seed=15, n=2_000), slo_ms={"itl_ms": 8.0})
    wire = json.dumps(metrics_to_dict(metrics))
    restored = metrics_from_dict(json.loads(wire))
    assert metrics_to_dict(restored) == metrics_to_dict(metrics)
    assert restored.summary(elapsed_s=20.0) == metrics.summary(elapsed_s=20.0)
    assert stats_to_dict(restored.overall) == stats_to_dict(metrics.overall)


def test_snapshots_from_several_processes_combine_exactly() -> None:
    records = random_records(seed=16, n=2_000)
    combined = RunMetrics()
    for part in range(4):
        wire = json.dumps(metrics_to_dict(metrics_of(records[part::4])))
        combined.merge(metrics_from_dict(json.loads(wire)))
    assert metrics_to_dict(combined) == metrics_to_dict(metrics_of(records))


def test_snapshot_leaves_out_groups_without_requests() -> None:
    snapshot = metrics_to_dict(metrics_of([request(depth=0, branch_mode="root")]))
    assert list(snapshot["by_depth"]) == ["0"]
    assert list(snapshot["by_branch_mode"]) == ["root"]
    empty = metrics_from_dict(metrics_to_dict(RunMetrics()))
    assert empty.summary()["requests"] == 0


def test_from_snapshot_rejects_another_version_or_unknown_groups() -> None:
    snapshot = metrics_to_dict(metrics_of([request()]))
    with pytest.raises(ValueError, match="version"):
        metrics_from_dict({**snapshot, "version": 99})
    with pytest.raises(ValueError, match="groups"):
        metrics_from_dict({**snapshot, "by_depth": {"7": snapshot["by_depth"]["0"]}})


def test_child_first_turn_hit_ratio_counts_only_the_first_requests_of_children():
    metrics = RunMetrics()
    metrics.record(request(depth=0, branch_mode="root", prompt_tokens=1000, cached_tokens=900))
    metrics.record(
        request(depth=1, branch_mode="spawn", turn_index=0, prompt_tokens=1000, cached_tokens=600)
    )
    metrics.record(
        request(depth=1, branch_mode="spawn", turn_index=3, prompt_tokens=1000, cached_tokens=1000)
    )
    metrics.record(
        request(depth=2, branch_mode="fork", turn_index=0, prompt_tokens=1000, cached_tokens=0)
    )
    assert metrics.child_first_turn_hit_ratio == 0.3
    restored = metrics_from_dict(metrics_to_dict(metrics))
    assert restored.child_first_turn_hit_ratio == 0.3
    restored.merge(metrics)
    assert restored.child_first_prompt_tokens == 4000
