"""`verify` (runner/metrics/verify.py, python -m runner verify): a summary recomputed from the
records it came from agrees within the histogram's stated error, and an injected
discrepancy in a count, a ratio or a percentile is found and named."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest

from runner.cli import main
from runner.metrics import RunMetrics
from runner.metrics.verify import HISTOGRAM_RELATIVE_ERROR, verify

from .builders import request


def _records(n: int = 2000, seed: int = 5) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        error = "http_5xx" if i % 97 == 0 else ("cancelled" if i % 211 == 0 else None)
        record = request(
            start_s=i * 0.01,
            ttft_ms=rng.lognormvariate(4, 1),
            latency_ms=rng.lognormvariate(7, 0.6),
            itl_ms=rng.lognormvariate(2, 0.5),
            cached_tokens=rng.randrange(0, 100),
            depth=i % 3,
            turn_index=i % 2,
            warmup=i < 20,
            error=error,
        )
        out.append(dict(record.to_json_dict()))
    return out


def _summary(records: list[dict]) -> dict:
    from runner.metrics import RequestRecord

    metrics = RunMetrics()
    fields = RequestRecord.__dataclass_fields__
    for line in records:
        metrics.record(RequestRecord(**{k: v for k, v in line.items() if k in fields}))
    summary = dict(metrics.summary())
    summary["child_first_turn_hit_ratio"] = metrics.child_first_turn_hit_ratio
    return json.loads(json.dumps(summary))  # as a summary file holds it


def test_a_summary_agrees_with_its_records_within_the_stated_error():
    records = _records()
    report = verify(_summary(records), records)
    assert report.ok, [d.to_json() for d in report.failures]
    assert report.records == 2000
    names = {d.figure for d in report.differences}
    assert {"requests", "errors_by_category", "prefix_cache_hit_ratio", "ttft_ms.p99"} <= names
    for metric in ("ttft_ms", "itl_ms", "latency_ms"):
        largest = report.largest(metric + ".p")
        assert largest is not None and 0 < largest <= HISTOGRAM_RELATIVE_ERROR


@pytest.mark.parametrize(
    ("change", "figure"),
    [
        (lambda s: s.__setitem__("requests", s["requests"] + 1), "requests"),
        (lambda s: s["errors_by_category"].__setitem__("http_5xx", 1), "errors_by_category"),
        (
            lambda s: s.__setitem__("prefix_cache_hit_ratio", s["prefix_cache_hit_ratio"] + 0.01),
            "prefix_cache_hit_ratio",
        ),
        (
            lambda s: s["latency_ms"].__setitem__("p99", s["latency_ms"]["p99"] * 1.01),
            "latency_ms.p99",
        ),
    ],
)
def test_an_injected_discrepancy_in_the_summary_is_found_and_named(change, figure):
    records = _records()
    summary = _summary(records)
    change(summary)
    report = verify(summary, records)
    assert not report.ok
    assert [d.figure for d in report.failures] == [figure]


def test_a_record_lost_from_the_export_is_found():
    records = _records()
    summary = _summary(records)
    slowest = max(
        (r for r in records if r["error"] is None and not r["warmup"]),
        key=lambda r: r["latency_ms"],
    )
    records.remove(slowest)
    failures = {d.figure for d in verify(summary, records).failures}
    assert {"requests", "latency_ms.max"} <= failures


def test_the_command_reads_a_run_directory_and_exits_by_the_verdict(tmp_path: Path, capsys):
    records = _records(500)
    with gzip.open(tmp_path / "records.jsonl.gz", "wt") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in records)
    summary = _summary(records)
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    assert main(["verify", str(tmp_path)]) == 0
    assert "every figure agrees" in capsys.readouterr().out
    summary["ttft_ms"]["p50"] *= 1.02
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    assert main(["verify", str(tmp_path), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert [f["figure"] for f in out["failures"]] == ["ttft_ms.p50"]
    assert main(["verify", str(tmp_path / "nothing")]) == 2
