"""Virtual-time simulation: the replay engine against the simulated inference cluster.

Drives the very same Engine (scheduler, router, session caches, affinity) as live replay, with
a discrete-event loop instead of a wall clock: an hour of agentic traffic runs in seconds.
Owns only the event loop, the request -> cluster translation and the periodic snapshots.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from runner.cluster import Cluster, ClusterConfig, ClusterRequest, Rejection
from runner.metrics import RequestRecord, RunMetrics
from runner.replay.engine import Dispatch, Engine, EngineConfig
from runner.replay.scheduler import ReplayConfig
from runner.replay.summary import run_summary
from runner.sim.blocks import BlockKeys
from runner.trace.model import Tree

__all__ = ["SimConfig", "SimResult", "simulate"]

Sink = Callable[[dict[str, Any]], None]
_NO_HEADERS: dict[str, str] = {}


@dataclass(frozen=True, slots=True, kw_only=True)
class SimConfig:
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    # Salt prompt blocks per tree instance (two users never share cache); False measures
    # cross-user sharing of identical traces.
    isolate_trees: bool = True
    snapshot_interval_s: float = 0.0  # > 0: call the sink every this many simulated seconds


@dataclass(slots=True)
class SimResult:
    summary: dict[str, Any]
    metrics: RunMetrics
    engine: Engine
    cluster: Cluster
    records: list[RequestRecord] | None = None


def simulate(
    trees: Sequence[Tree],
    config: SimConfig,
    *,
    sink: Sink | None = None,
    keep_records: bool = False,
) -> SimResult:
    engine = Engine(trees, config.replay, config.engine)
    cluster = Cluster(config.cluster)
    metrics = RunMetrics()
    records: list[RequestRecord] | None = [] if keep_records else None
    trace_block = trees[0].block_size if trees else 64
    keys = BlockKeys(
        trace_block_tokens=trace_block, cluster_block_tokens=config.cluster.block_size_tokens
    )
    # Completions: (end time, sequence, dispatch, record fields).
    done: list[tuple[float, int, Dispatch, RequestRecord]] = []
    seq = 0
    now_s = 0.0
    next_snapshot_s = config.snapshot_interval_s if config.snapshot_interval_s > 0 else None
    engine.start(0.0)
    while True:
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
            engine.complete(dispatch, now_s, error=record.error)
        if next_snapshot_s is not None and sink is not None and now_s >= next_snapshot_s:
            sink(_snapshot(engine, metrics, now_s))
            next_snapshot_s = now_s + config.snapshot_interval_s
    elapsed_s = now_s
    summary = run_summary(engine, metrics, elapsed_s=elapsed_s)
    summary["affinity_keys_bound_server"] = cluster.bound_keys(now_s)
    if sink is not None:
        sink(_snapshot(engine, metrics, now_s))
    return SimResult(summary, metrics, engine, cluster, records)


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
            error="worker_lost",
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
        session_header=headers.get("X-Dynamo-Session-ID"),
        parent_session_header=headers.get("X-Dynamo-Parent-Session-ID"),
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
            error="http_5xx" if placement.status >= 500 else "http_4xx",
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
        itl_ms=placement.itl_s * 1000.0,
        status=200,
    )


def _snapshot(engine: Engine, metrics: RunMetrics, now_s: float) -> dict[str, Any]:
    return {
        "t_s": now_s,
        "state": engine.state_sizes(),
        "routing": engine.routing_summary(),
        "client_workers": engine.worker_snapshot(),
        "latency": metrics.summary_percentiles(),
        "requests": metrics.overall.requests,
        "errors": metrics.overall.errors,
    }
