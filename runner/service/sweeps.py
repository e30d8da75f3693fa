"""`python -m runner service sweep launch|show|watch|cancel|export|list`: sweeps of the service
(issue 20) from the command line, a pure HTTP client of /api/v1/sweeps like the run commands
(runner/service/commands.py, whose exit codes it keeps: 0 done and the sweep's verdict pass, 1
its verdict fail or it failed, 2 the command could not do what was asked, 130 Ctrl-C)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from runner.errors import BadInput
from runner.service.client import ServiceClient
from runner.service.commands import (
    CLI,
    EXIT_FAIL,
    EXIT_INTERRUPTED,
    EXIT_PASS,
    _connect,
    _endpoint_id,
    _scenario_id,
    overrides_from,
)
from runner.service.display import table

__all__ = [
    "FINAL",
    "arms_from",
    "cancel",
    "export",
    "launch",
    "listing",
    "point_rows",
    "show",
    "sweep_body",
    "watch",
]

FINAL = ("succeeded", "failed", "cancelled")


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")


def _loads(text: str, *, option: str) -> list[float | int]:
    values: list[float | int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            number = float(part)
        except ValueError:
            raise BadInput(f"{option} {text!r}: {part!r} is not a number (e.g. 1,2,4,8)") from None
        values.append(int(number) if number.is_integer() else number)
    if not values:
        raise BadInput(f"{option}: give at least one value, e.g. 1,2,4,8")
    return values


def arms_from(items: list[str]) -> list[dict[str, Any]]:
    """--arm NAME:KNOB=VALUE[,KNOB=VALUE...] (as `python -m runner sweep --arm`), or
    --arm NAME:{JSON overrides}."""
    arms: list[dict[str, Any]] = []
    for item in items:
        name, sep, rest = item.partition(":")
        if not name.strip():
            raise BadInput(f"--arm {item!r}: write NAME:KNOB=VALUE, e.g. legacy:policy=legacy")
        overrides: dict[str, Any] = {}
        rest = rest.strip()
        if sep and rest.startswith("{"):
            overrides = overrides_from(rest, [])
        elif sep and rest:
            overrides = overrides_from(None, [p for p in rest.split(",") if p.strip()])
        arms.append({"name": name.strip(), "overrides": overrides})
    return arms


def sweep_body(args: argparse.Namespace) -> dict[str, Any]:
    """The API's `sweep` object: --spec FILE (JSON, without base) with the options on top."""
    body: dict[str, Any] = {}
    if args.spec:
        try:
            loaded = json.loads(Path(args.spec).read_text("utf-8"))
        except OSError as exc:
            raise BadInput(f"--spec {args.spec}: {exc.strerror or exc}") from None
        except json.JSONDecodeError as exc:
            raise BadInput(
                f"--spec {args.spec} is not JSON ({exc.msg}, line {exc.lineno})"
            ) from None
        if not isinstance(loaded, dict):
            raise BadInput(f"--spec {args.spec}: a JSON object of sweep fields")
        body = loaded
    if args.concurrency:
        body["concurrency"] = _loads(args.concurrency, option="--concurrency")
    if args.rate:
        body["rate_per_s"] = _loads(args.rate, option="--rate")
    if args.arm:
        body["arms"] = arms_from(args.arm)
    if args.repeats is not None:
        body["repeats"] = args.repeats
    if args.mode:
        body["mode"] = args.mode
    slo = {
        key: value
        for key, value in (
            ("ttft_ms", args.slo_ttft_ms),
            ("itl_ms", args.slo_itl_ms),
            ("latency_ms", args.slo_latency_ms),
            ("goodput_fraction", args.goodput_fraction),
        )
        if value is not None
    }
    if slo:
        body["slo"] = {**body.get("slo", {}), **slo}
    if "concurrency" not in body and "rate_per_s" not in body:
        raise BadInput("give the load axis: --concurrency 1,2,4,8 or --rate 0.5,1,2 (or --spec)")
    return body


def _title(sweep: dict[str, Any]) -> str:
    return f"sweep {sweep['id']} ({sweep['name']}, {sweep['mode']} on {sweep['axis']})"


def point_rows(sweep: dict[str, Any]) -> list[list[str]]:
    """One row per point made: #, arm, load, repeat, run status, validity, req/s, TTFT p90
    (the sweep's percentile), orphaned copies."""
    percentile = sweep.get("percentile") or "p90"
    rows = []
    for point in sweep["points"]:
        figures = point.get("figures") or {}

        def fig(name: str, digits: int = 1, figures: dict[str, Any] = figures) -> str:
            value = figures.get(name)
            return "—" if value is None else f"{value:,.{digits}f}"

        if point["valid"] is None:
            valid = "…"
        elif point["valid"]:
            valid = "valid"
        else:
            valid = f"invalid: {point['invalid_reason']}"
        rows.append(
            [
                str(point["seq"] + 1),
                point["arm"],
                point["label"],
                str(point["repeat"] + 1),
                point["run_status"] or "—",
                fig("requests_per_s", 2),
                fig(f"ttft_{percentile}_ms"),
                fig("orphaned_session_copies", 0),
                valid,
            ]
        )
    return rows


_HEADER = ["#", "arm", "load", "rep", "run", "req/s", "TTFT ms", "orphans", "valid"]
_WIDTHS = [3, 14, 12, 3, 9, 9, 9, 7, 0]


def _fixed(row: list[str]) -> str:
    """A row in fixed columns, so rows printed one at a time line up under the header."""
    return "  ".join(c.ljust(w) for c, w in zip(row, _WIDTHS, strict=True)).rstrip()


def _summary(client: ServiceClient, sweep: dict[str, Any]) -> None:
    _out(f"{_title(sweep)} {sweep['status']}")
    if sweep["reason"]:
        _out(f"  {sweep['reason']}")
    if sweep["points"]:
        _out(table(_HEADER, point_rows(sweep)))
    for headline in sweep["headlines"]:
        _out(f"headline: {headline}")
    if sweep["verdict"]:
        _out(f"verdict: {sweep['verdict']}: {sweep['verdict_message']}")
    sweep_id = sweep["id"]
    _out(f"  {client.page_url(f'/sweeps/{sweep_id}/')}")


def _exit_code(sweep: dict[str, Any]) -> int:
    return EXIT_PASS if sweep["status"] == "succeeded" and sweep["verdict"] == "pass" else EXIT_FAIL


def launch(args: argparse.Namespace) -> int:
    overrides = overrides_from(args.overrides, args.set)
    body = sweep_body(args)
    with _connect(args) as client:
        payload = {
            "scenario": _scenario_id(client, args.scenario),
            "endpoint": _endpoint_id(client, args.endpoint),
            "overrides": overrides,
            "sweep": body,
        }
        sweep = client.post("/sweeps", payload)
        page = client.page_url(f"/sweeps/{sweep['id']}/")
        if not args.wait:
            if args.json:
                _out(json.dumps(sweep))
            else:
                _out(f"{_title(sweep)} {sweep['status']}: {page}")
                _out(f"follow it with `{CLI} sweep watch {sweep['id']}`")
            return 0
        sys.stderr.write(f"{_title(sweep)} {sweep['status']}: {page}\n")
        return _follow(client, sweep["id"], args)


def watch(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        return _follow(client, args.sweep, args)


def _follow(client: ServiceClient, sweep_id: str, args: argparse.Namespace) -> int:
    """Print a row per point as its run ends (and a line per point made), then the headlines
    and the verdict; the exit code is the verdict's."""
    printed: set[int] = set()
    made: set[int] = set()
    header = False
    try:
        while True:
            sweep = client.get(f"/sweeps/{sweep_id}")
            rows = point_rows(sweep)
            for point, row in zip(sweep["points"], rows, strict=True):
                if point["seq"] not in made and not point["ended"] and not args.quiet:
                    sys.stderr.write(
                        f"point {point['seq'] + 1}: {point['arm']} at {point['label']} "
                        f"(run {point['run_id']})\n"
                    )
                made.add(point["seq"])
                if point["ended"] and point["seq"] not in printed:
                    if not header:
                        _out(_fixed(_HEADER))
                        header = True
                    _out(_fixed(row))
                    sys.stdout.flush()
                    printed.add(point["seq"])
            if sweep["status"] in FINAL:
                break
            time.sleep(args.every)
    except KeyboardInterrupt:
        sys.stderr.write(
            f"stopped watching; the sweep goes on (`{CLI} sweep cancel {sweep_id}` stops it)\n"
        )
        return EXIT_INTERRUPTED
    if args.json:
        _out(json.dumps(sweep))
        return _exit_code(sweep)
    for headline in sweep["headlines"]:
        _out(f"headline: {headline}")
    searches = (sweep.get("report") or {}).get("searches") or {}
    for search in searches.values():
        _out(f"search {search['arm']}: {search['statement']}")
    _out(f"{_title(sweep)} {sweep['status']}" + (f": {sweep['reason']}" if sweep["reason"] else ""))
    if sweep["verdict"]:
        _out(f"verdict: {sweep['verdict']}: {sweep['verdict_message']}")
    return _exit_code(sweep)


def show(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        sweep = client.get(f"/sweeps/{args.sweep}")
        if args.json:
            _out(json.dumps(sweep))
            return 0
        _summary(client, sweep)
    return 0


def listing(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        page = client.get("/sweeps", {"limit": args.limit})
    if args.json:
        _out(json.dumps(page))
        return 0
    rows = [
        [s["id"], s["status"], s["verdict"] or "—", s["name"], s["mode"], str(s["runs"])]
        for s in page["items"]
    ]
    _out(table(["id", "status", "verdict", "sweep", "mode", "runs"], rows))
    return 0


def cancel(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        sweep = client.post(f"/sweeps/{args.sweep}/cancel")
    _out(f"{_title(sweep)}: {sweep['status']} (its running point stops within seconds)")
    return 0


def export(args: argparse.Namespace) -> int:
    """The sweep's table per arm and load (CSV), or its whole report (JSON)."""
    path = f"/sweeps/{args.sweep}/export?format={args.format}"
    with _connect(args) as client:
        if args.output in (None, "-"):
            client.download(path, sys.stdout.buffer)
            sys.stdout.flush()
        else:
            target = Path(args.output)
            written = client.download(path, target)
            sys.stderr.write(f"wrote {target} ({written:,} bytes)\n")
    return 0
