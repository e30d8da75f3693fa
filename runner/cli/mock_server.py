"""`python -m runner mock-server`: the simulated cluster served over OpenAI-compatible HTTP.

Parses options into one MockServerConfig and hands it to `runner.mockserver.serve`; prints
one line with the URL once listening, and stops cleanly on Ctrl-C. Bad options exit 2 with one
line (the configs validate themselves and raise SpecError).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from runner.cli.options import add_cluster_options, simulated_target
from runner.errors import SpecError

if TYPE_CHECKING:  # the server stack (uvicorn, uvloop) loads only when this command runs
    from runner.mockserver import MockServerConfig

__all__ = ["add_parser", "config_from_args", "run"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "mock-server",
        help="serve the simulated inference cluster over OpenAI-compatible HTTP",
        description="An OpenAI-compatible mock endpoint over the simulated cluster: "
        "SSE streaming, cached tokens, Dynamo session affinity as one generation speaks it "
        "(--dynamo-version: 1.2 session_control open/close, bind-era open/bind/close, 1.6 "
        "X-Dynamo-Session-ID headers), fault injection.",
    )
    listen = parser.add_argument_group("listening")
    listen.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    listen.add_argument(
        "--port", type=int, default=8000, help="port to bind; 0 picks a free one (default 8000)"
    )
    listen.add_argument(
        "--processes",
        type=int,
        default=1,
        metavar="N",
        help="HTTP front processes sharing the port (SO_REUSEPORT), this one owning the "
        "cluster state so every answer is what one process gives; for loads one accept loop "
        "cannot take (default 1: one process)",
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

    add_cluster_options(parser, prefix="")
    parser.add_argument(
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
    from runner.mockserver import FaultConfig, MockServerConfig

    if not 0 <= args.port <= 65535:
        raise SpecError(f"--port must be 0..65535, got {args.port}")
    if not 1 <= args.processes <= 64:
        raise SpecError(f"--processes must be 1..64, got {args.processes}")
    return MockServerConfig(
        model=args.model,
        api_key=args.api_key,
        default_max_tokens=args.default_max_tokens,
        cluster=simulated_target(args).cluster_config(seed=args.seed),
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
    from runner.mockserver import serve

    config = config_from_args(args)

    def ready(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    serve(config, host=args.host, port=args.port, ready=ready, processes=args.processes)
    return 0
