"""`python -m runner verify`: recompute a run's summary from its records and compare.

Takes a run's output directory (its `records.jsonl` and `summary.json`) or a records file
with `--summary`. Reads the records a line at a time (`.jsonl` or `.jsonl.gz`), recomputes
counts, token sums, hit ratios and exact percentiles, and prints, per figure, the summary's
value, the records' value and the difference against the allowed error (the histogram's
0.54 % for percentiles, none for counts). Exit 0 when every figure agrees, 1 when one does
not, 2 on bad input.
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from runner.cli.output import print_json
from runner.errors import BadInput

_RECORD_NAMES = ("records.jsonl", "records.jsonl.gz")
_SUMMARY_NAMES = ("summary.json",)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "verify",
        help="recompute a run's summary from its stored records and report the differences",
        description="Recompute counts, hit ratios and exact TTFT/ITL/latency percentiles from "
        "a run's records and compare each with the summary (percentiles against the "
        "histogram's stated 0.54 %% error).",
    )
    parser.add_argument(
        "path",
        type=Path,
        help="a run's output directory (records.jsonl[.gz] and summary.json) or a records "
        "file (.jsonl or .jsonl.gz)",
    )
    parser.add_argument(
        "--summary", type=Path, default=None, help="the summary JSON (default: beside)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(handler=run)


def _find(path: Path, summary: Path | None) -> tuple[Path, Path]:
    if path.is_dir():
        records = next((path / n for n in _RECORD_NAMES if (path / n).is_file()), None)
        if records is None:
            raise BadInput(f"{path}: no records.jsonl or records.jsonl.gz in this directory")
        folder = path
    elif path.is_file():
        records, folder = path, path.parent
    else:
        raise BadInput(f"{path}: no such file or directory")
    if summary is None:
        summary = next((folder / n for n in _SUMMARY_NAMES if (folder / n).is_file()), None)
        if summary is None:
            raise BadInput(f"{folder}: no summary.json beside the records; give --summary FILE")
    return records, summary


def _open(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """One record a line; blank lines skipped; a bad line is bad input (with its number)."""
    with _open(path) as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise BadInput(f"{path}:{number}: not a JSON record ({exc.msg})") from None


def run(args: argparse.Namespace) -> int:
    from runner.metrics.verify import verify

    records_path, summary_path = _find(args.path, args.summary)
    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise BadInput(f"{summary_path}: cannot read the summary ({exc})") from None
    if not isinstance(summary, dict):
        raise BadInput(f"{summary_path}: not a summary object")
    started = time.perf_counter()
    report = verify(summary, read_records(records_path))
    took_s = time.perf_counter() - started
    if args.json:
        print_json({**report.to_json(), "seconds": round(took_s, 2)})
        return 0 if report.ok else 1
    print(f"{report.records:,} records from {records_path} against {summary_path} ({took_s:.1f} s)")
    for d in report.differences:
        if d.difference is None:
            shown = "missing"
        elif d.relative:
            shown = f"{d.difference * 100:.4f} % (allowed {d.allowed * 100:.2f} %)"
        else:
            shown = f"{d.difference:g} (allowed {d.allowed:g})"
        mark = "ok  " if d.ok else "DIFF"
        print(
            f"  {mark} {d.figure:<28} summary {_short(d.summary):>14}  records "
            f"{_short(d.records):>14}  {shown}"
        )
    for name in ("ttft_ms", "itl_ms", "latency_ms"):
        largest = report.largest(name + ".p")
        if largest is not None:
            print(f"  largest {name} percentile difference: {largest * 100:.4f} %")
    print("every figure agrees" if report.ok else f"{len(report.failures)} figures disagree")
    return 0 if report.ok else 1


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 14 else text[:13] + "…"
