"""Options shared by `simulate` and `replay`: the workload, routing and affinity knobs.

Parses the command line into the engine's frozen config objects once; below this point nobody
reads argparse namespaces.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from runner.affinity.emitters import AffinityConfig, AffinityKind
from runner.cluster import ClusterConfig
from runner.errors import SpecError
from runner.replay.engine import EngineConfig
from runner.replay.scheduler import ReplayConfig
from runner.routing.router import Policy
from runner.trace import SyntheticConfig, Trace, generate_synthetic, load_trace
from runner.trace.model import Tree

__all__ = [
    "add_cluster_options",
    "add_workload_options",
    "cluster_config",
    "engine_config",
    "load_trees",
    "replay_config",
]

_ROUTERS = ("round-robin", "random", "least-loaded", "kv", "kv-approx")


def add_workload_options(parser: argparse.ArgumentParser) -> None:
    source = parser.add_argument_group("workload")
    source.add_argument(
        "--trace",
        action="append",
        type=Path,
        default=[],
        metavar="PATH",
        help="trace file to replay (repeatable; format auto-detected)",
    )
    source.add_argument(
        "--synthetic",
        action="store_true",
        help="replay the seeded synthetic agentic workload (default when no --trace)",
    )
    source.add_argument(
        "--synthetic-trees",
        type=int,
        default=None,
        metavar="N",
        help="trees the synthetic generator makes (default: its own)",
    )
    source.add_argument("--seed", type=int, default=0, help="seed for every random choice")

    timing = parser.add_argument_group("replay")
    timing.add_argument(
        "--concurrency",
        type=int,
        default=16,
        metavar="N",
        help="lanes, each replaying one agent tree at a time (default 16)",
    )
    timing.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="S",
        help="stop issuing after S seconds of run time",
    )
    timing.add_argument(
        "--requests", type=int, default=None, metavar="N", help="stop issuing after N requests"
    )
    timing.add_argument(
        "--max-trees", type=int, default=None, metavar="N", help="start at most N trees"
    )
    timing.add_argument(
        "--start-window",
        default="0:0",
        metavar="LO:HI",
        help="fractions of a tree's span where a lane's first tree starts "
        "(t*); 0:0 replays from the beginning (default)",
    )
    timing.add_argument(
        "--joins",
        choices=("recorded", "strict"),
        default="recorded",
        help="recorded: parents keep their own clock (default); strict: a "
        "joining turn waits for its children",
    )
    timing.add_argument(
        "--speedup",
        type=float,
        default=1.0,
        metavar="X",
        help="divide every recorded delay by X (default 1)",
    )
    timing.add_argument(
        "--warmup",
        type=float,
        default=0.0,
        metavar="S",
        help="requests issued in the first S seconds are not measured",
    )
    timing.add_argument(
        "--prime",
        action="store_true",
        help="with a start window: first send each live stream's last turn before t* "
        "(one-token answer, not measured) to warm caches, bindings and sticky entries",
    )

    routing = parser.add_argument_group("client routing")
    routing.add_argument(
        "--policy",
        choices=[p.value for p in Policy],
        default="spawn-pin",
        help="sticky routing policy (default spawn-pin)",
    )
    routing.add_argument(
        "--client-workers",
        type=int,
        default=8,
        metavar="K",
        help="client workers, each caching the sessions it serves (default 8)",
    )

    affinity = parser.add_argument_group("server-side affinity")
    affinity.add_argument(
        "--affinity",
        choices=[k.value for k in AffinityKind],
        default="none",
        help="what requests carry for server-side session affinity",
    )
    affinity.add_argument(
        "--scope",
        choices=("conversation", "lineage"),
        default="conversation",
        help="dynamo-nvext key: own session id, or the tree root's id",
    )
    affinity.add_argument(
        "--affinity-timeout",
        type=int,
        default=300,
        metavar="S",
        help="session_control bind timeout in seconds (default 300)",
    )
    affinity.add_argument(
        "--affinity-actions",
        choices=("bind", "open"),
        default="bind",
        help="bind (Dynamo >= 1.3) or open (Dynamo 1.2.x)",
    )
    affinity.add_argument(
        "--close-on",
        choices=("tree-final", "root-final"),
        default="tree-final",
        help="lineage close discipline; root-final reproduces the hazard",
    )
    affinity.add_argument(
        "--header-name", default="X-Session-ID", help="header name for --affinity header"
    )
    affinity.add_argument(
        "--header-source",
        choices=("own", "parent", "root"),
        default="own",
        help="which id --affinity header carries",
    )


def load_trees(args: argparse.Namespace) -> tuple[list[Tree], list[Trace]]:
    traces: list[Trace] = [load_trace(path) for path in args.trace]
    if args.synthetic or not traces:
        config = SyntheticConfig(seed=args.seed)
        if args.synthetic_trees is not None:
            config = SyntheticConfig(seed=args.seed, trees=args.synthetic_trees)
        traces.append(generate_synthetic(config))
    trees = [tree for trace in traces for tree in trace.trees]
    if not trees:
        raise SpecError("the workload has no agent trees: check the --trace files")
    return trees, traces


def replay_config(args: argparse.Namespace) -> ReplayConfig:
    return ReplayConfig(
        concurrency=args.concurrency,
        duration_s=args.duration,
        max_requests=args.requests,
        max_trees=args.max_trees,
        start_window=_window(args.start_window),
        joins=args.joins,
        speedup=args.speedup,
        warmup_s=args.warmup,
        prime=args.prime,
        seed=args.seed,
    )


def engine_config(args: argparse.Namespace) -> EngineConfig:
    return EngineConfig(
        policy=Policy(args.policy),
        client_workers=args.client_workers,
        affinity=AffinityConfig(
            kind=AffinityKind(args.affinity),
            scope=args.scope,
            timeout_s=args.affinity_timeout,
            actions=args.affinity_actions,
            close_on=args.close_on,
            header_name=args.header_name,
            header_source=args.header_source,
        ),
    )


def _window(text: str) -> tuple[float, float]:
    try:
        lo_text, hi_text = text.split(":")
        return float(lo_text), float(hi_text)
    except ValueError:
        raise SpecError(
            f"--start-window {text!r} is not LO:HI (fractions, e.g. 0:1 or 0.25:0.75)"
        ) from None


def add_cluster_options(parser: argparse.ArgumentParser, *, prefix: str) -> None:
    """The simulated cluster's knobs; `prefix` names the two that clash with the workload's
    own (`simulate --server-workers/--server-router`, `mock-server --workers/--router`)."""
    group = parser.add_argument_group("simulated cluster")
    group.add_argument(
        f"--{prefix}workers",
        dest="cluster_workers",
        type=int,
        default=8,
        metavar="N",
        help="inference workers (default 8)",
    )
    group.add_argument(
        f"--{prefix}router",
        dest="cluster_router",
        choices=_ROUTERS,
        default="round-robin",
        help="frontend router mode (default round-robin, Dynamo's default)",
    )
    group.add_argument(
        "--dp-ranks",
        type=int,
        default=1,
        metavar="N",
        help="data-parallel ranks per worker (default 1)",
    )
    group.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        metavar="X",
        help="multiply every modelled latency by X; 0 answers at once (default 1)",
    )
    group.add_argument(
        "--block-size",
        type=int,
        default=64,
        metavar="TOKENS",
        help="prefix-cache block size (default 64)",
    )
    group.add_argument(
        "--cache-blocks",
        type=int,
        default=16384,
        metavar="N",
        help="prefix-cache capacity per worker rank, in blocks (default 16384)",
    )
    group.add_argument(
        "--max-num-seqs",
        type=int,
        default=256,
        metavar="N",
        help="batch slots per worker rank (default 256)",
    )
    group.add_argument(
        "--dynamo-version",
        choices=("1.2", "1.3"),
        default="1.3",
        help="session_control dialect: 1.2 rejects `bind` with HTTP 400 (default 1.3)",
    )
    group.add_argument(
        "--session-control-kv-only",
        action="store_true",
        help="honour nvext.session_control only with the kv routers, as real Dynamo does",
    )
    group.add_argument(
        "--header-affinity-ttl",
        type=float,
        default=None,
        metavar="S",
        help="enable X-Dynamo-Session-ID affinity with this idle TTL in seconds (default off)",
    )


def cluster_config(args: argparse.Namespace, *, seed: int) -> ClusterConfig:
    return ClusterConfig(
        workers=args.cluster_workers,
        dp_ranks=args.dp_ranks,
        router=args.cluster_router,
        time_scale=args.time_scale,
        block_size_tokens=args.block_size,
        capacity_blocks=args.cache_blocks,
        max_num_seqs=args.max_num_seqs,
        dynamo_version=args.dynamo_version,
        honour_session_control=not args.session_control_kv_only,
        header_affinity_ttl_s=args.header_affinity_ttl,
        seed=seed,
    )
