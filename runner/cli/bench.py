"""`python -m runner bench router|sim|client|fleet|...`: benchmarks that print figures, never
verdicts."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runner.cli.output import print_json, print_table


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("bench", help="benchmarks: router, simulator, HTTP client")
    kinds = parser.add_subparsers(dest="bench", metavar="KIND", required=True)

    router = kinds.add_parser(
        "router",
        help="cost per routing decision for every policy",
        description="Replay an agentic credit stream through the sticky router, per policy.",
    )
    router.add_argument("--credits", type=int, default=40_000, help="credits to generate")
    router.add_argument("--workers", type=int, default=8, help="client workers")
    router.add_argument(
        "--stream",
        type=Path,
        default=None,
        metavar="FILE",
        help="replay this op stream instead (e.g. "
        "../shared/bench/router-stream.jsonl.gz, aiperf's measured input)",
    )
    router.add_argument("--repeats", type=int, default=7, help="repeats per policy (median)")
    router.add_argument("--json", action="store_true", help="print one JSON object")
    router.set_defaults(handler=_run_router)

    sim = kinds.add_parser(
        "sim",
        help="simulator speed: one simulated hour of the default synthetic workload",
        description="Simulate the default synthetic workload and report wall time per request.",
    )
    sim.add_argument("--concurrency", type=int, default=256)
    sim.add_argument("--duration", type=float, default=3600.0, metavar="S")
    sim.add_argument(
        "--server-workers",
        type=int,
        default=64,
        metavar="N",
        help="inference workers, sized so the cluster is not the bottleneck",
    )
    sim.add_argument("--json", action="store_true", help="print one JSON object")
    sim.set_defaults(handler=_run_sim)

    sweep = kinds.add_parser(
        "sweep",
        help="the simulated twin of a 5-point x 2-arm sweep: wall time",
        description="Simulate concurrency 1, 2, 4, 8, 16 for lineage and conversation "
        "(dynamo-headers, simulated Dynamo 1.6) with the points in parallel processes.",
    )
    sweep.add_argument(
        "--duration", type=float, default=1800.0, metavar="S", help="simulated seconds per run"
    )
    sweep.add_argument(
        "--processes", type=int, default=None, metavar="N", help="default: one per core"
    )
    sweep.add_argument(
        "--trace",
        type=Path,
        default=None,
        metavar="FILE",
        help="replay this trace 100x faster (default: the synthetic workload)",
    )
    sweep.add_argument("--json", action="store_true", help="print one JSON object")
    sweep.set_defaults(handler=_run_sweep)

    client = kinds.add_parser(
        "client",
        help="HTTP client throughput and TTFT against an endpoint",
        description="Send N streamed chat requests at concurrency C; run it against a server "
        "that answers at once (mock-server --time-scale 0) to measure the client itself.",
    )
    client.add_argument("--endpoint", required=True, metavar="URL")
    client.add_argument("--model", default="mock-model", metavar="NAME")
    client.add_argument("--concurrency", type=int, default=256)
    client.add_argument("--requests", type=int, default=20_000)
    client.add_argument("--isl", type=int, default=100, help="prompt tokens (default 100)")
    client.add_argument("--osl", type=int, default=64, help="output tokens (default 64)")
    client.add_argument("--no-stream", action="store_true", help="non-streaming requests")
    client.add_argument(
        "--rate",
        type=float,
        default=None,
        metavar="R",
        help="open loop: R requests/s (at most --concurrency in flight); "
        "TTFT is then the client's overhead at that load",
    )
    client.add_argument("--json", action="store_true", help="print one JSON object")
    client.set_defaults(handler=_run_client)

    fleet = kinds.add_parser(
        "fleet",
        help="client workers as processes over Redis: added round trip, CPU, requests/s",
        description="Side by side in one run against the mock: what the trip through Redis "
        "adds per request at an open-loop rate, the orchestrator's CPU per credit beside the "
        "in-process engine, and closed-loop requests/s with 1, 2 and 4 host processes.",
    )
    fleet.add_argument(
        "--redis", default="redis://127.0.0.1:6379/5", metavar="URL", help="Redis to use"
    )
    fleet.add_argument("--rate", type=float, default=2000.0, help="open-loop credits/s")
    fleet.add_argument(
        "--load-rate",
        type=float,
        default=500.0,
        help="open-loop requests/s against the mock for the round trip under load",
    )
    fleet.add_argument(
        "--busy-rate",
        type=float,
        default=8000.0,
        help="open-loop credits/s for the orchestrator's CPU per credit where it is busy",
    )
    fleet.add_argument("--rate-duration", type=float, default=10.0, metavar="S")
    fleet.add_argument("--requests", type=int, default=6000, help="closed-loop requests")
    fleet.add_argument("--concurrency", type=int, default=64, help="closed-loop lanes")
    fleet.add_argument(
        "--rss",
        action="store_true",
        help="instead: each host's RSS over a long run, legacy beside spawn-pin",
    )
    fleet.add_argument("--rss-duration", type=float, default=60.0, metavar="S")
    fleet.add_argument("--json", action="store_true", help="print one JSON object")
    fleet.set_defaults(handler=_run_fleet)

    cluster = kinds.add_parser("cluster", help="simulated cluster: microseconds per submit")
    cluster.add_argument("--requests", type=int, default=100_000)
    cluster.add_argument("--lanes", type=int, default=256)
    cluster.add_argument(
        "--router",
        default="round-robin",
        choices=("round-robin", "random", "least-loaded", "kv", "kv-approx"),
    )
    cluster.add_argument("--seed", type=int, default=0)
    cluster.add_argument("--json", action="store_true", help="print one JSON object")
    cluster.set_defaults(handler=_run_cluster)

    mock = kinds.add_parser(
        "mock", help="mock server capacity: streamed requests/s and server CPU per request"
    )
    mock.add_argument("--requests", type=int, default=20_000)
    mock.add_argument("--concurrency", type=int, default=256)
    mock.add_argument("--isl", type=int, default=100, help="prompt tokens (words)")
    mock.add_argument("--osl", type=int, default=64, help="streamed output tokens")
    mock.add_argument("--time-scale", type=float, default=0.0)
    mock.add_argument("--workers", type=int, default=8)
    mock.add_argument("--url", default=None, help="measure a mock already running here")
    mock.add_argument("--json", action="store_true", help="print one JSON object")
    mock.set_defaults(handler=_run_mock)

    memory = kinds.add_parser(
        "memory", help="engine state and RSS over a long simulated run (flat under spawn-pin)"
    )
    memory.add_argument("--requests", type=int, default=1_000_000)
    memory.add_argument("--concurrency", type=int, default=256)
    memory.add_argument("--server-workers", type=int, default=64)
    memory.add_argument(
        "--policy", choices=("spawn-pin", "legacy", "least-loaded"), default="spawn-pin"
    )
    memory.add_argument("--json", action="store_true", help="print one JSON object")
    memory.set_defaults(handler=_run_memory)

    sessions = kinds.add_parser(
        "session-memory",
        help="session copies' memory per lane, live against the built-in mock: copies as "
        "text (logical) beside copies as shared pieces (actual), per routing policy",
    )
    sessions.add_argument("--trace", required=True)
    sessions.add_argument("--concurrency", type=int, default=512)
    sessions.add_argument("--requests", type=int, default=20_000)
    sessions.add_argument("--speedup", type=float, default=100.0)
    sessions.add_argument("--client-workers", type=int, default=8)
    sessions.add_argument("--policies", default="spawn-pin,legacy")
    sessions.add_argument("--json", action="store_true", help="print one JSON object")
    sessions.set_defaults(handler=_run_session_memory)

    verify = kinds.add_parser(
        "verify", help="verify at size: N synthetic records streamed to a file, then checked"
    )
    verify.add_argument("--requests", type=int, default=200_000)
    verify.add_argument(
        "--gaps-per-request", type=int, default=32, help="mean inter-chunk gaps a record keeps"
    )
    verify.add_argument("--dir", type=Path, default=Path("var/bench-verify"))
    verify.add_argument("--json", action="store_true", help="print one JSON object")
    verify.set_defaults(handler=_run_verify)

    loaders = kinds.add_parser("loaders", help="trace loaders: seconds against file size")
    loaders.add_argument(
        "--sizes", default="1,4,16", metavar="MIB,...", help="file sizes in MiB (default 1,4,16)"
    )
    loaders.add_argument("--shape", action="append", default=None, help="only this shape")
    loaders.add_argument("--json", action="store_true", help="print one JSON object")
    loaders.set_defaults(handler=_run_loaders)

    metrics = kinds.add_parser("metrics", help="metrics hot path: ns per histogram record")
    metrics.add_argument("--json", action="store_true", help="print one JSON object")
    metrics.set_defaults(handler=_run_metrics)


def _run_router(args: argparse.Namespace) -> int:
    from runner.bench.router import bench_router, generate_stream, load_stream

    rounds = load_stream(args.stream) if args.stream else generate_stream(args.credits)
    result = bench_router(rounds, workers=args.workers, repeats=args.repeats)
    if args.json:
        print_json(result)
    else:
        for policy, figures in result.items():
            print_table(figures, title=policy)
    return 0


def _run_sim(args: argparse.Namespace) -> int:
    from runner.bench.sim import bench_sim

    result = bench_sim(
        concurrency=args.concurrency, duration_s=args.duration, server_workers=args.server_workers
    )
    if args.json:
        print_json(result)
    else:
        print_table(result, title="simulator")
    return 0


def _run_sweep(args: argparse.Namespace) -> int:
    from runner.bench.sweep import bench_sweep

    figures = bench_sweep(duration_s=args.duration, processes=args.processes, trace=args.trace)
    return _print(figures, args.json, "sweep (simulated twin)")


def _run_client(args: argparse.Namespace) -> int:
    from runner.bench.client import bench_client

    result = asyncio.run(
        bench_client(
            args.endpoint,
            model=args.model,
            concurrency=args.concurrency,
            requests=args.requests,
            isl=args.isl,
            osl=args.osl,
            stream=not args.no_stream,
            rate_per_s=args.rate,
        )
    ).to_json()
    if args.json:
        print_json(result)
    else:
        print_table(result, title="client")
    return 0


def _run_fleet(args: argparse.Namespace) -> int:
    from runner.bench.fleet import bench_fleet, bench_fleet_rss

    if args.rss:
        figures = bench_fleet_rss(redis_url=args.redis, duration_s=args.rss_duration)
        print_json(figures)
        return 0
    result = bench_fleet(
        redis_url=args.redis,
        rate_per_s=args.rate,
        load_rate_per_s=args.load_rate,
        busy_rate_per_s=args.busy_rate,
        rate_duration_s=args.rate_duration,
        closed_requests=args.requests,
        concurrency=args.concurrency,
    ).as_dict()
    if args.json:
        print_json(result)
    else:
        print_table(result, title="fleet")
    return 0


def _run_cluster(args: argparse.Namespace) -> int:
    from runner.bench.cluster import run

    figures = run(requests=args.requests, lanes=args.lanes, router=args.router, seed=args.seed)
    return _print(figures, args.json, "cluster")


def _run_mock(args: argparse.Namespace) -> int:
    from runner.bench.mockserver import run_bench

    figures = run_bench(
        requests=args.requests,
        concurrency=args.concurrency,
        isl=args.isl,
        osl=args.osl,
        time_scale=args.time_scale,
        workers=args.workers,
        url=args.url,
    )
    return _print(figures, args.json, "mock server")


def _run_loaders(args: argparse.Namespace) -> int:
    from runner.bench.loaders import bench_loaders

    sizes = [float(s) for s in args.sizes.split(",") if s]
    result = bench_loaders(sizes, shapes=args.shape)
    if args.json:
        print_json(result)
    else:
        for shape, figures in result.items():
            print(shape)
            for row in figures["sizes"]:
                print("  " + "  ".join(f"{k}={v}" for k, v in row.items()))
    return 0


def _run_metrics(args: argparse.Namespace) -> int:
    from runner.bench.metrics import bench_call_overhead, bench_record, bench_run_metrics_record

    figures = {
        "call_overhead_ns": round(bench_call_overhead(), 1),
        "histogram_record_ns": round(bench_record(), 1),
        "run_metrics_record_ns": round(bench_run_metrics_record(), 1),
    }
    return _print(figures, args.json, "metrics")


def _print(figures: Mapping[str, Any], as_json: bool, title: str) -> int:
    if as_json:
        print_json(figures)
    else:
        print_table(figures, title=title)
    return 0


def _run_memory(args: argparse.Namespace) -> int:
    from runner.bench.memory import bench_memory

    result = bench_memory(
        requests=args.requests,
        concurrency=args.concurrency,
        server_workers=args.server_workers,
        policy=args.policy,
    )
    if args.json:
        print_json(result)
        return 0
    print(f"policy {result['policy']}, {result['requests']} requests")
    for sample in result["samples"]:
        print("  " + "  ".join(f"{k}={v}" for k, v in sample.items()))
    return 0


def _run_session_memory(args: argparse.Namespace) -> int:
    from runner.bench.memory import bench_session_memory

    result = bench_session_memory(
        args.trace,
        concurrency=args.concurrency,
        requests=args.requests,
        speedup=args.speedup,
        client_workers=args.client_workers,
        policies=tuple(p for p in args.policies.split(",") if p),
    )
    if args.json:
        print_json(result)
        return 0
    print(f"{result['trace']} at c={result['concurrency']}")
    for row in result["policies"]:
        logical, actual = row["peak_logical_bytes_per_lane"], row["peak_actual_bytes_per_lane"]
        ratio = f"{logical / actual:.1f}x" if actual else "-"
        print(
            f"  {row['policy']:>9}: {row['requests']} requests, {row['errors']} errors; "
            f"peak per lane {logical / 1e3:,.1f} kB as text, {actual / 1e3:,.1f} kB as pieces "
            f"({ratio} lower); at the end {row['end_copies']} copies, "
            f"{row['orphans']} orphans ({row['orphan_logical_bytes']:,} B as text, "
            f"{row['orphan_own_bytes']:,} B their own; books: {row['books_orphans']}); "
            f"RSS {row['rss_mb_before']} -> {row['rss_mb_after']} MB"
        )
    return 0


def _run_verify(args: argparse.Namespace) -> int:
    from runner.bench.verify import bench_verify

    result = bench_verify(args.dir, requests=args.requests, gaps_per_request=args.gaps_per_request)
    _print(result, args.json, "verify")
    return 0 if result["ok"] else 1
