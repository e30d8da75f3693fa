"""Inter-chunk gaps kept per record (runner/metrics/gaps.py): the packed form round trips
through a record's JSON line and the fleet's result wire, the run's `inter_chunk_ms` is fed
every gap, and `verify` recomputes its percentiles exactly (against a brute-force sort),
while records written before gaps were kept are said to be uncheckable, never passed."""

from __future__ import annotations

import itertools
import json
import math
import random

import pytest

from runner.client import ResponseResult
from runner.fleet.wire import decode_results, encode_results, result_row
from runner.metrics import RequestRecord, RunMetrics
from runner.metrics.gaps import (
    GAP_BYTES,
    decode_gaps,
    encode_gaps,
    gaps_from_text,
    gaps_ms,
    gaps_to_text,
)
from runner.metrics.verify import HISTOGRAM_RELATIVE_ERROR, verify, verify_checked, verify_text

from .builders import request


def _stream(rng: random.Random, n: int, start: float = 12.5) -> list[float]:
    times = [start]
    for _ in range(n - 1):
        # Some chunks share a read (0 gap), most are a few ms apart, a few stall.
        gap = 0.0 if rng.random() < 0.1 else rng.lognormvariate(-5, 0.8)
        times.append(times[-1] + gap)
    return times


def test_gaps_round_trip_to_the_microsecond_and_sum_to_the_span():
    rng = random.Random(3)
    times = _stream(rng, 400)
    packed = encode_gaps(times)
    assert len(packed) == GAP_BYTES * 399
    gaps = decode_gaps(packed)
    expected = [round(b * 1e6) - round(a * 1e6) for a, b in itertools.pairwise(times)]
    assert list(gaps) == expected
    assert sum(gaps) == round(times[-1] * 1e6) - round(times[0] * 1e6)
    assert encode_gaps([1.0]) == b"" and encode_gaps([]) == b""
    with pytest.raises(ValueError, match="multiple of 4"):
        decode_gaps(b"\x00\x01\x02")
    with pytest.raises(ValueError, match="base64"):
        gaps_from_text("not base64!")


def _record(rng: random.Random, **fields) -> RequestRecord:
    times = _stream(rng, rng.randrange(2, 300))
    itl = 1000.0 * (times[-1] - times[0]) / (len(times) - 1)
    if times[-1] == times[0]:
        return request(itl_ms=None, **fields)
    return request(itl_ms=itl, chunk_gaps=encode_gaps(times), **fields)


def test_a_record_line_carries_its_gaps_and_reads_back():
    record = _record(random.Random(1))
    line = json.loads(json.dumps(record.to_json_dict()))
    assert isinstance(line["chunk_gaps_us"], str)
    back = RequestRecord.from_json_dict(line)
    assert back.chunk_gaps == record.chunk_gaps
    # A line written before gaps were kept reads as no gaps.
    del line["chunk_gaps_us"]
    assert RequestRecord.from_json_dict(line).chunk_gaps is None


def test_the_fleet_wire_carries_every_gap():
    times = _stream(random.Random(2), 50, start=100.0)
    result = ResponseResult(
        start_s=99.9,
        end_s=times[-1],
        first_token_s=times[0],
        chunk_times_s=tuple(times),
        output_tokens=50,
        prompt_tokens=10,
        cached_tokens=None,
        served_by="w0",
        status=200,
        error=None,
    )
    [(_, back)] = decode_results(encode_results([result_row(1, result, 1000.0)]), 1000.0)
    assert encode_gaps(back.chunk_times_s) == encode_gaps(times)


def _run(n: int, seed: int = 7) -> tuple[dict, list[dict], list[float]]:
    rng = random.Random(seed)
    metrics = RunMetrics()
    lines: list[dict] = []
    every_gap: list[float] = []
    for i in range(n):
        error = "http_5xx" if i % 53 == 0 else None
        record = _record(rng, start_s=i * 0.01, error=error, warmup=i < 5)
        metrics.record(record)
        if record.chunk_gaps and error is None and not record.warmup:
            every_gap.extend(gaps_ms(record.chunk_gaps))
        lines.append(json.loads(json.dumps(record.to_json_dict())))
    summary = json.loads(json.dumps(metrics.summary()))
    return summary, lines, every_gap


def _linear(values: list[float], q: float) -> float:
    ordered = sorted(values)
    h = (len(ordered) - 1) * q / 100.0
    lo, hi = ordered[math.floor(h)], ordered[math.ceil(h)]
    return lo + (h - math.floor(h)) * (hi - lo)


def test_verify_recomputes_every_inter_chunk_percentile_exactly():
    summary, lines, every_gap = _run(600)
    assert summary["inter_chunk_samples"] == len(every_gap) > 10_000
    report = verify(summary, lines)
    assert report.ok, [d.to_json() for d in report.failures]
    assert report.unchecked == ()
    exact = report.inter_chunk["percentiles_ms"]
    for key, q in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99)):
        assert exact[key] == pytest.approx(_linear(every_gap, q), abs=1e-12)
    assert exact["min"] == min(every_gap) and exact["max"] == max(every_gap)
    figures = {d.figure: d for d in report.differences}
    for key in ("p50", "p90", "p99", "min", "max"):
        assert figures[f"inter_chunk_ms.{key}"].difference <= HISTOGRAM_RELATIVE_ERROR
    assert figures["records.itl_ms_is_gap_mean_mismatches"].records == 0
    assert report.largest("inter_chunk_ms.p") is not None
    assert "inter-chunk samples" in verify_text(verify_checked(summary, lines), source="x")


def test_a_wrong_inter_chunk_percentile_or_a_lost_gap_is_found():
    summary, lines, _ = _run(200)
    summary["inter_chunk_ms"]["p90"] *= 1.02
    failed = {d.figure for d in verify(summary, lines).failures}
    assert failed == {"inter_chunk_ms.p90"}

    summary, lines, _ = _run(200)
    victim = next(
        line
        for line in lines
        if line["chunk_gaps_us"] and line["error"] is None and not line["warmup"]
    )
    packed = gaps_from_text(victim["chunk_gaps_us"])
    victim["chunk_gaps_us"] = gaps_to_text(packed[: -2 * GAP_BYTES])  # two gaps lost
    failed = {d.figure for d in verify(summary, lines).failures}
    assert {"inter_chunk_samples", "records.itl_ms_is_gap_mean_mismatches"} <= failed


def test_records_without_gaps_leave_the_inter_chunk_percentiles_unchecked_not_passed():
    summary, lines, _ = _run(200)
    for line in lines:
        line.pop("chunk_gaps_us")
    checked = verify_checked(summary, lines)
    assert [u["figure"] for u in checked["unchecked"]] == ["inter_chunk_ms"]
    assert "could not be checked" in checked["unchecked"][0]["reason"]
    assert not any(f["figure"].startswith("inter_chunk_ms.") for f in checked["figures"])
    text = verify_text(checked, source="old")
    assert "NOT CHECKED inter_chunk_ms" in text and "every figure agrees" not in text

    # A summary written before gaps were kept states no inter-chunk figures: still unchecked.
    for key in ("inter_chunk_ms", "inter_chunk_samples"):
        summary.pop(key)
    assert [u["figure"] for u in verify(summary, lines).unchecked] == ["inter_chunk_ms"]


def test_a_run_that_timed_no_chunks_states_zero_samples_and_checks():
    """The simulator's records have an ITL but no chunks: its summary says 0 samples."""
    metrics = RunMetrics()
    lines = []
    for i in range(50):
        record = request(start_s=i * 0.1, itl_ms=4.0 + i)
        metrics.record(record)
        lines.append(json.loads(json.dumps(record.to_json_dict())))
    report = verify(json.loads(json.dumps(metrics.summary())), lines)
    assert report.ok and report.unchecked == ()
    assert {d.figure: d.records for d in report.differences}["inter_chunk_samples"] == 0
