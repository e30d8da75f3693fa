"""Virtual-time simulation: the replay engine against the simulated inference cluster.

Drives the very same Engine (scheduler, router, session caches, affinity) as live replay, with
a discrete-event loop instead of a wall clock: an hour of agentic traffic runs in seconds.
Owns only the event loop, the request -> cluster translation and the periodic snapshots.
"""

from __future__ import annotations

import hashlib
import heapq
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from runner.cluster import Cluster, ClusterConfig, ClusterRequest, Rejection
from runner.dynamo import PARENT_SESSION_HEADER, SESSION_HEADER
from runner.ending import EndedBy, Ending
from runner.errors import ErrorCategory
from runner.metrics import RequestRecord, RunMetrics
from runner.output import RecordDict, Sink, Snapshot, SnapshotBuilder
from runner.replay.engine import Dispatch, Engine, EngineConfig
from runner.replay.scheduler import ReplayConfig
from runner.sim.blocks import BlockKeys
from runner.summary import run_summary
from runner.trace.model import Tree

__all__ = ["STALL_EVENTS", "SimConfig", "SimResult", "simulate"]

_NO_HEADERS: dict[str, str] = {}
_STOP_CHECK_EVENTS: Final = 4096  # events between looks at the stop flag (cheap, but not free)
_RECORD_BATCH: Final = 8192  # records handed to the sink at once between snapshots
# A zero-latency cluster answers at the instant it is asked: a workload that never waits
# (closed timing, zero recorded delays) then issues request after request without the clock
# moving, and a duration is never reached. With no count to stop it, this many events at one
# instant (a few seconds of wall time) end the run with a reason instead.
STALL_EVENTS: Final = 50_000


@dataclass(frozen=True, slots=True, kw_only=True)
class SimConfig:
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    # Salt prompt blocks per tree instance (two users never share cache); False measures
    # cross-user sharing of identical traces.
    isolate_trees: bool = True
    snapshot_interval_s: float = 0.0  # > 0: a sink snapshot every this many simulated seconds
    slo_ms: Mapping[str, float] = field(default_factory=dict)  # goodput thresholds


@dataclass(slots=True)
class SimResult:
    summary: dict[str, Any]
    metrics: RunMetrics
    engine: Engine
    cluster: Cluster
    ended_by: Ending
    records: list[RequestRecord] | None = None


def simulate(
    trees: Sequence[Tree],
    config: SimConfig,
    *,
    sink: Sink | None = None,
    stop: threading.Event | None = None,
    keep_records: bool = False,
) -> SimResult:
    """Run in virtual time to the end. With a sink: a snapshot every `snapshot_interval_s`
    simulated seconds (and a final one), records in batches before each snapshot. `stop`
    (set from any thread) ends the run at the next look, keeping what was measured."""
    engine = Engine(trees, config.replay, config.engine)
    cluster = Cluster(config.cluster)
    metrics = RunMetrics(slo_ms=config.slo_ms)
    records: list[RequestRecord] | None = [] if keep_records else None
    pending: list[RecordDict] = []
    builder = SnapshotBuilder(
        engine,
        metrics,
        interval_s=config.snapshot_interval_s or 1.0,
        duration_s=config.replay.duration_s,
        max_requests=config.replay.max_requests,
        max_trees=config.replay.max_trees,
    )
    wall_start = time.perf_counter()
    cancelled = False
    events = 0
    trace_block = trees[0].block_size if trees else 64
    keys = BlockKeys(
        trace_block_tokens=trace_block, cluster_block_tokens=config.cluster.block_size_tokens
    )
    # Completions: (end time, sequence, dispatch, record fields).
    done: list[tuple[float, int, Dispatch, RequestRecord]] = []
    seq = 0
    now_s = 0.0
    next_snapshot_s = config.snapshot_interval_s if config.snapshot_interval_s > 0 else None
    replay = config.replay
    # Only a run without a count to end it can stall for ever.
    watch_stall = replay.max_requests is None and replay.max_trees is None
    stalled: Ending | None = None
    still_since = 0  # the event count when the clock last moved
    clock_s = 0.0
    engine.start(0.0)
    while True:
        events += 1
        if events % _STOP_CHECK_EVENTS == 0:
            if stop is not None and stop.is_set():
                cancelled = True
                break
            if now_s > clock_s:
                clock_s, still_since = now_s, events
            elif watch_stall and stalled is None and events - still_since > STALL_EVENTS:
                stalled = Ending(
                    EndedBy.CLOCK_STALLED,
                    f"the simulated clock stood still at {now_s:.6g} s for {STALL_EVENTS:,} "
                    "events: the cluster answers instantly (time_scale 0) and the workload "
                    "never waits; use time_scale > 0, recorded delays, or max_requests",
                )
                engine.scheduler.stop(now_s)
        due = engine.next_due()
        end = done[0][0] if done else None
        if due is None and end is None:
            break
        if end is None or (due is not None and due < end):
            assert due is not None
            now_s = due
            for dispatch in engine.dispatch_due(now_s):
                record = _submit(cluster, keys, dispatch, now_s, config.isolate_trees)
                seq += 1
                heapq.heappush(done, (record.end_s, seq, dispatch, record))
        else:
            now_s, _, dispatch, record = heapq.heappop(done)
            metrics.record(record)
            if records is not None:
                records.append(record)
            if sink is not None:
                builder.observe(record)
                pending.append(record.to_json_dict())
                if len(pending) >= _RECORD_BATCH:
                    sink.records(pending)
                    pending = []
            engine.complete(dispatch, now_s, error=record.error, served_by=record.inference_worker)
        if next_snapshot_s is not None and sink is not None and now_s >= next_snapshot_s:
            if pending:
                sink.records(pending)
                pending = []
            sink.snapshot(_snapshot(builder, cluster, now_s, wall_start, len(done)))
            next_snapshot_s = now_s + config.snapshot_interval_s
    ended = stalled or engine.scheduler.ending(now_s)
    if cancelled:
        engine.scheduler.stop(now_s)
        ended = Ending.cancelled()
    elapsed_s = now_s
    summary = run_summary(
        engine, metrics, elapsed_s=elapsed_s, server_bound_keys=cluster.bound_keys(now_s)
    )
    if sink is not None:
        if pending:
            sink.records(pending)
        sink.snapshot(_snapshot(builder, cluster, now_s, wall_start, len(done), final=True))
    return SimResult(summary, metrics, engine, cluster, ended, records)


def _submit(
    cluster: Cluster,
    keys: BlockKeys,
    dispatch: Dispatch,
    now_s: float,
    isolate: bool,
) -> RequestRecord:
    credit = dispatch.credit
    turn = credit.turn
    tree = credit.tree
    assert turn is not None and tree is not None
    if dispatch.error is not None:
        return RequestRecord.from_credit(
            credit,
            client_worker=-1,
            start_s=now_s,
            end_s=now_s,
            prompt_tokens=turn.input_tokens,
            output_tokens=0,
            error=ErrorCategory.WORKER_LOST,
        )
    scope = 0
    if isolate:
        # A stable digest, not hash(): str hashing is salted per process and the simulation
        # must give the same figures on every run with the same seed. Not cached: a dict of
        # every tree instance would grow with the run.
        digest = hashlib.blake2b(credit.root_id.encode(), digest_size=8).digest()
        scope = int.from_bytes(digest, "little") or 1
    headers = dict(dispatch.affinity.headers) if dispatch.affinity.headers else _NO_HEADERS
    output_tokens = 1 if credit.priming else max(1, turn.output_tokens)
    request = ClusterRequest(
        request_id=str(credit.id),
        block_keys=keys.keys(tree, credit.template_id, credit.turn_index),
        scope=scope,
        prompt_tokens=turn.input_tokens,
        output_tokens=output_tokens,
        session_control=dispatch.affinity.session_control,
        session_header=headers.get(SESSION_HEADER),
        parent_session_header=headers.get(PARENT_SESSION_HEADER),
    )
    placement = cluster.submit(request, now_s)
    if isinstance(placement, Rejection):
        return RequestRecord.from_credit(
            credit,
            client_worker=dispatch.worker,
            start_s=now_s,
            end_s=now_s,
            prompt_tokens=turn.input_tokens,
            output_tokens=0,
            status=placement.status,
            error=ErrorCategory.HTTP_5XX if placement.status >= 500 else ErrorCategory.HTTP_4XX,
        )
    return RequestRecord.from_credit(
        credit,
        client_worker=dispatch.worker,
        inference_worker=placement.worker_id,
        start_s=now_s,
        first_token_s=now_s + placement.ttft_s,
        end_s=placement.end_s,
        prompt_tokens=turn.input_tokens,
        output_tokens=output_tokens,
        cached_tokens=placement.cached_tokens,
        # As a live stream: no inter-token latency with fewer than two tokens (it read 0 ms).
        itl_ms=placement.itl_s * 1000.0 if output_tokens > 1 else None,
        status=200,
    )


def _snapshot(
    builder: SnapshotBuilder,
    cluster: Cluster,
    now_s: float,
    wall_start: float,
    in_flight: int,
    *,
    final: bool = False,
) -> Snapshot:
    bound = [worker["bound_keys"] for worker in cluster.stats(now_s)["workers"]]
    return builder.build(
        t_s=now_s,
        wall_s=time.perf_counter() - wall_start,
        in_flight=in_flight,
        bound_keys=bound,
        final=final,
    )
