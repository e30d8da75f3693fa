"""`python -m runner client-worker`: host client workers of a run spread over processes.

The run's orchestrator (a live replay with `fleet` set) decides every request; this process
serves the client workers it is given (`--worker N`, repeatable): each sends the requests
routed to it over its own connection pool, keeps its own session copies, and reports results
and heartbeats through Redis (runner/fleet), all on this process's one event loop. It leaves
when the run ends, or when the orchestrator has been gone for a few seconds.

The run's key (which opens the configuration the orchestrator sealed into Redis) comes from
the environment, AIPERF_FLEET_SECRET, never from the command line, which every user of the
machine can read; the orchestrator that starts local hosts sets it for them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "client-worker",
        help="host client workers of a run whose workers are separate processes",
        description="Serve client workers of a run spread over processes: read each one's "
        "credits from Redis, send them, return the results. Give each worker this process "
        "serves with --worker (repeat it to serve several together: each keeps its own "
        "connections, session copies and heartbeat; RSS and CPU are the process's). Start "
        "processes covering every worker, on any host that reaches Redis and the endpoint; "
        "the orchestrator waits for all of them. Prints one JSON line per worker served. "
        "The run's key comes from the environment variable AIPERF_FLEET_SECRET.",
    )
    parser.add_argument("--redis", required=True, metavar="URL", help="redis://host:port/db")
    parser.add_argument("--run", required=True, metavar="KEY", help="the run's fleet key")
    parser.add_argument(
        "--worker",
        required=True,
        type=int,
        action="append",
        dest="workers",
        metavar="N",
        help="a client worker index this process serves (repeatable: --worker 0 --worker 1)",
    )
    parser.add_argument(
        "--wait-s",
        type=float,
        default=30.0,
        metavar="S",
        help="how long to wait for the run's configuration (default 30)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from runner.fleet import serve_hosts
    from runner.fleet.host import SECRET_ENV

    if min(args.workers) < 0 or len(set(args.workers)) != len(args.workers):
        sys.stderr.write("error: each --worker must be 0 or more, and given once\n")
        return 2
    secret = os.environ.get(SECRET_ENV, "")
    if not secret:
        sys.stderr.write(
            f"error: set {SECRET_ENV} to the run's key (the orchestrator that made the run "
            "has it; it never goes through Redis)\n"
        )
        return 2
    reports = serve_hosts(
        args.redis, args.run, args.workers, secret=secret, wait_config_s=args.wait_s
    )
    for report in reports:
        line = {
            "worker": report.worker,
            "sent": report.sent,
            "stopped": report.stopped,
            "copies": report.copies,
            "copy_bytes": report.copy_bytes,
            "copy_held_bytes": report.copy_held_bytes,
            "rss_end_bytes": report.rss_end_bytes,
        }
        print(json.dumps(line))
    return 0 if all(report.stopped == "stop" for report in reports) else 1
