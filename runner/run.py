"""The one run call: a RunSpec in, a typed result out, on either clock.

Owns what every caller (the CLI, the web service's worker, tests) would otherwise repeat:
loading the workload, the endpoint's preflight and `session_control` probe before a live run,
the choice of driver, the stop signal across threads, and the final status. The drivers own
timing and measuring; this module never routes or sends. A stop honoured before the drivers
start (while a big synthetic workload is generated, during the preflight) ends the run
`cancelled` at once, with nothing measured.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from runner.client import EndpointInfo, preflight
from runner.ending import Ending, RunStatus
from runner.errors import SpecError, Stopped
from runner.fleet import FleetPlan, LocalHosts, fleet_loop, host_groups
from runner.metrics.histogram import LatencyHistogram
from runner.output import LATENCY_KEYS, SUMMARY_KEYS, Sink, Summary
from runner.servermetrics import ServerMetricsScraper, scrape_headers
from runner.sim.simulator import SimConfig, simulate
from runner.spec import EndpointTarget, RunSpec, SimulatedTarget, Workload
from runner.trace import SyntheticConfig, Trace, generate_synthetic, load_trace
from runner.trace.scale import fitting_factor, scale_traces
from runner.wallclock import LiveConfig, replay_live
from runner.wallclock.fit import measure_context
from runner.wallclock.probe import probe_affinity
from runner.wallclock.sender import RequestSender

__all__ = ["RunResult", "load_workload", "run", "run_async"]

_STOP_POLL_S = 0.05  # how often a live run looks at a threading.Event set by another thread

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class RunResult:
    summary: Summary
    ended_by: Ending  # why it ended, as the driver or the scheduler decided (runner.ending)

    @property
    def status(self) -> RunStatus:
        return self.ended_by.status


def load_workload(
    workload: Workload, *, seed: int, stop: threading.Event | None = None
) -> list[Trace]:
    """The traces a spec names, plus the synthetic workload when asked (or when no trace is
    given). Raises TraceError (file, line, fix) or SpecError; Stopped once `stop` is set
    (looked at between files and within the synthetic generation)."""
    traces = []
    for path in workload.traces:
        if stop is not None and stop.is_set():
            raise Stopped("while loading the workload's traces")
        traces.append(load_trace(path, max_bytes=workload.max_trace_bytes))
    if workload.uses_synthetic:
        config = workload.synthetic or SyntheticConfig(seed=seed)
        traces.append(generate_synthetic(config, stop=stop))
    if not any(trace.trees for trace in traces):
        raise SpecError("the workload has no agent trees: check the trace files")
    return traces


def run(
    spec: RunSpec,
    *,
    traces: Sequence[Trace] | None = None,
    sink: Sink | None = None,
    stop: threading.Event | None = None,
    fleet: FleetPlan | None = None,
) -> RunResult:
    """Run `spec` to its end and return the result; blocks. `stop`, set from any thread,
    ends the run promptly and keeps what was measured (status `cancelled`). Must not be
    called from a running event loop (use `run_async`). Bad input raises BadInput; an
    endpoint that cannot serve the run raises EndpointError before anything is sent."""
    if isinstance(spec.target, SimulatedTarget):
        return _simulate(spec, spec.target, traces, sink, stop)
    # A fleet's orchestrator does no HTTP: its time goes on loop wake-ups (a Redis round trip
    # out, one back, per scheduler tick), which uvloop makes about half as dear.
    loop_factory = fleet_loop if spec.client_worker_processes else None
    with asyncio.Runner(loop_factory=loop_factory) as loop_runner:
        return loop_runner.run(run_async(spec, traces=traces, sink=sink, stop=stop, fleet=fleet))


async def run_async(
    spec: RunSpec,
    *,
    traces: Sequence[Trace] | None = None,
    sink: Sink | None = None,
    stop: threading.Event | asyncio.Event | None = None,
    fleet: FleetPlan | None = None,
) -> RunResult:
    """`run` for callers already inside an event loop. A simulated target runs inline (it
    never awaits), so prefer `run` for those. A spec with `client_worker_processes` needs
    `fleet`: the Redis its client-worker hosts meet it on, and how to start them."""
    target = spec.target
    if isinstance(target, SimulatedTarget):
        thread_stop = stop if isinstance(stop, threading.Event) else None
        return _simulate(spec, target, traces, sink, thread_stop)
    async_stop = asyncio.Event()
    # The workload is loaded on a thread (a big synthetic one takes tens of seconds: on the
    # loop it would also hold an asyncio.Event's setter), which looks at this flag.
    load_stop = threading.Event()
    relay = asyncio.create_task(_relay(stop, async_stop, load_stop)) if stop is not None else None
    try:
        try:
            if traces is not None:
                loaded = list(traces)
            else:
                loaded = await asyncio.to_thread(
                    load_workload, spec.workload, seed=spec.seed, stop=load_stop
                )
            unavailable = await _unless_stopped(_check_endpoint(spec, target, sink), async_stop)
            loaded, length_scale = await _unless_stopped(
                _fit_lengths(spec, target, loaded, sink), async_stop
            )
            config = _live_config(spec, target)
            sender, hosts = await _fleet(spec, config, loaded, fleet, sink, async_stop)
        except Stopped as stopped:
            return _stopped_before_start(stopped, sink)
        scraper = _metrics_scraper(target, sink)
        await scraper.start()
        # The workload and everything else alive now lasts the whole replay: out of the cyclic
        # collector's sight while it runs, whose full collections walked it all and paused the
        # loop for tens of milliseconds (the fleet's round trip p99: 60-120 ms, 15 ms frozen).
        # Unfrozen at the end, so whatever of it is garbage then is collected as usual.
        gc.freeze()
        try:
            result = await replay_live(
                loaded,
                config,
                sink=sink,
                stop=async_stop,
                sender=sender,
                server_metrics=scraper,
            )
        finally:
            gc.unfreeze()
            await scraper.stop()
            if hosts is not None:
                await asyncio.to_thread(hosts.close)
    finally:
        if relay is not None:
            relay.cancel()
    summary = cast(Summary, result.summary)
    summary["server_metrics"] = scraper.summary()
    if length_scale != 1:
        summary["length_scale"] = length_scale
    if unavailable:
        summary["unavailable"] = unavailable
        if "prefix_cache_hit_ratio" in unavailable:
            summary["prefix_cache_hit_ratio"] = None
    return _finish(summary, result.ended_by)


async def _check_endpoint(
    spec: RunSpec, target: EndpointTarget, sink: Sink | None
) -> dict[str, str]:
    """The endpoint's preflight and affinity probe before a live run. Returns the metrics the
    endpoint cannot provide (metric -> why)."""
    info = await preflight(
        target.url,
        model=target.model,
        api_key=target.api_key_value,
        headers=target.headers,
        want_worker_id=target.want_worker_id,
        timeout_s=target.connect_timeout_s,
    )
    detected = await probe_affinity(
        target.url,
        model=target.model,
        affinity=spec.engine_config().affinity,
        api_key=target.api_key_value,
        headers=target.headers,
    )
    if sink is not None:
        sink.log("info", _preflight_line(info))
        if detected is not None:
            sink.log("info", f"affinity check passed: {detected.summary}")
        else:
            sink.log("info", f"affinity check: nothing to check (affinity {spec.affinity})")
    unavailable: dict[str, str] = {}
    if not info.reports_cached_tokens:
        unavailable["prefix_cache_hit_ratio"] = (
            "the endpoint reports no usage.prompt_tokens_details.cached_tokens"
        )
    if not info.reports_usage:
        unavailable["output_tokens"] = "the endpoint reports no usage: counted from chunks"
    if sink is not None:
        for metric, why in unavailable.items():
            sink.log("warning", f"{metric} unavailable: {why}")
    return unavailable


async def _fit_lengths(
    spec: RunSpec, target: EndpointTarget, traces: list[Trace], sink: Sink | None
) -> tuple[list[Trace], float]:
    """The workload scaled by `length_scale`, or, with `fit_context`, by the largest factor up
    to it at which every request fits the endpoint's context window; and that factor."""
    factor = spec.length_scale
    if spec.fit_context:
        cost = await measure_context(
            target.url,
            model=target.model,
            api_key=target.api_key_value,
            headers=target.headers,
            timeout_s=target.read_timeout_s,
        )
        factor = await asyncio.to_thread(fitting_factor, traces, cost, cap=factor)
        if sink is not None:
            sink.log(
                "info",
                f"fit_context: lengths x{factor:.4g} fit every request in the endpoint's "
                f"{cost.max_model_len} tokens ({cost.per_word:.2f} of its tokens per trace "
                f"token with a margin, {cost.overhead:.0f} more per request)",
            )
    elif factor != 1 and sink is not None:
        sink.log("info", f"length_scale: every prompt and output length x{factor:.4g}")
    return await asyncio.to_thread(scale_traces, traces, factor), factor


async def _unless_stopped(work: Awaitable[_T], stop: asyncio.Event) -> _T:
    """`work`'s result, or Stopped as soon as `stop` is set first, the work cancelled (a
    preflight waiting out its connect timeout must not hold a cancel)."""
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if task.done():
        return task.result()
    task.cancel()
    # Waited for (its connections closed) without taking its CancelledError for our own.
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()  # marked retrieved: the stop came first, whatever the check ended with
    raise Stopped("while checking the endpoint")


def _preflight_line(info: EndpointInfo) -> str:
    """The run log's preflight outcome: who answered, and what the endpoint reports."""
    served = f", served by worker {info.served_by}" if info.served_by else ""
    return (
        f"preflight passed: {info.url} answered{served}; usage "
        f"{'reported' if info.reports_usage else 'not reported'}, cached tokens "
        f"{'reported' if info.reports_cached_tokens else 'not reported'}"
    )


async def _relay(
    source: threading.Event | asyncio.Event, *targets: threading.Event | asyncio.Event
) -> None:
    if isinstance(source, asyncio.Event):
        await source.wait()
    else:
        while not source.is_set():
            await asyncio.sleep(_STOP_POLL_S)
    for target in targets:
        target.set()


def _simulate(
    spec: RunSpec,
    target: SimulatedTarget,
    traces: Sequence[Trace] | None,
    sink: Sink | None,
    stop: threading.Event | None,
) -> RunResult:
    try:
        loaded = (
            list(traces)
            if traces is not None
            else load_workload(spec.workload, seed=spec.seed, stop=stop)
        )
    except Stopped as stopped:
        return _stopped_before_start(stopped, sink)
    trees = [tree for trace in scale_traces(loaded, spec.length_scale) for tree in trace.trees]
    config = SimConfig(
        replay=spec.replay_config(),
        engine=spec.engine_config(),
        cluster=target.cluster_config(seed=spec.seed),
        isolate_trees=spec.isolate_trees,
        snapshot_interval_s=target.snapshot_interval_s,
        slo_ms=spec.slo_ms,
    )
    result = simulate(trees, config, sink=sink, stop=stop)
    summary = cast(Summary, result.summary)
    if spec.length_scale != 1:
        summary["length_scale"] = spec.length_scale
    return _finish(summary, result.ended_by)


def _metrics_scraper(target: EndpointTarget, sink: Sink | None) -> ServerMetricsScraper:
    url = target.metrics_scrape_url
    headers = (
        {}
        if url is None
        else scrape_headers(
            url, endpoint_url=target.url, headers=target.headers, api_key=target.api_key_value
        )
    )
    return ServerMetricsScraper(
        url,
        interval_s=target.metrics_interval_s,
        headers=headers,
        log=None if sink is None else sink.log,
    )


async def _fleet(
    spec: RunSpec,
    config: LiveConfig,
    traces: Sequence[Trace],
    plan: FleetPlan | None,
    sink: Sink | None,
    stop: asyncio.Event,
) -> tuple[RequestSender | None, LocalHosts | None]:
    """The client workers' hosts started and answering, when the spec wants processes."""
    if not spec.client_worker_processes:
        return None, None
    if plan is None:
        raise SpecError(
            "client_worker_processes needs a Redis the hosts and this process reach: pass "
            "--fleet-redis URL (the command line) or run it from the web service with Redis",
            fields={"client_worker_processes": "needs Redis"},
        )
    from runner.fleet.sender import FleetSender  # the Redis client, only for such runs

    groups = host_groups(spec.client_workers, spec.client_workers_per_host)
    placed_as = f"{_count(spec.client_workers, 'client worker')} in " + _count(
        len(groups), "host process", "host processes"
    )
    sender = FleetSender(
        traces, config, redis_url=plan.redis_url, run=plan.run_key, secret=plan.secret
    )
    hosts = None
    start_hosts: Callable[[], None] | None = None
    if plan.start_hosts is None:
        hosts = LocalHosts(plan.redis_url, plan.run_key, groups, secret=plan.secret)
    else:
        start_hosts = functools.partial(plan.start_hosts, plan.run_key, groups, plan.secret)
    on_wait = None if sink is None else functools.partial(sink.log, "info")
    if sink is not None:
        sink.log("info", f"waiting for {placed_as} (fleet {plan.run_key})")
    try:
        await sender.start(
            timeout_s=plan.start_timeout_s, start_hosts=start_hosts, on_wait=on_wait, stop=stop
        )
    except BaseException:
        await sender.aclose()
        if hosts is not None:
            await asyncio.to_thread(hosts.close, 5.0)
        raise
    if sink is not None:
        placed = sorted({str(beat.get("host")) for beat in sender.heartbeats.values()})
        sink.log("info", f"{placed_as} answering on {', '.join(placed)}")
    return sender, hosts


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def _live_config(spec: RunSpec, target: EndpointTarget) -> LiveConfig:
    return LiveConfig(
        endpoint=target.url,
        model=target.model,
        api_key=target.api_key_value,
        headers=tuple(target.headers.items()),
        replay=spec.replay_config(),
        engine=spec.engine_config(),
        timeouts=target.timeouts,
        isolate_trees=spec.isolate_trees,
        want_worker_id=target.want_worker_id,
        failure_threshold=target.failure_threshold,
        stop_error_share=target.stop_error_share,
        snapshot_interval_s=spec.snapshot_interval_s,
        slo_ms=spec.slo_ms,
    )


def _stopped_before_start(stopped: Stopped, sink: Sink | None) -> RunResult:
    """A run cancelled before its driver started: it says where it was (the run's log), and
    its summary has every stable key, with nothing counted and no latency."""
    if sink is not None:
        sink.log("info", f"cancelled {stopped}")
    summary: dict[str, Any] = dict.fromkeys(SUMMARY_KEYS, 0)
    summary["prefix_cache_hit_ratio"] = None
    for name in LATENCY_KEYS:
        summary[name] = LatencyHistogram().summary()
    return _finish(cast(Summary, summary), Ending.cancelled(str(stopped)))


def _finish(summary: Summary, ended: Ending) -> RunResult:
    summary["status"] = ended.status
    summary["stopped_reason"] = ended.stopped_reason
    summary["ended_by"] = ended.to_json()
    return RunResult(summary=summary, ended_by=ended)
