"""The Prometheus text parser: the 0.0.4 format as servers print it, and what they get wrong."""

from __future__ import annotations

import math

from runner.servermetrics import parse_exposition
from tests.runner.servermetrics.samples import DYNAMO_FRONTEND, VLLM


def test_it_reads_help_type_labels_and_values():
    page = parse_exposition(VLLM)
    family = page.families["vllm:num_requests_running"]
    assert family.kind == "gauge"
    assert family.help == "Number of requests in model execution batches."
    assert [(s.label("engine"), s.value) for s in family.samples] == [("0", 7.0), ("1", 5.0)]
    assert page.skipped_lines == 0


def test_counter_and_histogram_series_belong_to_their_declared_family():
    page = parse_exposition(VLLM)
    hits = page.families["vllm:prefix_cache_hits"]
    assert hits.kind == "counter"
    assert {s.name for s in hits.samples} == {"vllm:prefix_cache_hits_total"}
    histogram = page.families["vllm:e2e_request_latency_seconds"]
    assert histogram.kind == "histogram"
    assert {s.name for s in histogram.samples} == {
        "vllm:e2e_request_latency_seconds_bucket",
        "vllm:e2e_request_latency_seconds_sum",
        "vllm:e2e_request_latency_seconds_count",
    }
    inf = [s for s in histogram.samples if s.label("le") == "+Inf"]
    assert inf[0].value == 40.0
    assert [s.value for s in page.series("vllm:e2e_request_latency_seconds_count")] == [40.0]
    # A counter declared under its _total name (the Rust client Dynamo uses) is one family.
    dynamo = parse_exposition(DYNAMO_FRONTEND)
    assert dynamo.families["dynamo_frontend_requests_total"].kind == "counter"
    assert len(dynamo.series("dynamo_frontend_requests_total")) == 2


def test_escaped_label_values_special_numbers_and_timestamps():
    page = parse_exposition(
        "# HELP odd A help with a \\\\ backslash and\\na newline\n"
        "# TYPE odd gauge\n"
        'odd{path="C:\\\\tmp",quote="say \\"hi\\"",text="a,b}c\\nd"} NaN 1700000000000\n'
        'odd{kind="up"} +Inf\n'
        'odd{kind="down",} -Inf\n'
        "odd 1.5e3\n"
    )
    family = page.families["odd"]
    assert family.help == "A help with a \\ backslash and\na newline"
    first, up, down, plain = family.samples
    assert dict(first.labels) == {"path": "C:\\tmp", "quote": 'say "hi"', "text": "a,b}c\nd"}
    assert math.isnan(first.value) and first.timestamp_ms == 1_700_000_000_000
    assert (up.value, down.value, plain.value) == (math.inf, -math.inf, 1500.0)
    assert plain.labels == ()


def test_broken_lines_are_skipped_and_counted_never_raised():
    page = parse_exposition(
        "# a free comment\n"
        "# TYPE good counter\n"
        "good_total 3\n"
        'bad{label="unterminated} 1\n'
        "bad_value abc\n"
        "{no_name} 1\n"
        "bad_ts 1 notatime\n"
        "\n"
        "   \n"
        'also_good{a="1"} 2 # {trace_id="x"} 1.0\n'
        "# EOF\n"
    )
    assert page.skipped_lines == 4
    assert [s.value for s in page.series("good_total")] == [3.0]
    assert page.families["good"].kind == "counter"
    assert [s.value for s in page.series("also_good")] == [2.0]


def test_crlf_and_tabs_are_tolerated():
    page = parse_exposition('# TYPE g gauge\r\ng{w="1"}\t4\r\ng{w="2"} \t 5\r\n')
    assert [s.value for s in page.series("g")] == [4.0, 5.0]
