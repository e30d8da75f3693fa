"""The service command line's subcommands (`python -m runner service ...`): each a function of
the parsed arguments that talks to the service's API and returns an exit code. Owns what each
prints and the exit codes: 0 done (a watched run passed its verdict), 1 a watched run's verdict
is fail (or the service failed), 2 the command could not do what was asked (its message says
why and how to fix it). Never reads the service's database: only its HTTP API."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import shutil
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from runner.errors import BadInput
from runner.metrics.verify import verify_text
from runner.service.client import API, ServiceClient
from runner.service.config import TOKEN_ENV, Config, resolve_token, resolve_url
from runner.service.display import (
    compare_table,
    figures_line,
    progress_line,
    run_title,
    table,
)
from runner.service.shapes import (
    ABPair,
    Compare,
    Endpoint,
    RunDetail,
    RunPage,
    Scenario,
    Team,
    Verdict,
    Verify,
    parse,
)

__all__ = [
    "EXPORTS",
    "ab",
    "cancel",
    "compare",
    "endpoints",
    "export",
    "launch",
    "login",
    "logout",
    "overrides_from",
    "runs",
    "scenarios",
    "show",
    "verify",
    "watch",
]

CLI = "python -m runner service"
SIMULATED = "simulated"
# What `export` can fetch: the API's export routes of a run.
EXPORTS = ("summary.json", "summary.csv", "records.jsonl")
# Without a terminal, a progress line every this many polls (and at each change of status).
_LOG_EVERY_POLLS = 10
EXIT_PASS, EXIT_FAIL, EXIT_INTERRUPTED = 0, 1, 130


def _out(text: str) -> None:
    sys.stdout.write(text + "\n")


def _json_out(data: Any) -> None:
    sys.stdout.write(json.dumps(data) + "\n")


def _connect(args: argparse.Namespace) -> ServiceClient:
    config = Config.load()
    url = resolve_url(getattr(args, "url", None), config)
    token = resolve_token(getattr(args, "token", None), config, url=url)
    return ServiceClient(url=url, token=token)


# -- logging in ----------------------------------------------------------------------------------


def login(args: argparse.Namespace) -> int:
    """Check a token against the server, then keep both in the config file (mode 0600)."""
    config = Config.load()
    url = resolve_url(args.url, config)
    token = (args.token or os.environ.get(TOKEN_ENV) or _ask_token(url)).strip()
    with ServiceClient(url=url, token=token) as client:
        teams = parse(list[Team], client.get("/teams"), where=f"GET {API}/teams")
    config.url = url
    config.tokens[url] = token
    path = config.save()
    names = ", ".join(f"{t.name} ({t.role})" for t in teams) or "none yet"
    _out(f"logged in to {url}; your teams: {names}. Token kept in {path} (readable by you only).")
    return 0


def _ask_token(url: str) -> str:
    if sys.stdin.isatty():
        token = getpass.getpass(f"API token for {url} (the Team page makes one): ")
    else:  # `echo $TOKEN | ... login`: the token never shows in the process list
        token = sys.stdin.readline()
    if not token.strip():
        raise BadInput(
            f"no token given: pass --token, set {TOKEN_ENV} or type it when asked (make one on "
            "the Team page, or with `manage.py create_api_token <user>`)"
        )
    return token


def logout(args: argparse.Namespace) -> int:
    config = Config.load()
    url = resolve_url(args.url, config)
    if config.tokens.pop(url, None) is None:
        _out(f"no token kept for {url}: nothing to do")
        return 0
    if config.url == url:
        config.url = None
    path = config.save()
    _out(f"forgot the token for {url} ({path}); it stays valid until revoked on the Team page")
    return 0


# -- lists ---------------------------------------------------------------------------------------


def scenarios(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        raw = client.get("/scenarios", {"tag": args.tag, "q": args.search})
    items = parse(list[Scenario], raw, where=f"GET {API}/scenarios")
    if args.json:
        _json_out(raw)
        return 0
    rows = [
        [
            s.id,
            s.name,
            s.team.name,
            ", ".join(t.name for t in s.traces) or "synthetic",
            ", ".join(s.tags),
        ]
        for s in items
    ]
    _out(table(["id", "name", "team", "workload", "tags"], rows))
    return 0


def endpoints(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        raw = client.get("/endpoints")
    items = parse(list[Endpoint], raw, where=f"GET {API}/endpoints")
    if args.json:
        _json_out(raw)
        return 0
    rows = [[e.id, e.name, e.team.name, e.server_kind, e.base_url, e.model] for e in items]
    _out(table(["id", "name", "team", "kind", "base url", "model"], rows))
    _out(f"(and `{SIMULATED}`: the simulated cluster, for every scenario)")
    return 0


def runs(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        params: dict[str, str | int] = {"limit": args.limit, "status": args.status}
        if args.scenario:
            params["scenario"] = _scenario_id(client, args.scenario)
        if args.endpoint:
            params["endpoint"] = _endpoint_id(client, args.endpoint)
        if args.tag:
            params["tag"] = args.tag
        raw = client.get("/runs", params)
    page = parse(RunPage, raw, where=f"GET {API}/runs")
    if args.json:
        _json_out(raw)
        return 0
    rows = [
        [
            r.id,
            r.status,
            r.scenario.name,
            r.endpoint.name,
            _local_time(r.created_at),
            (r.summary or {}).get("requests"),
            (r.summary or {}).get("errors"),
            ", ".join(r.tags),
        ]
        for r in page.items
    ]
    headers = ["id", "status", "scenario", "endpoint", "created", "requests", "errors", "tags"]
    _out(table(headers, rows))
    if page.count > len(page.items):
        _out(f"({len(page.items)} newest of {page.count}: --limit N shows more)")
    return 0


def _local_time(iso: str | None) -> str | None:
    if iso is None:
        return None
    try:
        return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return iso


# -- names and ids -------------------------------------------------------------------------------


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _pick(what: str, key: str, found: list[tuple[str, str]], listing: str) -> str:
    """The id of the one object named `key` among (id, team) pairs; ids pass through."""
    if _is_uuid(key):
        return key
    if not found:
        raise BadInput(f"no {what} named {key!r} in your teams: `{CLI} {listing}` lists them")
    if len(found) > 1:
        teams = ", ".join(team for _, team in found)
        raise BadInput(
            f"{len(found)} {what}s are named {key!r} (teams {teams}): give its id "
            f"(`{CLI} {listing}`)"
        )
    return found[0][0]


def _scenario_id(client: ServiceClient, key: str) -> str:
    if _is_uuid(key):
        return key
    items = parse(
        list[Scenario], client.get("/scenarios", {"q": key}), where=f"GET {API}/scenarios"
    )
    found = [(s.id, s.team.name) for s in items if s.name == key]
    return _pick("scenario", key, found, "scenarios")


def _endpoint_id(client: ServiceClient, key: str) -> str:
    if key == SIMULATED or _is_uuid(key):
        return key
    items = parse(list[Endpoint], client.get("/endpoints"), where=f"GET {API}/endpoints")
    found = [(e.id, e.team.name) for e in items if e.name == key]
    return _pick("endpoint", key, found, "endpoints")


# -- overrides -----------------------------------------------------------------------------------


def overrides_from(overrides_json: str | None, settings: list[str]) -> dict[str, Any]:
    """--overrides JSON (an object of knob: value), then each --set KNOB=VALUE over it. A
    VALUE is JSON when it parses (`20`, `true`, `[0, 0.5]`), else text (`legacy`); a dotted
    KNOB reaches into an object (`target.workers=4`)."""
    result: dict[str, Any] = {}
    if overrides_json is not None:
        try:
            loaded = json.loads(overrides_json)
        except json.JSONDecodeError as exc:
            raise BadInput(
                f"--overrides is not JSON ({exc.msg} at character {exc.pos}): write e.g. "
                """'{"duration_s": 30, "policy": "legacy"}'"""
            ) from None
        if not isinstance(loaded, dict):
            raise BadInput("--overrides must be a JSON object of knob: value")
        result = loaded
    for item in settings:
        knob, sep, text = item.partition("=")
        path = [p.strip() for p in knob.split(".")]
        if not sep or not all(path):
            raise BadInput(f"--set {item!r}: write KNOB=VALUE, e.g. --set duration_s=30")
        try:
            value: Any = json.loads(text)
        except json.JSONDecodeError:
            value = text
        node = result
        for i, part in enumerate(path[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise BadInput(
                    f"--set {item!r}: {'.'.join(path[: i + 1])} is already set to a value, "
                    "not an object"
                )
            node = child
        node[path[-1]] = value
    return result


# -- launching and watching ----------------------------------------------------------------------


def launch(args: argparse.Namespace) -> int:
    overrides = overrides_from(args.overrides, args.set)
    with _connect(args) as client:
        body = {
            "scenario": _scenario_id(client, args.scenario),
            "endpoint": _endpoint_id(client, args.endpoint),
            "overrides": overrides,
            "tags": args.tag,
            "notes": args.notes,
        }
        if getattr(args, "allow_overlap", False):
            body["allow_overlap"] = True
        raw = client.post("/runs", body)
        run = parse(RunDetail, raw, where=f"POST {API}/runs")
        page = client.page_url(f"/runs/{run.id}/")
        if not args.wait:
            if args.json:
                _json_out(raw)
            else:
                _out(f"{run_title(run)} {run.status}: {page}")
                _out(f"follow it with `{CLI} watch {run.id}`")
            return 0
        sys.stderr.write(f"{run_title(run)} {run.status}: {page}\n")
        return _follow_and_judge(client, run.id, args)


def watch(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        return _follow_and_judge(client, args.run, args)


def _follow_and_judge(client: ServiceClient, run_id: str, args: argparse.Namespace) -> int:
    """Follow a run to its end, print its figures and verdict; the exit code is the verdict's."""
    try:
        raw = _follow(client, run_id, every_s=args.every, show=not args.quiet)
    except KeyboardInterrupt:
        sys.stderr.write(
            f"\nstopped watching; run {run_id} goes on on the service: `{CLI} watch {run_id}` "
            f"follows it again, `{CLI} cancel {run_id}` stops it\n"
        )
        return EXIT_INTERRUPTED
    verdict_raw = client.get(
        f"/runs/{run_id}/verdict", {"baseline": args.baseline} if args.baseline else None
    )
    verdict = parse(Verdict, verdict_raw, where=f"GET {API}/runs/{run_id}/verdict")
    run = parse(RunDetail, raw, where=f"GET {API}/runs/{run_id}")
    if args.json:
        _json_out({"run": raw, "verdict": verdict_raw})
    else:
        _report(client, run, verdict)
    return EXIT_PASS if verdict.verdict == "pass" else EXIT_FAIL


def _follow(
    client: ServiceClient,
    run_id: str,
    *,
    every_s: float,
    show: bool,
) -> Any:
    """Poll the run every `every_s` seconds until it has ended; returns its last answer. On a
    terminal the progress line is redrawn in place; otherwise a line is written at each change
    of status and every few polls between (a CI log keeps a readable trail)."""
    stream = sys.stderr
    tty = stream.isatty()
    polls, status, drawn = 0, "", 0
    while True:
        raw = client.get(f"/runs/{run_id}")
        run = parse(RunDetail, raw, where=f"GET {API}/runs/{run_id}")
        if show:
            if tty:
                width = shutil.get_terminal_size().columns - 1
                line = progress_line(run, width=width)[:width]
                stream.write("\r" + line.ljust(drawn))
                drawn = len(line)
            elif run.status != status or polls % _LOG_EVERY_POLLS == 0 or run.ended:
                stream.write(progress_line(run) + "\n")
            stream.flush()
        status = run.status
        polls += 1
        if run.ended:
            if show and tty:
                stream.write("\n")
            return raw
        time.sleep(every_s)


def _report(client: ServiceClient, run: RunDetail, verdict: Verdict) -> None:
    took = _seconds(run.started_at, run.finished_at)
    _out(f"{run_title(run)} {run.status}" + (f" in {took:.1f} s" if took is not None else ""))
    if run.reason:
        _out(f"  {run.reason}")
    _out(f"  {figures_line(run)}")
    _out(f"  {verdict.message}")
    _out(f"  {client.page_url(f'/runs/{run.id}/')}")


def _seconds(start: str | None, end: str | None) -> float | None:
    if start is None or end is None:
        return None
    try:
        return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
    except ValueError:
        return None


def ab(args: argparse.Namespace) -> int:
    """A paired launch (POST /ab): A then B, one scenario, target and seed, differing in one
    knob. With --wait both are followed; the exit code is B's verdict (B is the change under
    test: spawn-pin or lineage by default), A's is shown beside it."""
    overrides = overrides_from(args.overrides, args.set)
    with _connect(args) as client:
        body: dict[str, Any] = {
            "scenario": _scenario_id(client, args.scenario),
            "endpoint": _endpoint_id(client, args.endpoint),
            "knob": args.knob,
            "overrides": overrides,
        }
        if args.a is not None:
            body["value_a"] = args.a
        if args.b is not None:
            body["value_b"] = args.b
        raw = client.post("/ab", body)
        pair = parse(ABPair, raw, where=f"POST {API}/ab")
        page = client.page_url(pair.compare_url)
        if not args.wait:
            if args.json:
                _json_out(raw)
            else:
                _out(
                    f"A/B {pair.knob}: A {pair.value_a} = run {pair.run_a}, "
                    f"B {pair.value_b} = run {pair.run_b} (B starts when A has ended)"
                )
                _out(f"compare: {page}")
            return 0
        sys.stderr.write(f"A/B {pair.knob}: A {pair.value_a} then B {pair.value_b}: {page}\n")
        ended: dict[str, Any] = {}
        sides = (("A", pair.value_a, pair.run_a), ("B", pair.value_b, pair.run_b))
        for side, value, run_id in sides:
            sys.stderr.write(f"{side} ({value}): run {run_id}\n")
            try:
                ended[side] = _follow(client, run_id, every_s=args.every, show=not args.quiet)
            except KeyboardInterrupt:
                sys.stderr.write(f"\nstopped watching; the pair goes on on the service: {page}\n")
                return EXIT_INTERRUPTED
        verdicts = {side: client.get(f"/runs/{run_id}/verdict") for side, _, run_id in sides}
        compared_raw = client.get("/compare", {"runs": f"{pair.run_a},{pair.run_b}"})
    if args.json:
        _json_out({"pair": raw, "runs": ended, "verdicts": verdicts, "compare": compared_raw})
    else:
        for side in ("A", "B"):
            run = parse(RunDetail, ended[side], where=f"GET {API}/runs")
            verdict = parse(Verdict, verdicts[side], where=f"GET {API}/runs/{run.id}/verdict")
            _out(f"{side}: " + f"{run_title(run)} {run.status}")
            _out(f"  {figures_line(run)}")
            _out(f"  {verdict.message}")
        _out(compare_table(parse(Compare, compared_raw, where=f"GET {API}/compare")))
        _out(page)
    b_verdict = parse(Verdict, verdicts["B"], where=f"GET {API}/runs/{pair.run_b}/verdict")
    return EXIT_PASS if b_verdict.verdict == "pass" else EXIT_FAIL


# -- one run ---------------------------------------------------------------------------------


def show(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        raw = client.get(f"/runs/{args.run}")
        run = parse(RunDetail, raw, where=f"GET {API}/runs/{args.run}")
        if args.json:
            _json_out(raw)
            return 0
        _out(f"{run_title(run)} {run.status}")
        if run.reason:
            _out(f"  {run.reason}")
        if run.ended:
            _out(f"  {figures_line(run)}")
        else:
            _out(f"  {progress_line(run)}")
        _out(f"  {run.verdict.message}")
        _out(f"  {client.page_url(f'/runs/{run.id}/')}")
    return 0


def cancel(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        run = parse(
            RunDetail, client.post(f"/runs/{args.run}/cancel"), where=f"POST {API}/runs/cancel"
        )
    _out(f"{run_title(run)}: cancel asked ({run.status}; a running run stops within seconds)")
    return 0


def verify(args: argparse.Namespace) -> int:
    """The service recomputes a stored run's summary from its stored records (GET
    /api/v1/runs/ID/verify), printed as `python -m runner verify` prints a local run's; exit
    0 when every figure agrees, 1 when one does not."""
    with _connect(args) as client:
        raw = client.get(f"/runs/{args.run}/verify")
        checked = parse(Verify, raw, where=f"GET {API}/runs/{args.run}/verify")
        source = f"{client.page_url(f'/runs/{checked.id}/')} ({checked.status})"
    if args.json:
        _json_out(raw)
    else:
        _out(verify_text(checked.model_dump(), source=source))
    return 0 if checked.ok else 1


def export(args: argparse.Namespace) -> int:
    """A run's summary (JSON or CSV) or its per-request records (JSON lines), to a file or
    stdout, as the API serves them."""
    path = f"/runs/{args.run}/{args.format}"
    if args.format == "records.jsonl" and args.include_warmup:
        path += "?include_warmup=true"
    with _connect(args) as client:
        if args.output in (None, "-"):
            written = client.download(path, sys.stdout.buffer)
            sys.stdout.flush()
        else:
            target = Path(args.output)
            written = client.download(path, target)
            sys.stderr.write(f"wrote {target} ({written:,} bytes)\n")
    return 0


def compare(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        raw = client.get("/compare", {"runs": ",".join(args.runs)})
    result = parse(Compare, raw, where=f"GET {API}/compare")
    if args.json:
        _json_out(raw)
    else:
        _out(compare_table(result))
    return 0
