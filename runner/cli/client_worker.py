"""`python -m runner client-worker`: host one client worker of a run spread over processes.

The run's orchestrator (a live replay with `fleet` set) decides every request; this process
sends the ones routed to its worker over its own connection pool, keeps its own session
copies, and reports results and heartbeats through Redis (runner/fleet). It leaves when the
run ends, or when the orchestrator has been gone for a few seconds.
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "client-worker",
        help="host one client worker of a run whose workers are separate processes",
        description="Serve client worker N of a run spread over processes: read its credits "
        "from Redis, send them, return the results. Start one per worker, on any host that "
        "reaches Redis and the endpoint; the orchestrator waits for all of them.",
    )
    parser.add_argument("--redis", required=True, metavar="URL", help="redis://host:port/db")
    parser.add_argument("--run", required=True, metavar="KEY", help="the run's fleet key")
    parser.add_argument("--worker", required=True, type=int, metavar="N", help="worker index")
    parser.add_argument(
        "--wait-s",
        type=float,
        default=30.0,
        metavar="S",
        help="how long to wait for the run's configuration (default 30)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from runner.fleet import serve_host

    if args.worker < 0:
        sys.stderr.write("error: --worker must be 0 or more\n")
        return 2
    report = serve_host(args.redis, args.run, args.worker, wait_config_s=args.wait_s)
    print(
        json.dumps(
            {
                "worker": report.worker,
                "sent": report.sent,
                "stopped": report.stopped,
                "copies": report.copies,
                "copy_bytes": report.copy_bytes,
                "rss_end_bytes": report.rss_end_bytes,
            }
        )
    )
    return 0 if report.stopped == "stop" else 1
