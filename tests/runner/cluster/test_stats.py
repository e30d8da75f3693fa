"""The cluster's JSON snapshot: per-worker counters and totals."""

from __future__ import annotations

import json

from runner.bench.cluster import run
from tests.runner.cluster.builders import BLOCK, bind, blocks, close, cluster, placed, request


def test_stats_count_per_worker_and_in_total_and_are_json() -> None:
    c = cluster(workers=2, header_affinity_ttl_s=60)
    keys = blocks(10)
    first = placed(c.submit(request(keys, control=bind("a"), output_tokens=500), 0.0))
    placed(c.submit(request(keys, control=bind("a"), output_tokens=500), first.ttft_s))
    placed(c.submit(request(control=close("a")), first.ttft_s))
    placed(c.submit(request(header="h"), first.ttft_s))  # round-robin: worker 1
    stats = c.stats(first.ttft_s)
    json.dumps(stats)
    w0, w1 = stats["workers"]
    assert (w0["requests"], w0["running"], w0["queued"]) == (3, 3, 0)
    assert (w0["prompt_tokens"], w0["cached_tokens"]) == (2 * (10 * BLOCK + 1) + 1, 10 * BLOCK)
    assert (w0["binds"], w0["closes"], w0["bound_keys"]) == (2, 1, 0)
    assert w0["cache_blocks_used"] == 10
    assert w0["kv_usage"] > 0
    assert (w1["requests"], w1["bound_keys"], w1["binds"]) == (1, 1, 1)
    totals = stats["totals"]
    assert totals["requests"] == 4
    assert totals["prefix_cache_hit_ratio"] == 10 * BLOCK / totals["prompt_tokens"]
    assert (totals["binds"], totals["closes"], totals["bound_keys"]) == (3, 1, 1)
    assert stats["router"] == "round-robin"


def test_running_and_queued_are_told_apart() -> None:
    c = cluster(workers=1, max_num_seqs=1)
    placed(c.submit(request(output_tokens=100), 0.0))
    placed(c.submit(request(output_tokens=100), 0.0))
    worker = c.stats(0.01)["workers"][0]
    assert (worker["running"], worker["queued"]) == (1, 1)


def test_sessions_seen_counts_distinct_session_ids() -> None:
    c = cluster(workers=2)
    for session in ("a", "a", "b", "a"):
        placed(c.submit(request(control=bind(session)), 0.0))
    placed(c.submit(request(header="c"), 0.0))  # a header names a session even when unused
    stats = c.stats(0.0)
    # a and b bound to workers 0 and 1; c landed on worker 0 by round-robin.
    assert [w["sessions_seen"] for w in stats["workers"]] == [2, 1]
    assert stats["totals"]["sessions_seen"] == 3


def test_an_empty_cluster_reports_zeros() -> None:
    totals = cluster().stats(0.0)["totals"]
    assert (totals["requests"], totals["prefix_cache_hit_ratio"], totals["rejections"]) == (
        0,
        0.0,
        {},
    )


def test_the_benchmark_runs_and_reports_its_figures() -> None:
    figures = run(requests=300, lanes=16, router="kv", seed=1)
    assert figures["requests"] == 300
    assert figures["us_per_submit"] > 0
    assert 0 < figures["prefix_cache_hit_ratio"] < 1
