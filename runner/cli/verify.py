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
    from runner.metrics.verify import verify_checked, verify_text

    records_path, summary_path = _find(args.path, args.summary)
    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise BadInput(f"{summary_path}: cannot read the summary ({exc})") from None
    if not isinstance(summary, dict):
        raise BadInput(f"{summary_path}: not a summary object")
    checked = verify_checked(summary, read_records(records_path))
    if args.json:
        print_json(checked)
    else:
        print(verify_text(checked, source=f"{records_path} against {summary_path}"))
    return 0 if checked["ok"] else 1
