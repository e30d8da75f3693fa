"""What each server's series mean (the catalogue) and what a run's scrapes add up to (books)."""

from __future__ import annotations

import itertools
import json

from runner.servermetrics import ServerMetricsBooks, parse_exposition, read_exposition
from tests.runner.servermetrics.samples import (
    DYNAMO_161_FRONTEND,
    DYNAMO_FRONTEND,
    DYNAMO_MOCKER_WORKER,
    DYNAMO_WORKER,
    SGLANG,
    VLLM,
)


def read(text: str):
    return read_exposition(parse_exposition(text))


def test_vllm_figures_per_engine():
    reading = read(VLLM)
    assert reading.kind == "vllm"
    assert reading.gauges["kv_usage"] == {"0": 0.25, "1": 0.75}
    assert reading.gauges["queue_depth"] == {"0": 2.0, "1": 0.0}
    assert reading.gauges["running"] == {"0": 7.0, "1": 5.0}
    hits, queries = reading.counters["prefix_hit_ratio"]
    assert hits == {"0": 500.0, "1": 100.0} and queries == {"0": 1000.0, "1": 1000.0}
    # Other labels (finished_reason) are summed within a worker.
    assert reading.counters["requests_total"][0] == {"0": 40.0, "1": 20.0}
    assert reading.extras == {"vllm:num_preemptions_total": 3.0}
    # The latency histogram and the process's own gc counter are only counted.
    assert reading.other_families == 2


def test_older_vllm_prefix_cache_names_are_read_too():
    reading = read(
        "vllm:gpu_cache_usage_perc 0.4\n"
        "vllm:gpu_prefix_cache_hits_total 30\n"
        "vllm:gpu_prefix_cache_queries_total 60\n"
    )
    assert reading.kind == "vllm"
    assert reading.gauges["kv_usage"] == {"": 0.4}
    assert reading.sources["prefix_hit_ratio"].startswith("vllm:gpu_prefix_cache_hits_total")


def test_sglang_figures_per_dp_rank_with_a_constant_tp_rank():
    reading = read(SGLANG)
    assert reading.kind == "sglang"
    assert reading.gauges["kv_usage"] == {"0": 0.5, "1": 0.1}
    assert reading.gauges["queue_depth"] == {"0": 3.0, "1": 1.0}
    assert reading.gauges["prefix_hit_ratio"] == {"0": 0.8, "1": 0.6}
    assert reading.extras == {"sglang:gen_throughput": 812.5}


def test_dynamo_frontend_queue_per_worker_and_inflight_overall():
    reading = read(DYNAMO_FRONTEND)
    assert reading.kind == "dynamo"
    assert reading.gauges["queue_depth"] == {"7587890000000001": 1.0, "7587890000000002": 3.0}
    assert reading.gauges["running"] == {"": 9.0}
    assert reading.counters["requests_total"][0] == {"": 122.0}
    assert "kv_usage" not in reading.gauges  # the frontend page has no worker KV stats


def test_dynamo_161_kv_use_is_active_blocks_over_the_models_blocks_per_worker():
    reading = read(DYNAMO_161_FRONTEND)
    assert reading.kind == "dynamo"
    assert reading.gauges["kv_usage"] == {
        "12339007555188169720": 0.25,
        "15836734920903695127": 0.05,
    }
    assert reading.gauges["queue_depth"] == {"": 6.0}
    cached, prompt = reading.counters["prefix_hit_ratio"]
    assert (cached, prompt) == ({"": 7360.0}, {"": 9200.0})
    books = ServerMetricsBooks()
    books.observe(0.0, read(DYNAMO_161_FRONTEND.replace(" 7360", " 0").replace(" 9200", " 0")))
    books.observe(1.0, reading)
    assert books.summary()["figures"]["prefix_hit_ratio"]["last"] == 0.8


def test_a_dynamo_worker_page_reads_its_kvstats_and_its_engines_series():
    reading = read(DYNAMO_WORKER)
    assert reading.kind == "dynamo"
    assert reading.gauges["kv_usage"] == {"0": 0.3, "1": 0.5}
    assert reading.gauges["prefix_hit_ratio"] == {"0": 0.9, "1": 0.7}
    assert reading.sources["running"] == "vllm:num_requests_running"


def test_a_dynamo_mocker_page_is_dynamo_with_its_engines_kv_and_queue():
    reading = read(DYNAMO_MOCKER_WORKER)
    assert reading.kind == "dynamo"
    assert reading.gauges["kv_usage"] == {"0": 0.01385498046875}
    assert reading.gauges["queue_depth"] == {"0": 1.0}
    assert reading.sources["running"] == "dynamo_component_inflight_requests"
    assert reading.counters["requests_total"][0] == {"6e00293acfc638b": 40.0}


def test_an_unknown_server_is_kept_as_counts_only():
    reading = read("# TYPE foo gauge\nfoo 1\nbar_total 2\n")
    assert reading.kind == "unknown"
    assert not reading.gauges and not reading.counters
    assert reading.other_families == 2


def _vllm_page(*, hits: float, queries: float, requests: float, kv: float) -> str:
    return (
        f'vllm:kv_cache_usage_perc{{engine="0"}} {kv}\n'
        f'vllm:num_requests_waiting{{engine="0"}} 1\n'
        f'vllm:prefix_cache_hits_total{{engine="0"}} {hits}\n'
        f'vllm:prefix_cache_queries_total{{engine="0"}} {queries}\n'
        f'vllm:request_success_total{{engine="0"}} {requests}\n'
    )


def test_counters_count_only_what_the_run_added_and_survive_a_reset():
    books = ServerMetricsBooks()
    # Before the run the server had served 100 requests with a 90 % hit ratio.
    books.observe(0.0, read(_vllm_page(hits=900, queries=1000, requests=100, kv=0.0)))
    books.observe(2.0, read(_vllm_page(hits=950, queries=1200, requests=110, kv=0.5)))
    # The server restarted: its counters start again from zero.
    books.observe(4.0, read(_vllm_page(hits=50, queries=100, requests=5, kv=0.3)))
    summary = books.summary()
    figures = summary["figures"]
    assert figures["requests_total"]["last"] == 15  # 10 before the restart, 5 after
    assert figures["prefix_hit_ratio"]["last"] == round(100 / 300, 4)
    assert figures["kv_usage"] == {"min": 0, "mean": round(0.8 / 3, 4), "max": 0.5, "last": 0.3}
    assert summary["series"]["t_s"] == [0.0, 2.0, 4.0]
    assert summary["series"]["kv_usage"] == [0, 0.5, 0.3]


def test_a_worker_whose_series_appears_mid_run_counts_from_zero():
    books = ServerMetricsBooks()
    books.observe(0.0, read('mock_worker_requests_total{worker="0"} 7\n'))
    later = 'mock_worker_requests_total{worker="0"} 9\nmock_worker_requests_total{worker="1"} 4\n'
    books.observe(1.0, read(later))
    assert books.summary()["workers"]["requests_total"] == [2, 4]


def test_the_final_scrape_completes_counters_without_an_idle_level_sample():
    books = ServerMetricsBooks()
    books.observe(0.0, read(_vllm_page(hits=0, queries=0, requests=0, kv=0.2)))
    books.observe(1.0, read(_vllm_page(hits=5, queries=10, requests=3, kv=0.6)))
    books.observe(1.5, read(_vllm_page(hits=10, queries=20, requests=8, kv=0.0)), final=True)
    figures = books.summary()["figures"]
    assert figures["requests_total"]["last"] == 8
    assert figures["kv_usage"]["last"] == 0.6 and figures["kv_usage"]["min"] == 0.2
    assert books.summary()["series"]["t_s"] == [0.0, 1.0]


def test_series_stay_bounded_and_keep_the_whole_run():
    books = ServerMetricsBooks(max_points=50)
    for i in range(1000):
        books.observe(float(i), read(f'mock_worker_kv_usage{{worker="0"}} {i / 1000}\n'))
    t_s = books.summary()["series"]["t_s"]
    assert len(t_s) < 50
    assert t_s[0] == 0.0 and t_s[-1] > 900
    steps = {round(b - a, 3) for a, b in itertools.pairwise(t_s)}
    assert len(steps) == 1  # evenly thinned


def test_the_live_view_stays_compact_at_many_workers():
    page = "".join(
        f'mock_worker_kv_usage{{worker="{w}"}} 0.123456\n'
        f'mock_worker_queued{{worker="{w}"}} 12\n'
        f'mock_worker_running{{worker="{w}"}} 250\n'
        for w in range(100)
    )
    books = ServerMetricsBooks()
    books.observe(1.0, read(page))
    view = books.view()
    assert view["workers"] is not None
    assert len(view["workers"]["ids"]) == 64 and view["workers_total"] == 100
    assert view["workers"]["ids"][:3] == ["0", "1", "2"]  # natural order, not "0", "1", "10"
    assert view["figures"]["queue_depth"] == 1200
    assert len(json.dumps(view, separators=(",", ":"))) < 1500
