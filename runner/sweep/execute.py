"""Running a sweep: the I/O shell around the Planner.

A live sweep runs its points strictly one after another against its one endpoint, waiting
before each until the server is drained (its /metrics show nothing running or queued) or, on
a server without such figures, for the cool-down between points: a point must not measure
its predecessor's tail. The simulated twin runs each batch of independent points in parallel
across processes (virtual time needs no quiet server). Both feed the same Planner and return
the same SweepReport; `run_point` is the one way a point becomes a run and a PointResult.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from typing import Literal

import httpx

from runner.errors import Stopped
from runner.output import Sink
from runner.run import load_workload, run
from runner.servermetrics import parse_exposition, read_exposition, scrape_headers
from runner.spec import EndpointTarget, RunSpec
from runner.sweep.plan import Planner
from runner.sweep.report import SweepReport, build_report
from runner.sweep.results import PointResult, PointTally, point_result
from runner.sweep.spec import Point, SweepSpec
from runner.trace import Trace

__all__ = ["Log", "OnResult", "run_point", "run_sweep", "wait_until_drained"]

Log = Callable[[Literal["info", "warning", "error"], str], None]
OnResult = Callable[[PointResult, Planner], None]

_DRAIN_POLL_S = 0.5
_SCRAPE_TIMEOUT_S = 5.0


def run_sweep(
    sweep: SweepSpec,
    *,
    on_result: OnResult | None = None,
    log: Log | None = None,
    stop: threading.Event | None = None,
    processes: int | None = None,
) -> SweepReport:
    """Run `sweep` to its end (or until `stop` is set: the point running is cancelled and the
    report says `cancelled`). `on_result` hears of each point as it finishes; `log` gets the
    drain waits and each live run's own log lines. `processes`: the simulated twin's worker
    processes (default: one per core). Bad input raises BadInput; an endpoint that cannot
    serve raises EndpointError before its point sends anything."""
    stop = stop or threading.Event()
    started = time.perf_counter()
    planner = Planner(sweep)
    if isinstance(sweep.base.target, EndpointTarget):
        _run_live(sweep, sweep.base.target, planner, on_result, log, stop)
    else:
        _run_simulated(sweep, planner, on_result, stop, processes or os.cpu_count() or 1)
    status: Literal["completed", "cancelled"] = "cancelled" if stop.is_set() else "completed"
    return build_report(planner, status=status, wall_s=time.perf_counter() - started)


def run_point(
    sweep: SweepSpec,
    point: Point,
    *,
    traces: Sequence[Trace] | None = None,
    sink: Sink | None = None,
    stop: threading.Event | None = None,
) -> PointResult:
    """Run one point and read its result; `sink` also sees the run's snapshots, records and
    log (the web worker's own sink, when it drives a sweep point by point)."""
    spec = sweep.spec_for(point)
    tally = PointTally(sink)
    started = time.perf_counter()
    result = run(spec, traces=traces, sink=tally, stop=stop)
    return point_result(sweep, point, result.summary, tally, wall_s=time.perf_counter() - started)


# -- live --------------------------------------------------------------------------------------


def _run_live(
    sweep: SweepSpec,
    target: EndpointTarget,
    planner: Planner,
    on_result: OnResult | None,
    log: Log | None,
    stop: threading.Event,
) -> None:
    workloads = _Workloads()
    first = True
    while not stop.is_set() and (pending := planner.pending()):
        point = pending[0]
        wait_until_drained(
            target,
            timeout_s=sweep.drain_timeout_s,
            cooldown_s=0.0 if first else sweep.cooldown_s,
            stop=stop,
            log=log,
        )
        if stop.is_set():
            break
        first = False
        label = f"{point.arm} {sweep.load_text(point.load, point.phase)} #{point.repeat + 1}"
        try:
            traces = workloads.get(sweep.spec_for(point), stop)
        except Stopped:
            break
        result = run_point(
            sweep,
            point,
            traces=traces,
            sink=None if log is None else _LogSink(log, label),
            stop=stop,
        )
        planner.record(result)
        if on_result is not None:
            on_result(result, planner)


def wait_until_drained(
    target: EndpointTarget,
    *,
    timeout_s: float,
    cooldown_s: float,
    stop: threading.Event,
    log: Log | None = None,
) -> None:
    """Wait until the server's /metrics show nothing running and nothing queued (at most
    `timeout_s`, then go on saying so); a server without those figures gets `cooldown_s`
    of quiet instead."""
    url = target.metrics_scrape_url
    if url is not None:
        headers = scrape_headers(
            url, endpoint_url=target.url, headers=target.headers, api_key=target.api_key_value
        )
        deadline = time.monotonic() + timeout_s
        with httpx.Client(headers=headers, timeout=_SCRAPE_TIMEOUT_S) as client:
            while (load := _server_load(client, url)) is not None:
                running, queued = load
                if running == 0 and queued == 0:
                    return
                if time.monotonic() >= deadline:
                    _log(
                        log,
                        "warning",
                        f"the server still has {running:g} running and {queued:g} queued "
                        f"after {timeout_s:g} s: another client may be using it, and the next "
                        "point's latencies include that load",
                    )
                    return
                if stop.wait(_DRAIN_POLL_S):
                    return
    if cooldown_s > 0:
        where = url or "no metrics URL"
        _log(log, "info", f"no running/queued figures ({where}): cooling down {cooldown_s:g} s")
        stop.wait(cooldown_s)


def _server_load(client: httpx.Client, url: str) -> tuple[float, float] | None:
    """(running, queued) summed over the server's workers; None when it does not tell."""
    try:
        response = client.get(url)
    except httpx.HTTPError:
        return None
    if not response.is_success:
        return None
    reading = read_exposition(parse_exposition(response.text))
    running = reading.gauges.get("running")
    queued = reading.gauges.get("queue_depth")
    if running is None and queued is None:
        return None
    return sum((running or {}).values()), sum((queued or {}).values())


class _LogSink:
    """A live point's log lines, prefixed with the point; snapshots and records are the
    tally's."""

    def __init__(self, log: Log, label: str) -> None:
        self._log = log
        self._label = label

    def snapshot(self, snapshot: object) -> None:
        pass

    def records(self, batch: object) -> None:
        pass

    def log(self, level: Literal["info", "warning", "error"], message: str) -> None:
        self._log(level, f"[{self._label}] {message}")


def _log(log: Log | None, level: Literal["info", "warning", "error"], message: str) -> None:
    if log is not None:
        log(level, message)


class _Workloads:
    """The workload of the points run lately, loaded once: points differ in load and seed,
    and a workload depends on the seed only when it is generated without its own."""

    def __init__(self, keep: int = 2) -> None:
        self._keep = keep
        self._loaded: dict[tuple[str, int | None], list[Trace]] = {}

    def get(self, spec: RunSpec, stop: threading.Event | None = None) -> list[Trace]:
        workload = spec.workload
        seeded = workload.uses_synthetic and workload.synthetic is None
        key = (workload.model_dump_json(), spec.seed if seeded else None)
        traces = self._loaded.pop(key, None)
        if traces is None:
            traces = load_workload(workload, seed=spec.seed, stop=stop)
        self._loaded[key] = traces  # the most recent last
        while len(self._loaded) > self._keep:
            del self._loaded[next(iter(self._loaded))]
        return traces


# -- the simulated twin ------------------------------------------------------------------------


def _run_simulated(
    sweep: SweepSpec,
    planner: Planner,
    on_result: OnResult | None,
    stop: threading.Event,
    processes: int,
) -> None:
    # spawn, not fork: a forked child of a threaded parent (a test runner, the web worker) may
    # inherit a lock some thread held.
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(
        max_workers=processes, mp_context=context, initializer=_child_init
    ) as pool:
        while not stop.is_set() and (pending := planner.pending()):
            futures = {pool.submit(_simulate_point, sweep, point): point for point in pending}
            try:
                for future in concurrent.futures.as_completed(futures):
                    result = future.result()
                    planner.record(result)
                    if on_result is not None:
                        on_result(result, planner)
                    if stop.is_set():
                        break
            finally:
                for future in futures:
                    future.cancel()


# Each process of the pool (spawned: its own import of this module) keeps its own.
_CHILD_WORKLOADS = _Workloads()


def _child_init() -> None:
    # Ctrl-C is the parent's to handle (it cancels what has not started); a child that took
    # it too would die mid-point and break the pool.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _simulate_point(sweep: SweepSpec, point: Point) -> PointResult:
    return run_point(sweep, point, traces=_CHILD_WORKLOADS.get(sweep.spec_for(point)))
