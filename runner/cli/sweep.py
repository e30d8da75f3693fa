"""`python -m runner sweep`: one scenario along a load axis, arms compared point by point.

Against `--endpoint URL` the points run one after another with a drain (or cool-down) between
them; with `--simulate` on the simulated cluster, in parallel processes. A line per point as it
finishes, a table, the SLO searches and a headline per arm pair at the end; `--json` and
`--csv` write the report.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Literal

from runner.cli.options import (
    add_cluster_options,
    add_endpoint_options,
    add_workload_options,
    build_spec,
    endpoint_target_from_args,
    simulated_target,
)
from runner.errors import SpecError
from runner.spec import Target
from runner.sweep import (
    Planner,
    PointResult,
    SweepReport,
    SweepSpec,
    csv_rows,
    parse_sweep,
    run_sweep,
)
from runner.sweep.spec import MAX_ARMS, MAX_LOADS, PERCENTILES, Validity

_SWEEP = SweepSpec.model_fields
# Sweep fields whose flag is not `--` plus the field's name with dashes.
_FLAGS = {
    "concurrency": "--concurrencies",
    "rate_per_s": "--rates",
    "arms": "--arm",
    "slo": "--slo-*-ms",
    "slo.goodput_fraction": "--goodput-fraction",
    "validity.max_error_share": "--max-error-share",
    "validity.max_cut_share": "--max-cut-share",
    "validity.min_coverage": "--min-coverage",
    "cooldown_s": "--cooldown",
    "drain_timeout_s": "--drain-timeout",
}


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="a load sweep: capacity curves, max goodput under an SLO, arms compared",
        description="Run one workload along a load axis (--concurrencies or --rates) for one "
        "or more arms (--arm NAME:KEY=VALUE,...), against --endpoint (points one after "
        "another, the server drained between them) or --simulate (in parallel processes).",
    )
    add_endpoint_options(parser, required=False)
    sim = parser.add_argument_group("the simulated twin")
    sim.add_argument(
        "--simulate",
        action="store_true",
        help="run the sweep on the simulated cluster instead of an endpoint",
    )
    sim.add_argument(
        "--processes",
        type=int,
        default=None,
        metavar="N",
        help="simulated points run at once (default: one per core)",
    )
    add_cluster_options(parser, prefix="server-")
    add_workload_options(parser)

    sweep = parser.add_argument_group("sweep")
    axis = sweep.add_mutually_exclusive_group(required=True)
    axis.add_argument(
        "--concurrencies",
        type=_loads,
        metavar="LIST",
        help="the load axis as lanes: 1,2,4,8 or 1..16 (every one) or 4..64:4 (every 4th)",
    )
    axis.add_argument(
        "--rates",
        type=_loads,
        metavar="LIST",
        help="the load axis as tree arrivals per second (implies --timing rate; "
        "--concurrency then caps active trees): 0.5,1,2",
    )
    sweep.add_argument(
        "--arm",
        action="append",
        default=[],
        metavar="NAME[:KEY=VALUE,...]",
        help=f"an arm and the run-spec knobs it changes, e.g. legacy:policy=legacy or "
        f"lineage:scope=lineage,affinity=dynamo-headers (nested: target.workers=4; values "
        f"are JSON when they parse); repeat for up to {MAX_ARMS} arms (default: one arm, "
        "the base)",
    )
    sweep.add_argument(
        "--mode",
        choices=("list", "auto", "slo"),
        default=_SWEEP["mode"].default,
        help="list: every load (default); auto: synchronous and saturation (the axis's "
        "highest) first, then --auto-points between; slo: bracket and bisect for the highest "
        "load meeting the --slo-*-ms thresholds",
    )
    sweep.add_argument(
        "--repeats",
        type=int,
        default=_SWEEP["repeats"].default,
        metavar="N",
        help="runs per arm and load (default 1; with 2 or more, differences inside the "
        "repeats' spread read as noise)",
    )
    sweep.add_argument(
        "--auto-points",
        type=int,
        default=_SWEEP["auto_points"].default,
        metavar="N",
        help=f"auto: points between synchronous and saturation "
        f"(default {_SWEEP['auto_points'].default})",
    )
    sweep.add_argument(
        "--goodput-fraction",
        type=float,
        default=None,
        metavar="F",
        help="share of requests that must meet every --slo-*-ms threshold for a load to "
        "meet the SLOs (default 0.95)",
    )
    sweep.add_argument(
        "--confidence",
        type=float,
        default=None,
        metavar="C",
        help="of the Wilson interval on the good share (default 0.95)",
    )
    sweep.add_argument(
        "--percentile",
        choices=PERCENTILES,
        default=_SWEEP["percentile"].default,
        help="the TTFT, ITL and tok/s-per-user percentile the table and frontiers read "
        f"(default {_SWEEP['percentile'].default})",
    )
    sweep.add_argument(
        "--gpus", type=int, default=None, metavar="N", help="the endpoint's GPUs: tok/s per GPU"
    )
    for flag, field, help_text in (
        ("--max-error-share", "max_error_share", "a point with more errors is invalid"),
        ("--max-cut-share", "max_cut_share", "a point whose stop cut more is invalid"),
        ("--min-coverage", "min_coverage", "a point measuring TTFT on fewer is invalid"),
    ):
        default = Validity.model_fields[field].default
        sweep.add_argument(
            flag,
            type=float,
            default=default,
            metavar="F",
            help=f"{help_text} (default {default:g})",
        )
    sweep.add_argument(
        "--cooldown",
        type=float,
        default=_SWEEP["cooldown_s"].default,
        metavar="S",
        help="live: the pause between points when the server's /metrics show nothing to "
        f"drain by (default {_SWEEP['cooldown_s'].default:g})",
    )
    sweep.add_argument(
        "--drain-timeout",
        type=float,
        default=_SWEEP["drain_timeout_s"].default,
        metavar="S",
        help="live: the longest wait for nothing running or queued before a point "
        f"(default {_SWEEP['drain_timeout_s'].default:g})",
    )
    out = parser.add_argument_group("output")
    out.add_argument("--json", type=Path, default=None, metavar="FILE", help="write the report")
    out.add_argument(
        "--csv", type=Path, default=None, metavar="FILE", help="write a row per arm and load"
    )
    out.add_argument("--quiet", action="store_true", help="no log lines on stderr")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    sweep = build_sweep(args)
    stop = threading.Event()
    printer = _Printer(sweep)
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        report = run_sweep(
            sweep,
            on_result=printer.point,
            log=None if args.quiet else _log,
            stop=stop,
            processes=args.processes,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    printer.report(report)
    if args.json is not None:
        _write(args.json, lambda handle: handle.write(report.model_dump_json(indent=2) + "\n"))
    if args.csv is not None:
        rows = csv_rows(report)

        def write_csv(handle: IO[str]) -> None:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]) if rows else ["arm"])
            writer.writeheader()
            writer.writerows(rows)

        _write(args.csv, write_csv)
    return 130 if report.status == "cancelled" else 0


def build_sweep(args: argparse.Namespace) -> SweepSpec:
    """The sweep the flags describe; errors name the flags."""
    if args.simulate == (args.endpoint is not None):
        raise SpecError("give --endpoint URL (a live sweep) or --simulate, one of the two")
    if args.rates is not None:
        if args.rate is not None:
            raise SpecError("--rates is the load axis: leave out --rate")
        if args.timing not in ("lanes", "rate"):  # lanes is the flag's default
            raise SpecError(f"--rates runs timing rate: leave out --timing {args.timing}")
        args.timing, args.rate = "rate", args.rates[0]
    elif args.concurrency is not None:
        raise SpecError("--concurrencies is the load axis: leave out --concurrency")
    target: Target = endpoint_target_from_args(args) if args.endpoint else simulated_target(args)
    base = build_spec(args, target=target)
    thresholds = {
        "ttft_ms": args.slo_ttft_ms,
        "itl_ms": args.slo_itl_ms,
        "latency_ms": args.slo_latency_ms,
    }
    slo: dict[str, Any] | None = None
    if any(value is not None for value in thresholds.values()):
        slo = {k: v for k, v in thresholds.items() if v is not None}
        for name, value in (
            ("goodput_fraction", args.goodput_fraction),
            ("confidence", args.confidence),
        ):
            if value is not None:
                slo[name] = value
    elif args.goodput_fraction is not None or args.confidence is not None:
        raise SpecError("--goodput-fraction and --confidence need an --slo-*-ms threshold")
    data: dict[str, Any] = {
        "base": base,
        "concurrency" if args.concurrencies is not None else "rate_per_s": (
            args.concurrencies if args.concurrencies is not None else args.rates
        ),
        "mode": args.mode,
        "repeats": args.repeats,
        "auto_points": args.auto_points,
        "percentile": args.percentile,
        "gpus": args.gpus,
        "slo": slo,
        "validity": {
            "max_error_share": args.max_error_share,
            "max_cut_share": args.max_cut_share,
            "min_coverage": args.min_coverage,
        },
        "cooldown_s": args.cooldown,
        "drain_timeout_s": args.drain_timeout,
    }
    if args.arm:
        data["arms"] = [_arm(text) for text in args.arm]
    try:
        return parse_sweep(data)
    except SpecError as exc:
        raise SpecError(
            "; ".join(_problem(field, message) for field, message in exc.fields.items()),
            fields=exc.fields,
        ) from None


def _problem(field: str, message: str) -> str:
    """A sweep spec's problem as the flags name it (a problem of the whole sweep, such as an
    arm's knob at some load, reads as it is)."""
    if field == "sweep":
        return message
    head = field.split(".")[0]
    flag = _FLAGS.get(field) or _FLAGS.get(head) or "--" + head.replace("_", "-")
    return f"{flag}: {message}"


_RANGE = re.compile(r"^(?P<lo>[0-9.]+)\.\.(?P<hi>[0-9.]+)(?::(?P<step>[0-9.]+))?$")


def _loads(text: str) -> list[float]:
    """`1,2,4`, `1..16` (step 1), `4..64:4`, or a mix: the loads, in the order given."""
    loads: list[float] = []
    try:
        for part in text.split(","):
            part = part.strip()
            match = _RANGE.match(part)
            if match is None:
                loads.append(float(part))
                continue
            lo, hi = float(match["lo"]), float(match["hi"])
            step = float(match["step"] or 1)
            if step <= 0 or hi < lo:
                raise ValueError
            count = int((hi - lo) / step + 1e-9) + 1
            if count > MAX_LOADS:
                raise argparse.ArgumentTypeError(f"{part!r} holds more than {MAX_LOADS} loads")
            loads.extend(round(lo + k * step, 9) for k in range(count))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a list of loads (1,2,4 or LO..HI or LO..HI:STEP)"
        ) from None
    return loads


_PAIR = re.compile(r",(?=[A-Za-z_][\w.]*=)")  # a comma that starts the next KEY=


def _arm(text: str) -> dict[str, Any]:
    """`NAME` or `NAME:KEY=VALUE,KEY=VALUE`; dotted keys nest (`target.workers=4`), values
    are JSON when they parse (numbers, true, lists) and text otherwise."""
    name, _, rest = text.partition(":")
    overrides: dict[str, Any] = {}
    for pair in _PAIR.split(rest) if rest else ():
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise SpecError(f"--arm {text!r}: write NAME or NAME:KEY=VALUE[,KEY=VALUE...]")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        *parents, leaf = key.split(".")
        node = overrides
        for parent in parents:
            node = node.setdefault(parent, {})
            if not isinstance(node, dict):
                raise SpecError(f"--arm {text!r}: {key} sets inside a value already given")
        node[leaf] = value
    return {"name": name, "overrides": overrides}


def _log(level: Literal["info", "warning", "error"], message: str) -> None:
    sys.stderr.write(f"{level}: {message}\n")
    sys.stderr.flush()


class _Printer:
    """A line per point as it finishes, then the aggregated table, frontiers, searches and
    headlines."""

    def __init__(self, sweep: SweepSpec) -> None:
        self.sweep = sweep
        p = sweep.percentile
        self.columns: list[tuple[str, str, str]] = [
            ("req/s", "requests_per_s", "{:.3g}"),
            ("out tok/s", "output_tokens_per_s", "{:,.0f}"),
            (f"tok/s/user {p}", "tokens_per_s_per_user", "{:.3g}"),
            (f"TTFT {p} ms", f"ttft_{p}_ms", "{:,.0f}"),
            (f"ITL {p} ms", f"itl_{p}_ms", "{:.3g}"),
            ("good", "good_ratio", "{:.1%}"),
            ("cache hit", "prefix_cache_hit_ratio", "{:.1%}"),
            ("child 1st hit", "child_first_turn_hit_ratio", "{:.1%}"),
            ("switches", "worker_switches", "{:,.0f}"),
            ("orphans", "orphaned_session_copies", "{:,.0f}"),
        ]
        if sweep.gpus:
            self.columns.insert(2, ("out tok/s/GPU", "output_tokens_per_s_per_gpu", "{:,.1f}"))
        self.printed = 0

    def point(self, result: PointResult, planner: Planner) -> None:
        point = result.point
        self.printed += 1
        load = self.sweep.load_text(point.load, point.phase)
        cells = "  ".join(
            f"{title} {_cell(fmt, result.figures.get(name))}" for title, name, fmt in self.columns
        )
        verdict = "ok" if result.valid else f"INVALID ({result.invalid_reason})"
        _out(
            f"[{self.printed}] {point.arm} {load} #{point.repeat + 1} ({point.phase}, "
            f"{result.wall_s:.1f} s): {cells}  {verdict}"
        )

    def report(self, report: SweepReport) -> None:
        sweep = self.sweep
        header = ["arm", sweep.axis, "runs", *(title for title, _, _ in self.columns), "valid"]
        rows = []
        for row in report.aggregates:
            cells = [row.arm, row.label, f"{row.valid_repeats}/{row.repeats}"]
            for _, name, fmt in self.columns:
                spread = row.figures.get(name)
                if spread is None:
                    cells.append("-")
                elif spread.n > 1:
                    cells.append(f"{_cell(fmt, spread.mean)}±{_cell(fmt, spread.std)}")
                else:
                    cells.append(_cell(fmt, spread.mean))
            verdict = "" if row.verdict is None else (" meets" if row.verdict.meets else " misses")
            cells.append(("yes" if row.valid else f"no: {row.invalid_reason}") + verdict)
            rows.append(cells)
        _out("")
        _out(f"sweep {report.status}: {report.runs} runs in {report.wall_s:.1f} s")
        _table(header, rows)
        for arm, points in report.frontiers.items():
            path = ", ".join(
                f"{p.label} ({p.tokens_per_s_per_user:.3g} tok/s/user, {p.throughput:,.0f} tok/s)"
                for p in points
            )
            _out(f"frontier {arm}: {path or 'no valid point'}")
        for search in report.searches.values():
            _out(f"slo search {search.statement}")
        for headline in report.headlines:
            _out(f"headline: {headline.text}")


def _cell(fmt: str, value: float | None) -> str:
    return "-" if value is None else fmt.format(value)


def _table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]
    for line in (header, *rows):
        _out("  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _write(path: Path, write: Callable[[IO[str]], object]) -> None:
    try:
        with path.open("w", encoding="utf-8", newline="") as handle:
            write(handle)
    except OSError as exc:
        raise SpecError(f"cannot write {path}: {exc.strerror or exc}") from None
