"""`verify` at size: a synthetic run's records written as a stream, then checked.

Writes `requests` synthetic records (lognormal TTFT, latency and ITL, a few errors, warmup,
cached tokens) to a gzipped JSON-lines file one at a time while feeding the run's metrics, as
a live run does, writes the summary beside it, then runs `verify` over the file and reports
its time, the process's peak RSS and the largest difference per figure. Nothing holds the
records as objects: the file is the only copy.

Each successful record carries its inter-chunk gaps (`gaps_per_request` on average, lognormal
around 13 ms, whole microseconds, packed as runner.metrics.gaps does) and an itl_ms equal to
their mean, so the summary's inter_chunk_ms and `verify`'s exact recomputation of it run at
size. (The seeds' run had about 238 gaps a request; the default here is fewer so a million
requests write in minutes on two shared cores: the per-sample costs are reported.)
"""

from __future__ import annotations

import gzip
import json
import random
import resource
import time
from array import array
from pathlib import Path
from typing import Any

from runner.metrics import RequestRecord, RunMetrics
from runner.metrics.gaps import GAP_BYTES
from runner.metrics.verify import verify

__all__ = ["bench_verify"]


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_verify(
    folder: Path, *, requests: int = 200_000, seed: int = 1, gaps_per_request: int = 32
) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    metrics = RunMetrics()
    records_path = folder / "records.jsonl.gz"
    started = time.perf_counter()
    with gzip.open(records_path, "wt", encoding="utf-8", compresslevel=1) as handle:
        for i in range(requests):
            start_s = i * 0.001
            ttft_ms = rng.lognormvariate(5, 1)
            error = "http_5xx" if rng.random() < 0.005 else None
            chunk_gaps = None
            itl_ms = rng.lognormvariate(3, 0.4)
            if error is None:
                gaps = array(
                    "I",
                    [
                        int(rng.lognormvariate(9.5, 0.6))
                        for _ in range(rng.randrange(1, 2 * gaps_per_request))
                    ],
                )
                chunk_gaps = gaps.tobytes()  # little-endian on the hosts this runs on
                itl_ms = sum(gaps) / len(gaps) / 1000.0
            record = RequestRecord(
                request_id=i,
                session_id=f"s{i // 50}",
                root_id=f"t{i // 500}",
                turn_index=i % 50,
                num_turns=50,
                client_worker=i % 16,
                start_s=start_s,
                first_token_s=start_s + ttft_ms / 1000.0,
                end_s=start_s + ttft_ms / 1000.0 + rng.lognormvariate(8, 0.7) / 1000.0,
                prompt_tokens=rng.randrange(1000, 150_000),
                cached_tokens=rng.randrange(0, 1000),
                output_tokens=rng.randrange(1, 2000),
                itl_ms=itl_ms,
                chunk_gaps=chunk_gaps,
                depth=(i // 50) % 3,
                status=500 if error else 200,
                error=error,  # type: ignore[arg-type]
                warmup=i < requests // 100,
            )
            metrics.record(record)
            handle.write(json.dumps(record.to_json_dict()) + "\n")
    written_s = time.perf_counter() - started
    summary = dict(metrics.summary())
    summary["child_first_turn_hit_ratio"] = metrics.child_first_turn_hit_ratio
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")

    from runner.cli.verify import read_records

    rss_before = _peak_rss_mb()
    started = time.perf_counter()
    report = verify(summary, read_records(records_path))
    verify_s = time.perf_counter() - started
    return {
        "requests": requests,
        "records_file_mb": round(records_path.stat().st_size / 2**20, 1),
        "write_s": round(written_s, 1),
        "verify_s": round(verify_s, 1),
        "peak_rss_mb_before_verify": round(rss_before, 1),
        "peak_rss_mb_after_verify": round(_peak_rss_mb(), 1),
        "ok": report.ok,
        "largest_percentile_difference_pct": {
            name: round((report.largest(name + ".p") or 0.0) * 100, 4)
            for name in ("ttft_ms", "itl_ms", "latency_ms", "inter_chunk_ms")
        },
        "inter_chunk_samples": report.inter_chunk["samples"],
        "inter_chunk_distinct_values": report.inter_chunk["distinct_values"],
        "inter_chunk_bytes_per_record": round(
            report.inter_chunk["samples"]
            * GAP_BYTES
            / max(1, report.inter_chunk["records_with_gaps"]),
            1,
        ),
        "unchecked": list(report.unchecked),
        "failures": [d.to_json() for d in report.failures],
    }
