"""`python -m runner mock-server`: the simulated cluster served over OpenAI-compatible HTTP.

Parses options into one MockServerConfig and hands it to `runner.mockserver.serve`; prints
one line with the URL once listening, and stops cleanly on Ctrl-C. Bad options exit 2 with one
line (the configs validate themselves and raise SpecError).
"""

from __future__ import annotations

import argparse
import sys

from runner.cluster import ClusterConfig
from runner.errors import SpecError
from runner.mockserver import FaultConfig, MockServerConfig, serve

__all__ = ["add_parser", "config_from_args", "run"]

_ROUTERS = ("round-robin", "random", "least-loaded", "kv", "kv-approx")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "mock-server",
        help="serve the simulated inference cluster over OpenAI-compatible HTTP",
        description="An OpenAI-compatible mock endpoint over the simulated cluster: "
        "SSE streaming, cached tokens, Dynamo session affinity, fault injection.",
    )
    listen = parser.add_argument_group("listening")
    listen.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    listen.add_argument(
        "--port", type=int, default=8000, help="port to bind; 0 picks a free one (default 8000)"
    )
    listen.add_argument(
        "--model", default="mock-model", help="served model name (default mock-model)"
    )
    listen.add_argument(
        "--api-key", default=None, metavar="KEY", help="require `Authorization: Bearer KEY`"
    )
    listen.add_argument(
        "--default-max-tokens",
        type=int,
        default=16,
        metavar="N",
        help="output tokens when a request gives no max_tokens (default 16)",
    )

    cluster = parser.add_argument_group("simulated cluster")
    cluster.add_argument(
        "--workers", type=int, default=8, metavar="N", help="inference workers (default 8)"
    )
    cluster.add_argument(
        "--dp-ranks",
        type=int,
        default=1,
        metavar="N",
        help="data-parallel ranks per worker (default 1)",
    )
    cluster.add_argument(
        "--router",
        choices=_ROUTERS,
        default="round-robin",
        help="frontend router mode (default round-robin, Dynamo's default)",
    )
    cluster.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        metavar="X",
        help="multiply every modelled latency by X; 0 answers at once (default 1)",
    )
    cluster.add_argument(
        "--block-size",
        type=int,
        default=64,
        metavar="TOKENS",
        help="prefix-cache block size (default 64)",
    )
    cluster.add_argument(
        "--cache-blocks",
        type=int,
        default=16384,
        metavar="N",
        help="prefix-cache capacity per worker rank, in blocks (default 16384)",
    )
    cluster.add_argument(
        "--max-num-seqs",
        type=int,
        default=256,
        metavar="N",
        help="batch slots per worker rank (default 256)",
    )
    cluster.add_argument(
        "--dynamo-version",
        choices=("1.2", "1.3"),
        default="1.3",
        help="session_control dialect: 1.2 rejects `bind` with HTTP 400 (default 1.3)",
    )
    cluster.add_argument(
        "--session-control-kv-only",
        action="store_true",
        help="honour nvext.session_control only with --router kv/kv-approx, as real Dynamo does",
    )
    cluster.add_argument(
        "--header-affinity-ttl",
        type=float,
        default=None,
        metavar="S",
        help="enable X-Dynamo-Session-ID affinity with this idle TTL in seconds (default off)",
    )
    cluster.add_argument(
        "--seed", type=int, default=0, help="seed of the random router and of faults"
    )

    faults = parser.add_argument_group("fault injection (fractions 0-1 of completion requests)")
    faults.add_argument(
        "--error-rate", type=float, default=0.0, metavar="P", help="answer HTTP 500"
    )
    faults.add_argument(
        "--rate-limit-rate",
        type=float,
        default=0.0,
        metavar="P",
        help="answer HTTP 429 with Retry-After",
    )
    faults.add_argument(
        "--overload-rate", type=float, default=0.0, metavar="P", help="answer HTTP 503"
    )
    faults.add_argument(
        "--disconnect-rate",
        type=float,
        default=0.0,
        metavar="P",
        help="drop the connection mid-answer, without the final chunk or [DONE]",
    )
    faults.add_argument(
        "--stall-rate", type=float, default=0.0, metavar="P", help="pause mid-stream for --stall-s"
    )
    faults.add_argument(
        "--stall-s",
        type=float,
        default=1.0,
        metavar="S",
        help="length of a stall in seconds (default 1)",
    )
    faults.add_argument(
        "--retry-after",
        type=int,
        default=1,
        metavar="S",
        help="Retry-After of an injected 429 (default 1)",
    )
    parser.set_defaults(handler=run)


def config_from_args(args: argparse.Namespace) -> MockServerConfig:
    """The options as one validated MockServerConfig (SpecError on a bad value)."""
    if not 0 <= args.port <= 65535:
        raise SpecError(f"--port must be 0..65535, got {args.port}")
    return MockServerConfig(
        model=args.model,
        api_key=args.api_key,
        default_max_tokens=args.default_max_tokens,
        cluster=ClusterConfig(
            workers=args.workers,
            dp_ranks=args.dp_ranks,
            router=args.router,
            time_scale=args.time_scale,
            block_size_tokens=args.block_size,
            capacity_blocks=args.cache_blocks,
            max_num_seqs=args.max_num_seqs,
            dynamo_version=args.dynamo_version,
            honour_session_control=not args.session_control_kv_only,
            header_affinity_ttl_s=args.header_affinity_ttl,
            seed=args.seed,
        ),
        faults=FaultConfig(
            error_rate=args.error_rate,
            rate_limit_rate=args.rate_limit_rate,
            overload_rate=args.overload_rate,
            disconnect_rate=args.disconnect_rate,
            stall_rate=args.stall_rate,
            stall_s=args.stall_s,
            retry_after_s=args.retry_after,
            seed=args.seed,
        ),
    )


def run(args: argparse.Namespace) -> int:
    config = config_from_args(args)

    def ready(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    serve(config, host=args.host, port=args.port, ready=ready)
    return 0
