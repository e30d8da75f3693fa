"""`python -m runner demo`: the product's two behaviours, side by side, in virtual time.

Simulates the synthetic agentic workload four times — legacy vs spawn-pin client routing, and
conversation vs lineage server affinity — and prints the figures that tell them apart.
"""

from __future__ import annotations

import argparse
import sys
import time

from runner.cli.output import print_json
from runner.run import run as run_spec
from runner.spec import RunSpec, parse_spec

_COLUMNS = (
    ("requests", "requests"),
    ("sessions_multi_worker", "sessions on >1 worker"),
    ("worker_switches", "worker switches"),
    ("orphaned_session_copies", "orphaned copies"),
    ("child_first_turn_hit_ratio", "child 1st-turn hit ratio"),
    ("prefix_cache_hit_ratio", "prefix-cache hit ratio"),
    ("affinity_closes", "affinity closes"),
    ("early_closes", "early closes"),
)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="legacy vs spawn-pin and conversation vs lineage, simulated side by side",
        description=__doc__,
    )
    parser.add_argument("--concurrency", type=int, default=64, help="lanes (default 64)")
    parser.add_argument(
        "--duration",
        type=float,
        default=1800.0,
        metavar="S",
        help="simulated seconds (default 1800)",
    )
    parser.add_argument(
        "--server-workers",
        type=int,
        default=32,
        metavar="N",
        help="simulated inference workers (default 32)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def demo_specs(
    *, concurrency: int, duration_s: float, server_workers: int, seed: int
) -> dict[str, RunSpec]:
    """The four runs, as specs: what the web service's demo scenario launches too."""
    # Rootless and gated lanes (t* anywhere in a tree) are where legacy routing bounces.
    base = parse_spec(
        {
            "workload": {"synthetic": {"seed": seed}},
            "concurrency": concurrency,
            "duration_s": duration_s,
            "start_window": (0.0, 1.0),
            "prime": True,
            "seed": seed,
            "target": {"kind": "simulated", "workers": server_workers, "router": "round-robin"},
        }
    )
    return {
        "legacy": base.with_overrides({"policy": "legacy"}),
        "spawn-pin": base.with_overrides({"policy": "spawn-pin"}),
        "conversation": base.with_overrides({"affinity": "dynamo-nvext", "scope": "conversation"}),
        "lineage": base.with_overrides({"affinity": "dynamo-nvext", "scope": "lineage"}),
    }


def run(args: argparse.Namespace) -> int:
    specs = demo_specs(
        concurrency=args.concurrency,
        duration_s=args.duration,
        server_workers=args.server_workers,
        seed=args.seed,
    )
    results: dict[str, dict[str, object]] = {}
    for name, spec in specs.items():
        started = time.perf_counter()
        sys.stderr.write(f"simulating {name} ... ")
        sys.stderr.flush()
        summary: dict[str, object] = dict(run_spec(spec).summary)
        sys.stderr.write(f"{time.perf_counter() - started:.1f} s\n")
        results[name] = {key: summary[key] for key, _ in _COLUMNS}
    if args.json:
        print_json(results)
        return 0
    names = list(results)
    print(
        f"\n{args.concurrency} lanes, {args.duration:.0f} simulated seconds, "
        f"{args.server_workers} inference workers (round-robin)\n"
    )
    print(f"{'':26}" + "".join(f"{n:>14}" for n in names))
    for key, label in _COLUMNS:
        cells = "".join(f"{_cell(results[n][key]):>14}" for n in names)
        print(f"{label:26}{cells}")
    print(
        "\nlegacy bounces subagents between client workers and leaks copies; spawn-pin does not."
        "\nlineage binds a whole agent tree to one inference worker: a child's first request"
        "\nfinds the prefix its tree already computed instead of prefilling it again, at the"
        "\ncost of placement freedom (whole trees per worker); it closes only on a provably"
        "\ntree-final request, so never early."
    )
    return 0


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)
