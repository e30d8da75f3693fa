"""`python -m runner simulate`: the engine against the simulated cluster, in virtual time."""

from __future__ import annotations

import argparse
import time

from runner.cli.options import add_workload_options, engine_config, load_trees, replay_config
from runner.cli.output import print_json, print_table
from runner.cluster import ClusterConfig
from runner.sim.simulator import SimConfig, simulate


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="replay a workload against the simulated inference cluster in virtual time",
        description="Replay agent trees against the simulated cluster: an hour in seconds.",
    )
    add_workload_options(parser)
    server = parser.add_argument_group("simulated cluster")
    server.add_argument(
        "--server-workers", type=int, default=8, metavar="N", help="inference workers (default 8)"
    )
    server.add_argument(
        "--server-router",
        default="round-robin",
        choices=("round-robin", "random", "least-loaded", "kv", "kv-approx"),
        help="frontend router mode (default round-robin, Dynamo's default)",
    )
    server.add_argument(
        "--dynamo-version",
        choices=("1.2", "1.3"),
        default="1.3",
        help="session_control dialect: 1.2 rejects bind with HTTP 400",
    )
    server.add_argument(
        "--block-size",
        type=int,
        default=64,
        metavar="TOKENS",
        help="prefix-cache block size in tokens (default 64)",
    )
    server.add_argument(
        "--cache-blocks",
        type=int,
        default=16384,
        metavar="N",
        help="prefix-cache capacity per worker in blocks (default 16384)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    trees, _ = load_trees(args)
    config = SimConfig(
        replay=replay_config(args),
        engine=engine_config(args),
        cluster=ClusterConfig(
            workers=args.server_workers,
            router=args.server_router,
            dynamo_version=args.dynamo_version,
            block_size_tokens=args.block_size,
            capacity_blocks=args.cache_blocks,
            seed=args.seed,
        ),
    )
    started = time.perf_counter()
    result = simulate(trees, config)
    summary = result.summary
    summary["wall_s"] = round(time.perf_counter() - started, 3)
    if args.json:
        print_json(summary)
    else:
        print_table(summary, title="simulation summary")
    return 0
