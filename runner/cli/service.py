"""`python -m runner service ...`: the web service from the command line, over its HTTP API
(runner/service): log in with a token, list, launch (A/B too), watch with live figures and exit
by the verdict, export, compare. Its runs are the service's runs, on its dashboard."""

from __future__ import annotations

import argparse

from runner.service import commands, sweeps
from runner.service.config import DEFAULT_URL, TOKEN_ENV, URL_ENV, config_path


def _connection_options(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """--url and --token, accepted before the subcommand and after it. Below it they default
    to SUPPRESS: argparse copies a subcommand's defaults over what was parsed before it, so a
    default there would erase `service --url X runs`."""
    default = argparse.SUPPRESS if suppress else None
    group = parser.add_argument_group("service")
    group.add_argument(
        "--url",
        default=default,
        metavar="URL",
        help=f"the service's address (default ${URL_ENV}, else the one `login` kept, else "
        f"{DEFAULT_URL})",
    )
    group.add_argument(
        "--token",
        default=default,
        metavar="TOKEN",
        help=f"an API token (default ${TOKEN_ENV}, else the one `login` kept for the URL); "
        "on the command line it shows in the process list",
    )


def _follow_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("watching")
    group.add_argument(
        "--every",
        type=_positive_seconds,
        default=1.0,
        metavar="S",
        help="ask the service for the run's figures every S seconds (default 1)",
    )
    group.add_argument(
        "--baseline",
        default="",
        metavar="RUN",
        help="judge against this run instead of the scenario's baseline",
    )
    group.add_argument("--quiet", action="store_true", help="no progress line on stderr")


def _launch_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario", help="scenario name or id (`service scenarios` lists them)")
    parser.add_argument(
        "--endpoint",
        default=commands.SIMULATED,
        metavar="NAME|ID",
        help="endpoint name or id, or `simulated` for the simulated cluster (the default)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KNOB=VALUE",
        help="override a RunSpec knob (repeatable): VALUE is JSON when it parses, else text; "
        "a dotted KNOB reaches inside (target.workers=4)",
    )
    parser.add_argument(
        "--overrides",
        default=None,
        metavar="JSON",
        help="""overrides as one JSON object ('{"duration_s": 30}'); --set applies on top""",
    )
    parser.add_argument(
        "--wait",
        action="store_true",
        help="follow the run to its end and exit by its verdict (0 pass, 1 fail)",
    )


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0.05 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"{text}: between 0.05 and 3600 seconds")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= 500:
        raise argparse.ArgumentTypeError(f"{text}: between 1 and 500")
    return value


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "service",
        help="the web service from the command line: login, list, launch, watch, export",
        description="Drive a running aiperf-web service over its HTTP API (/api/v1): its runs "
        "are the service's, on its dashboard. Exit codes: 0 done (a watched run passed its "
        "verdict), 1 a watched run's verdict is fail, 2 the command could not do what was "
        f"asked (no connection, a refused token, an unknown name). Config: {config_path()}.",
    )
    _connection_options(parser, suppress=False)
    parser.set_defaults(handler=run)
    commands_ = parser.add_subparsers(dest="service_command", metavar="COMMAND")
    commands_.required = True

    def sub(name: str, help_: str, description: str | None = None) -> argparse.ArgumentParser:
        child = commands_.add_parser(name, help=help_, description=description or help_)
        _connection_options(child, suppress=True)
        return child

    p = sub(
        "login",
        "check an API token and keep it, with the server's URL, in the config file",
        f"Check the token against the server, then keep it in {config_path()} (mode 0600), "
        f"with the URL as the default server. Without --token or ${TOKEN_ENV}, it asks (or "
        "reads one line from stdin).",
    )
    p.set_defaults(service_handler=commands.login)

    p = sub("logout", "forget the token kept for the server")
    p.set_defaults(service_handler=commands.logout)

    p = sub("scenarios", "list the scenarios of your teams")
    p.add_argument("--tag", default="", help="only those with this tag")
    p.add_argument("--search", default="", metavar="TEXT", help="name or description holds it")
    p.add_argument("--json", action="store_true", help="print the API's answer as JSON")
    p.set_defaults(service_handler=commands.scenarios)

    p = sub("endpoints", "list the endpoints of your teams")
    p.add_argument("--json", action="store_true", help="print the API's answer as JSON")
    p.set_defaults(service_handler=commands.endpoints)

    p = sub("runs", "list runs, newest first")
    p.add_argument("--status", default="", help="queued, running, succeeded, failed or cancelled")
    p.add_argument("--scenario", default="", metavar="NAME|ID")
    p.add_argument("--endpoint", default="", metavar="NAME|ID|simulated")
    p.add_argument("--tag", default="")
    p.add_argument("--limit", type=_positive_int, default=20, metavar="N", help="default 20")
    p.add_argument("--json", action="store_true", help="print the API's answer as JSON")
    p.set_defaults(service_handler=commands.runs)

    p = sub("show", "a run's status, figures and verdict")
    p.add_argument("run", help="run id")
    p.add_argument("--json", action="store_true", help="print the API's answer as JSON")
    p.set_defaults(service_handler=commands.show)

    p = sub(
        "launch",
        "launch a run of a scenario (on an endpoint or the simulated cluster)",
        "Launch a run as the Launch page does. It prints the run's id and page; with --wait "
        "it follows the run with a progress line and exits by its verdict.",
    )
    _launch_options(p)
    p.add_argument("--tag", action="append", default=[], help="tag the run (repeatable)")
    p.add_argument("--notes", default="", help="notes kept with the run")
    p.add_argument(
        "--allow-overlap",
        action="store_true",
        help="start even while another run uses the endpoint (recorded on both runs)",
    )
    _follow_options(p)
    p.add_argument("--json", action="store_true", help="print the run (and verdict) as JSON")
    p.set_defaults(service_handler=commands.launch)

    p = sub(
        "ab",
        "a paired A/B launch: one knob, two runs, one after the other",
        "Two runs of one scenario, target and seed that differ in --knob: A legacy then B "
        "spawn-pin (policy), or A conversation then B lineage (scope), unless --a/--b say "
        "otherwise. With --wait both are followed, compared, and the exit code is B's verdict.",
    )
    _launch_options(p)
    p.add_argument("--knob", required=True, choices=("policy", "scope"))
    p.add_argument("--a", default=None, metavar="VALUE", help="A's value of the knob")
    p.add_argument("--b", default=None, metavar="VALUE", help="B's value of the knob")
    _follow_options(p)
    p.add_argument("--json", action="store_true", help="print the pair (and results) as JSON")
    p.set_defaults(service_handler=commands.ab)

    p = sub(
        "watch",
        "follow a run to its end with live figures; exit by its verdict",
        "Follow a run: a progress line (requests, errors, TTFT p50, orphaned session copies, "
        "worker switches) on stderr, then its figures and verdict on stdout. Exit 0 when the "
        "verdict is pass, 1 when it is fail. Ctrl-C stops watching, not the run.",
    )
    p.add_argument("run", help="run id")
    _follow_options(p)
    p.add_argument("--json", action="store_true", help="print the run and verdict as JSON")
    p.set_defaults(service_handler=commands.watch)

    p = sub("cancel", "cancel a queued or running run (it keeps what it measured)")
    p.add_argument("run", help="run id")
    p.set_defaults(service_handler=commands.cancel)

    p = sub(
        "verify",
        "the service recomputes a run's summary from its stored records; exit 1 on a difference",
        "Counts, hit ratios and exact TTFT/ITL/latency percentiles recomputed by the service "
        "from the run's stored records (GET /api/v1/runs/ID/verify), each with its difference "
        "against the allowed error (the histogram's 0.54 % for percentiles, none for counts), "
        "as `python -m runner verify` prints a local run's. Exit 0 when every figure agrees, "
        "1 when one does not.",
    )
    p.add_argument("run", help="run id (an ended run: one without a summary is refused, 409)")
    p.add_argument("--json", action="store_true", help="print the API's answer as JSON")
    p.set_defaults(service_handler=commands.verify)

    p = sub("export", "a run's summary or per-request records, as the API serves them")
    p.add_argument("run", help="run id")
    p.add_argument(
        "--format",
        choices=commands.EXPORTS,
        default=commands.EXPORTS[0],
        help=f"default {commands.EXPORTS[0]}",
    )
    p.add_argument(
        "-o", "--output", default=None, metavar="FILE", help="write here (default stdout)"
    )
    p.add_argument(
        "--include-warmup", action="store_true", help="records.jsonl: warmup requests too"
    )
    p.set_defaults(service_handler=commands.export)

    _sweep_parser(sub("sweep", "sweeps: launch, list, show, watch, cancel, export"))

    p = sub("compare", "key figures of two or more runs, with changes against the first")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run ids; the first is the reference")
    p.add_argument("--json", action="store_true", help="print the API's answer as JSON")
    p.set_defaults(service_handler=commands.compare)


def _sweep_parser(parser: argparse.ArgumentParser) -> None:
    """`service sweep ...` (runner/service/sweeps.py): the service's sweeps (issue 20)."""
    commands_ = parser.add_subparsers(dest="sweep_command", metavar="COMMAND")
    commands_.required = True

    def sub(name: str, help_: str, description: str | None = None) -> argparse.ArgumentParser:
        child = commands_.add_parser(name, help=help_, description=description or help_)
        _connection_options(child, suppress=True)
        return child

    p = sub(
        "launch",
        "launch a sweep of a scenario along a load axis, arms compared point by point",
        "Each point is a run of the scenario with the arm's overrides and the load. --spec "
        "reads the sweep's fields (docs/sweep-spec.schema.json without base) from a JSON file; "
        "the options set them on top. With --wait it prints a row per point as it ends, then "
        "the headlines, and exits by the sweep's verdict (0 pass, 1 fail).",
    )
    _launch_options(p)
    p.add_argument("--spec", default=None, metavar="FILE", help="sweep fields as JSON")
    p.add_argument("--concurrency", default=None, metavar="1,2,4", help="the load axis: lanes")
    p.add_argument("--rate", default=None, metavar="0.5,1,2", help="the load axis: trees/s")
    p.add_argument(
        "--arm",
        action="append",
        default=[],
        metavar="NAME:KNOB=VALUE[,...]",
        help="an arm (repeatable), e.g. legacy:policy=legacy; NAME:{JSON} also works",
    )
    p.add_argument("--repeats", type=_positive_int, default=None, metavar="N")
    p.add_argument("--mode", choices=("list", "auto", "slo"), default=None)
    p.add_argument("--slo-ttft-ms", type=float, default=None, metavar="MS")
    p.add_argument("--slo-itl-ms", type=float, default=None, metavar="MS")
    p.add_argument("--slo-latency-ms", type=float, default=None, metavar="MS")
    p.add_argument("--goodput-fraction", type=float, default=None, metavar="F")
    p.add_argument("--every", type=_positive_seconds, default=2.0, metavar="S")
    p.add_argument("--quiet", action="store_true", help="no line per point made on stderr")
    p.add_argument("--json", action="store_true", help="print the sweep as JSON")
    p.set_defaults(service_handler=sweeps.launch)

    p = sub("list", "the sweeps of your teams, newest first")
    p.add_argument("--limit", type=_positive_int, default=20, metavar="N")
    p.add_argument("--json", action="store_true")
    p.set_defaults(service_handler=sweeps.listing)

    p = sub("show", "a sweep's status, points, headlines and verdict")
    p.add_argument("sweep", help="sweep id")
    p.add_argument("--json", action="store_true", help="print the API's answer as JSON")
    p.set_defaults(service_handler=sweeps.show)

    p = sub(
        "watch",
        "follow a sweep: a row per point as it ends; exit by its verdict",
        "A row per point as its run ends (arm, load, run status, req/s, TTFT, orphaned copies, "
        "validity), then the headlines and the verdict. Exit 0 when the sweep succeeded with "
        "every point valid, 1 otherwise. Ctrl-C stops watching, not the sweep.",
    )
    p.add_argument("sweep", help="sweep id")
    p.add_argument("--every", type=_positive_seconds, default=2.0, metavar="S")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--json", action="store_true", help="print the sweep at its end as JSON")
    p.set_defaults(service_handler=sweeps.watch)

    p = sub("cancel", "cancel a sweep as a whole (its queued and running points too)")
    p.add_argument("sweep", help="sweep id")
    p.set_defaults(service_handler=sweeps.cancel)

    p = sub("export", "a sweep's table per arm and load (csv) or its whole report (json)")
    p.add_argument("sweep", help="sweep id")
    p.add_argument("--format", choices=("csv", "json"), default="csv")
    p.add_argument("-o", "--output", default=None, metavar="FILE", help="default stdout")
    p.set_defaults(service_handler=sweeps.export)


def run(args: argparse.Namespace) -> int:
    return int(args.service_handler(args))
