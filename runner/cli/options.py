"""Options shared by `simulate` and `replay`: the workload, routing and affinity knobs.

Parses the command line into the engine's frozen config objects once; below this point nobody
reads argparse namespaces.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, get_args

from pydantic import ValidationError

from runner.cluster.config import HeaderAffinityMode
from runner.dynamo import GENERATION_ALIASES
from runner.errors import SpecError
from runner.presets import PRESETS, apply_preset
from runner.spec import (
    AFFINITIES,
    AFFINITY_ACTIONS,
    ARRIVALS,
    CLOSE_ON,
    DYNAMO_VERSIONS,
    HEADER_SOURCES,
    JOINS,
    MAX_TRACE_BYTES,
    POLICIES,
    ROUTER_MODES,
    SCOPES,
    TIMING_MODES,
    EndpointTarget,
    RunSpec,
    SimulatedTarget,
    Target,
    parse_spec,
)
from runner.trace import DEFAULT_MAX_BYTES

__all__ = [
    "API_KEY_ENV",
    "add_cluster_options",
    "add_endpoint_options",
    "add_trace_size_option",
    "add_workload_options",
    "build_spec",
    "endpoint_target",
    "endpoint_target_from_args",
    "simulated_target",
    "trace_size_limit",
]

HEADER_AFFINITY_MODES: tuple[str, ...] = get_args(HeaderAffinityMode)

# Defaults come from the spec's own fields, so the CLI and the service never disagree.
_SPEC = RunSpec.model_fields
_SIM = SimulatedTarget.model_fields
_TARGET = EndpointTarget.model_fields

API_KEY_ENV = "AIPERF_API_KEY"


def _default(fields: dict[str, Any], name: str) -> Any:
    return fields[name].default


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
    add_trace_size_option(source)
    source.add_argument("--seed", type=int, default=0, help="seed for every random choice")

    timing = parser.add_argument_group("replay")
    timing.add_argument(
        "--timing",
        choices=TIMING_MODES,
        default=_default(_SPEC, "timing"),
        help="lanes: each lane replays one tree at a time (default); rate: trees arrive at "
        "--rate per second; schedule: trees start at their recorded timestamps; closed: each "
        "lane sends the next turn when the previous returns",
    )
    timing.add_argument(
        "--concurrency",
        type=int,
        default=None,
        metavar="N",
        help="lanes (default 16), or with --timing rate a cap on active trees (default none)",
    )
    timing.add_argument(
        "--rate", type=float, default=None, metavar="R", help="tree arrivals per second (rate)"
    )
    timing.add_argument(
        "--arrival",
        choices=ARRIVALS,
        default=_default(_SPEC, "arrival"),
        help="inter-arrival distribution for --timing rate (default poisson)",
    )
    timing.add_argument(
        "--burstiness",
        type=float,
        default=_default(_SPEC, "burstiness"),
        metavar="B",
        help="gamma shape for --arrival gamma: below 1 burstier (default 1)",
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
        choices=JOINS,
        default=_default(_SPEC, "joins"),
        help="recorded: parents keep their own clock (default); strict: a "
        "joining turn waits for its children",
    )
    timing.add_argument(
        "--speedup",
        type=float,
        default=_default(_SPEC, "speedup"),
        metavar="X",
        help="divide every recorded delay by X (default 1)",
    )
    timing.add_argument(
        "--warmup",
        type=float,
        default=_default(_SPEC, "warmup_s"),
        metavar="S",
        help="requests issued in the first S seconds are not measured",
    )
    timing.add_argument(
        "--warmup-per-lane",
        type=int,
        default=_default(_SPEC, "warmup_per_lane"),
        metavar="N",
        help="each lane's first N requests are not measured (default 0)",
    )
    timing.add_argument(
        "--max-idle",
        type=float,
        default=None,
        metavar="S",
        help="cut every recorded pause between turns to at most S trace seconds (before "
        "--speedup; default: as recorded)",
    )
    timing.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default=None,
        help="a benchmark's settings: agentx = InferenceX AgentX (start window 0.25:0.75, "
        "10 warmup requests per lane, idle gaps <= 300 s, stop above 10 %% failed, 1 h, "
        "seed 42); flags given explicitly win",
    )
    timing.add_argument(
        "--length-scale",
        type=float,
        default=_default(_SPEC, "length_scale"),
        metavar="X",
        help="multiply every prompt and output length by X (0 < X <= 1), shared prefixes kept: "
        "a long-context trace on a small model (default 1)",
    )
    timing.add_argument(
        "--fit-context",
        action="store_true",
        help="live runs: shrink lengths further, when needed, so the longest request fits "
        "the endpoint's max_model_len (read from /v1/models)",
    )
    timing.add_argument(
        "--prime",
        action="store_true",
        help="with a start window: first send each live stream's last turn before t* "
        "(one-token answer, not measured) to warm caches, bindings and sticky entries",
    )

    slo = parser.add_argument_group("SLOs (goodput: requests meeting every threshold set)")
    for name in ("ttft", "itl", "latency"):
        slo.add_argument(
            f"--slo-{name}-ms",
            type=float,
            default=None,
            metavar="MS",
            help=f"{name.upper() if name != 'latency' else 'end-to-end latency'} threshold",
        )

    routing = parser.add_argument_group("client routing")
    routing.add_argument(
        "--policy",
        choices=POLICIES,
        default=_default(_SPEC, "policy"),
        help="sticky routing policy (default spawn-pin)",
    )
    routing.add_argument(
        "--client-workers",
        type=int,
        default=_default(_SPEC, "client_workers"),
        metavar="K",
        help="client workers, each caching the sessions it serves (default 8)",
    )

    affinity = parser.add_argument_group("server-side affinity")
    affinity.add_argument(
        "--affinity",
        choices=AFFINITIES,
        default=_default(_SPEC, "affinity"),
        help="what requests carry for server-side session affinity",
    )
    affinity.add_argument(
        "--scope",
        choices=SCOPES,
        default=_default(_SPEC, "scope"),
        help="dynamo-nvext / dynamo-headers key: own session id, or the tree root's id "
        "(lineage: the whole agent tree, closed by its tree-final request)",
    )
    affinity.add_argument(
        "--affinity-timeout",
        type=int,
        default=_default(_SPEC, "affinity_timeout_s"),
        metavar="S",
        help="session_control bind timeout in seconds (default 300)",
    )
    affinity.add_argument(
        "--affinity-actions",
        choices=AFFINITY_ACTIONS,
        default=_default(_SPEC, "affinity_actions"),
        help="dynamo-nvext actions: bind (Dynamo development builds with bind) or open "
        "(Dynamo 1.2.x); released 1.3 and later have no session_control: use dynamo-headers",
    )
    affinity.add_argument(
        "--close-on",
        choices=CLOSE_ON,
        default=_default(_SPEC, "close_on"),
        help="lineage close discipline; root-final reproduces the hazard",
    )
    affinity.add_argument(
        "--header-name",
        default=_default(_SPEC, "header_name"),
        help="header name for --affinity header",
    )
    affinity.add_argument(
        "--header-source",
        choices=HEADER_SOURCES,
        default=_default(_SPEC, "header_source"),
        help="which id --affinity header carries",
    )
    affinity.add_argument(
        "--parent-header",
        action="store_true",
        help="dynamo-headers, scope conversation: also send X-Dynamo-Parent-Session-ID "
        "(Dynamo 1.6 then groups siblings on a key of their own, apart from the parent)",
    )


# Spec fields whose flag is not simply `--` plus the field name with dashes.
_FLAGS = {
    "rate_per_s": "--rate",
    "duration_s": "--duration",
    "max_requests": "--requests",
    "warmup_s": "--warmup",
    "max_idle_s": "--max-idle",
    "affinity_timeout_s": "--affinity-timeout",
    "target.url": "--endpoint",
    "target.read_timeout_s": "--timeout",
    "target.metrics_interval_s": "--metrics-interval",
    "target.workers": "--server-workers",
    "target.router": "--server-router",
    "target.header_affinity_ttl_s": "--header-affinity-ttl",
    "workload.synthetic.trees": "--synthetic-trees",
}


def _flag(field: str) -> str:
    return _FLAGS.get(field) or "--" + field.removeprefix("target.").replace("_", "-")


def add_trace_size_option(group: argparse._ActionsContainer) -> None:
    group.add_argument(
        "--max-trace-mb",
        type=float,
        default=DEFAULT_MAX_BYTES / 2**20,
        metavar="MB",
        help=f"refuse trace files larger than this (default {DEFAULT_MAX_BYTES / 2**20:g})",
    )


def trace_size_limit(args: argparse.Namespace) -> int:
    limit = args.max_trace_mb
    if not 0 < limit <= MAX_TRACE_BYTES / 2**20:
        raise SpecError(f"--max-trace-mb must be in (0, {MAX_TRACE_BYTES / 2**20:g}], got {limit}")
    return int(limit * 2**20)


def add_endpoint_options(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """A live endpoint's options (`replay`, and `sweep --endpoint`); `required=False` when the
    command also runs without one, and then `--model` is checked with `--endpoint`."""
    target = parser.add_argument_group("endpoint")
    target.add_argument(
        "--endpoint",
        required=required,
        default=None,
        metavar="URL",
        help="base URL, e.g. http://127.0.0.1:8000 (or .../v1)",
    )
    target.add_argument(
        "--model", required=required, default=None, metavar="NAME", help="model name to request"
    )
    target.add_argument(
        "--api-key",
        default=None,
        metavar="KEY",
        help=f"API key (default: ${API_KEY_ENV}); sent, never logged",
    )
    target.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME:VALUE",
        help="extra header on every request (repeatable)",
    )
    target.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="first-byte and stall timeout per request (default 300)",
    )
    target.add_argument(
        "--failure-threshold",
        type=int,
        default=50,
        metavar="N",
        help="stop early after N consecutive failed requests (0: never)",
    )
    target.add_argument(
        "--stop-error-share",
        type=float,
        default=None,
        metavar="X",
        help="stop early when more than X (0 < X <= 1) of the requests that ran their course "
        "failed, once 100 have (default: never)",
    )
    target.add_argument(
        "--no-worker-id",
        action="store_true",
        help="do not ask for nvext.worker_id (endpoints that reject nvext)",
    )
    target.add_argument(
        "--metrics-url",
        default=_TARGET["metrics_url"].default,
        metavar="URL|off",
        help="the server's Prometheus page, scraped during the run (default: /metrics on the "
        "endpoint's origin; off: none)",
    )
    target.add_argument(
        "--metrics-interval",
        type=float,
        default=_TARGET["metrics_interval_s"].default,
        metavar="S",
        help=f"seconds between scrapes (default {_TARGET['metrics_interval_s'].default:g})",
    )


def endpoint_target_from_args(args: argparse.Namespace) -> EndpointTarget:
    """The endpoint `add_endpoint_options` describes."""
    if args.model is None:
        raise SpecError("--endpoint needs --model NAME (the model to request)")
    return endpoint_target(
        {
            "url": args.endpoint,
            "model": args.model,
            "api_key": args.api_key or os.environ.get(API_KEY_ENV) or None,
            "headers": dict(_header(h) for h in args.header),
            "read_timeout_s": args.timeout,
            "want_worker_id": not args.no_worker_id,
            "failure_threshold": args.failure_threshold,
            "stop_error_share": getattr(args, "stop_error_share", None),
            "metrics_url": args.metrics_url,
            "metrics_interval_s": args.metrics_interval,
        }
    )


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise SpecError(f"--header {text!r} is not NAME:VALUE")
    return name.strip(), value.strip()


def endpoint_target(data: dict[str, Any]) -> EndpointTarget:
    """`replay`'s target validated from its flags; errors name the flags, not the fields."""
    try:
        return EndpointTarget.model_validate(data)
    except ValidationError as exc:
        problems = [
            f"{_flag('target.' + '.'.join(str(p) for p in error['loc']))}: "
            + error["msg"].removeprefix("Value error, ")
            for error in exc.errors(include_url=False)
        ]
        raise SpecError("; ".join(problems)) from None


def build_spec(args: argparse.Namespace, *, target: Target) -> RunSpec:
    """The run spec the workload options describe, aimed at `target`; errors name flags."""
    try:
        return _build_spec(args, target)
    except SpecError as exc:
        if not exc.fields:
            raise
        raise SpecError(
            "; ".join(f"{_flag(field)}: {message}" for field, message in exc.fields.items()),
            fields=exc.fields,
        ) from None


def _build_spec(args: argparse.Namespace, target: Target) -> RunSpec:
    synthetic: dict[str, Any] | None = None
    if args.synthetic or args.synthetic_trees is not None:
        synthetic = {"seed": args.seed}
        if args.synthetic_trees is not None:
            synthetic["trees"] = args.synthetic_trees
    data: dict[str, Any] = {
        "workload": {
            "traces": [str(path) for path in args.trace],
            "synthetic": synthetic,
            "max_trace_bytes": trace_size_limit(args),
        },
        "timing": args.timing,
        "concurrency": args.concurrency,
        "rate_per_s": args.rate,
        "arrival": args.arrival,
        "burstiness": args.burstiness,
        "duration_s": args.duration,
        "max_requests": args.requests,
        "max_trees": args.max_trees,
        "start_window": _window(args.start_window),
        "joins": args.joins,
        "speedup": args.speedup,
        "warmup_s": args.warmup,
        "prime": args.prime,
        "length_scale": args.length_scale,
        "fit_context": args.fit_context,
        "slo_ttft_ms": args.slo_ttft_ms,
        "slo_itl_ms": args.slo_itl_ms,
        "slo_latency_ms": args.slo_latency_ms,
        "policy": args.policy,
        "client_workers": args.client_workers,
        "affinity": args.affinity,
        "scope": args.scope,
        "affinity_timeout_s": args.affinity_timeout,
        "affinity_actions": args.affinity_actions,
        "close_on": args.close_on,
        "header_name": args.header_name,
        "header_source": args.header_source,
        "parent_header": args.parent_header,
        "seed": args.seed,
        "target": target.model_dump(),
    }
    data["warmup_per_lane"] = args.warmup_per_lane
    data["max_idle_s"] = args.max_idle
    if args.preset is not None:
        data = apply_preset(args.preset, data, given=_given(args))
    return parse_spec(data).with_api_key(getattr(target, "api_key_value", None))


def _given(args: argparse.Namespace) -> frozenset[str]:
    """The knobs a preset may set that these arguments set otherwise than by default."""
    given = set()
    if args.start_window != "0:0":
        given.add("start_window")
    if args.duration is not None:
        given.add("duration_s")
    if args.seed != 0:
        given.add("seed")
    if args.warmup_per_lane != _default(_SPEC, "warmup_per_lane"):
        given.add("warmup_per_lane")
    if args.max_idle is not None:
        given.add("max_idle_s")
    if args.timing != _default(_SPEC, "timing"):
        given.add("timing")
    if args.policy != _default(_SPEC, "policy"):
        given.add("policy")
    if getattr(args, "stop_error_share", None) is not None:
        given.add("target.stop_error_share")
    return frozenset(given)


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
        default=_default(_SIM, "workers"),
        metavar="N",
        help="inference workers (default 8)",
    )
    group.add_argument(
        f"--{prefix}router",
        dest="cluster_router",
        choices=ROUTER_MODES,
        default=_default(_SIM, "router"),
        help="frontend router mode (default round-robin, Dynamo's default)",
    )
    group.add_argument(
        "--dp-ranks",
        type=int,
        default=_default(_SIM, "dp_ranks"),
        metavar="N",
        help="data-parallel ranks per worker (default 1)",
    )
    group.add_argument(
        "--time-scale",
        type=float,
        default=_default(_SIM, "time_scale"),
        metavar="X",
        help="multiply every modelled latency by X; 0 answers at once (default 1)",
    )
    group.add_argument(
        "--block-size",
        type=int,
        default=_default(_SIM, "block_size"),
        metavar="TOKENS",
        help="prefix-cache block size (default 64)",
    )
    group.add_argument(
        "--cache-blocks",
        type=int,
        default=_default(_SIM, "cache_blocks"),
        metavar="N",
        help="prefix-cache capacity per worker rank, in blocks (default 16384)",
    )
    group.add_argument(
        "--max-num-seqs",
        type=int,
        default=_default(_SIM, "max_num_seqs"),
        metavar="N",
        help="batch slots per worker rank (default 256)",
    )
    group.add_argument(
        "--dynamo-version",
        choices=(*DYNAMO_VERSIONS, *GENERATION_ALIASES),
        default=_default(_SIM, "dynamo_version"),
        help="the Dynamo generation: 1.2 (session_control open/close; bind gets HTTP 400), "
        "bind (development builds: open/bind/close, the default), 1.6 (released 1.3-1.6.x: "
        "session_control gets HTTP 400, header affinity with --header-affinity-ttl); "
        "1.3 is a deprecated name for bind",
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
        help="enable X-Dynamo-Session-ID affinity with this idle TTL in seconds (default off; "
        "versions bind and 1.6)",
    )
    group.add_argument(
        "--header-affinity-mode",
        choices=HEADER_AFFINITY_MODES,
        default=_default(_SIM, "header_affinity_mode"),
        help="hard: always the bound worker (default); soft: the bound worker unless it has "
        "no free batch slot",
    )


def simulated_target(args: argparse.Namespace) -> SimulatedTarget:
    target = {
        "kind": "simulated",
        "workers": args.cluster_workers,
        "router": args.cluster_router,
        "dp_ranks": args.dp_ranks,
        "time_scale": args.time_scale,
        "block_size": args.block_size,
        "cache_blocks": args.cache_blocks,
        "max_num_seqs": args.max_num_seqs,
        "dynamo_version": args.dynamo_version,
        "session_control_kv_only": args.session_control_kv_only,
        "header_affinity_ttl_s": args.header_affinity_ttl,
        "header_affinity_mode": args.header_affinity_mode,
    }
    # Validated as part of a spec so errors read like every other spec error.
    validated = parse_spec({"target": target}).target
    assert isinstance(validated, SimulatedTarget)
    return validated
