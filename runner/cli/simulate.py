"""`python -m runner simulate`: the engine against the simulated cluster, in virtual time."""

from __future__ import annotations

import argparse
import time

from runner.cli.options import (
    add_cluster_options,
    add_workload_options,
    build_spec,
    simulated_target,
)
from runner.cli.output import print_json, print_table
from runner.run import run as run_spec


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="replay a workload against the simulated inference cluster in virtual time",
        description="Replay agent trees against the simulated cluster: an hour in seconds.",
    )
    add_workload_options(parser)
    add_cluster_options(parser, prefix="server-")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    spec = build_spec(args, target=simulated_target(args))
    started = time.perf_counter()
    result = run_spec(spec)
    summary = dict(result.summary)
    summary["wall_s"] = round(time.perf_counter() - started, 3)
    if args.json:
        print_json(summary)
    else:
        print_table(summary, title="simulation summary")
    return 0
