"""`python -m runner replay`: replay a workload against a live OpenAI-compatible endpoint."""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import IO, Any, Literal

from runner.cli.options import (
    add_endpoint_options,
    add_workload_options,
    build_spec,
    endpoint_target_from_args,
)
from runner.cli.output import print_json, print_table
from runner.errors import SpecError
from runner.fleet import FleetPlan
from runner.output import RecordDict, Snapshot
from runner.run import run as run_spec


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "replay",
        help="replay a workload against a live OpenAI-compatible endpoint",
        description="Replay agent trees over HTTP with the same routing and affinity as "
        "`simulate`; the endpoint is checked before the run starts.",
    )
    add_endpoint_options(parser)
    add_workload_options(parser)
    out = parser.add_argument_group("output")
    out.add_argument(
        "--records",
        type=Path,
        default=None,
        metavar="FILE.jsonl",
        help="write one JSON line per request",
    )
    out.add_argument(
        "--summary",
        type=Path,
        default=None,
        metavar="FILE.json|FILE.csv",
        help="write the summary as JSON or CSV",
    )
    fleet = parser.add_argument_group("client workers as processes")
    fleet.add_argument(
        "--client-worker-processes",
        action="store_true",
        help="start `client-worker` processes on this machine and feed the client workers "
        "over Redis (each its own connections and session copies; see "
        "--client-workers-per-host for their memory)",
    )
    fleet.add_argument(
        "--client-workers-per-host",
        type=int,
        default=1,
        metavar="N",
        help="with --client-worker-processes: client workers each process serves together "
        "(default 1: a process of its own each, its own RSS); ceil(workers / N) processes",
    )
    fleet.add_argument(
        "--fleet-redis",
        default=os.environ.get("AIPERF_FLEET_REDIS_URL", "redis://127.0.0.1:6379/5"),
        metavar="URL",
        help="the Redis the processes meet on (default $AIPERF_FLEET_REDIS_URL or "
        "redis://127.0.0.1:6379/5)",
    )
    out.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    out.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.duration is None and args.requests is None and args.max_trees is None:
        raise SpecError("a live replay needs a stop: --duration S, --requests N or --max-trees N")
    if args.summary is not None and args.summary.suffix not in (".json", ".csv"):
        raise SpecError(f"--summary {args.summary}: use a .json or .csv file name")
    target = endpoint_target_from_args(args)
    spec = build_spec(args, target=target)
    fleet = None
    if args.client_workers_per_host != 1 and not args.client_worker_processes:
        raise SpecError(
            "--client-workers-per-host places workers in processes: add --client-worker-processes"
        )
    if args.client_worker_processes:
        spec = spec.with_overrides(
            {
                "client_worker_processes": True,
                "client_workers_per_host": args.client_workers_per_host,
            }
        )
        fleet = FleetPlan(redis_url=args.fleet_redis)
    stop = threading.Event()
    sink = _CliSink(progress=not args.quiet, records_path=args.records)
    # Ctrl-C: stop, keep what arrived (the run looks at `stop` every few milliseconds).
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        result = run_spec(spec, sink=sink, stop=stop, fleet=fleet)
    finally:
        signal.signal(signal.SIGINT, previous)
        sink.close()
    summary = result.summary
    if args.summary is not None:
        _write_summary(args.summary, dict(summary))
    if args.json:
        print_json(summary)
    else:
        print_table(_for_table(dict(summary)), title="replay summary")
    ended = result.ended_by
    if ended.status == "cancelled":
        return 130
    if ended.status == "failed":
        sys.stderr.write(f"error: run stopped early: {ended.detail}\n")
        return 1
    if ended.early:
        sys.stderr.write(f"note: {ended.detail}\n")
    return 0


class _CliSink:
    """Progress on stderr (a one-line bar with ETA and live counters; a line per 10
    snapshots when stderr is not a terminal), warnings once, and the records file."""

    def __init__(self, *, progress: bool, records_path: Path | None) -> None:
        self.progress = progress
        self.tty = sys.stderr.isatty()
        self.count = 0
        self.records_file: IO[str] | None = None
        if records_path is not None:
            try:
                self.records_file = records_path.open("w", encoding="utf-8")
            except OSError as exc:
                raise SpecError(
                    f"cannot write --records {records_path}: {exc.strerror or exc}"
                ) from None

    def records(self, batch: list[RecordDict]) -> None:
        if self.records_file is not None:
            self.records_file.write("".join(json.dumps(record) + "\n" for record in batch))

    def log(self, level: Literal["info", "warning", "error"], message: str) -> None:
        sys.stderr.write(f"{level}: {message}\n")

    def snapshot(self, snapshot: Snapshot) -> None:
        self.count += 1
        if not self.progress or (not self.tty and self.count % 10):
            return
        fraction = snapshot["progress"]
        width = 24
        filled = int(fraction * width)
        bar = "#" * filled + "-" * (width - filled)
        eta = snapshot["eta_s"]
        routing = snapshot["routing"]
        line = (
            f"[{bar}] {fraction:5.1%} t={snapshot['t_s']:.0f}s "
            f"eta={'?' if eta is None else f'{eta:.0f}s'} req={snapshot['requests']} "
            f"inflight={snapshot['in_flight']} err={snapshot['errors']} "
            f"switches={routing['worker_switches']} "
            f"orphans={routing['orphaned_session_copies']}"
        )
        sys.stderr.write(("\r" + line) if self.tty else (line + "\n"))
        sys.stderr.flush()

    def close(self) -> None:
        if self.records_file is not None:
            self.records_file.close()
        if self.progress and self.tty and self.count:
            sys.stderr.write("\n")


def _for_table(summary: dict[str, Any]) -> dict[str, Any]:
    """The table shows the server's figures, not their time series (JSON has everything)."""
    server = summary.get("server_metrics")
    if isinstance(server, dict) and "series" in server:
        summary["server_metrics"] = {k: v for k, v in server.items() if k != "series"}
    return summary


def _write_summary(path: Path, summary: dict[str, Any]) -> None:
    try:
        with path.open("w", encoding="utf-8", newline="") as handle:
            if path.suffix == ".json":
                json.dump(summary, handle, indent=2)
                handle.write("\n")
                return
            writer = csv.writer(handle)
            writer.writerow(["key", "value"])
            for key, value in _flatten(summary):
                writer.writerow([key, value])
    except OSError as exc:
        raise SpecError(f"cannot write --summary {path}: {exc.strerror or exc}") from None


def _flatten(data: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            rows.extend(_flatten(value, name + "."))
        else:
            rows.append((name, json.dumps(value) if isinstance(value, list) else value))
    return rows
