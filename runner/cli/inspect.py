"""`python -m runner inspect FILE`: load a trace and print its statistics.

A thin shell over `runner.trace.load_trace` and `inspect_trace`: parse the arguments, load,
print (one JSON object with --json, else an aligned table). Loader errors propagate as
TraceError; the dispatcher turns them into exit 2 with one line on stderr.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from runner.cli.options import add_trace_size_option, trace_size_limit
from runner.trace import FILE_FORMATS, inspect_trace, load_trace

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "inspect",
        help="load a trace file and print its statistics",
        description="Load a trace (format detected from its content) and print its statistics.",
    )
    parser.add_argument("file", metavar="FILE", help="trace file")
    parser.add_argument(
        "--format",
        choices=[f.value for f in FILE_FORMATS],
        help="trace format (default: detected from the content)",
    )
    add_trace_size_option(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def _table(stats: dict[str, Any]) -> str:
    rows: list[tuple[str, str]] = []
    for key, value in stats.items():
        if isinstance(value, dict):
            shown = "  ".join(f"{k} {v}" for k, v in value.items())
        elif isinstance(value, list):
            shown = ", ".join(str(v) for v in value)
        else:
            shown = str(value)
        rows.append((key, shown))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def run(args: argparse.Namespace) -> int:
    trace = load_trace(args.file, format=args.format, max_bytes=trace_size_limit(args))
    stats = inspect_trace(trace)
    if args.json:
        # Loaders refuse non-finite numbers, so the statistics are finite: strict JSON always.
        print(json.dumps(stats, allow_nan=False))
    else:
        print(_table(stats))
    return 0
