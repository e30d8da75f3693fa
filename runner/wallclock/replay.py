"""The wall-clock driver: the replay engine's credits sent as real HTTP requests.

Owns the asyncio loop of a live run: waking when a credit is due, one task per request, turning
each response into a RequestRecord, the failure threshold, prompt cancellation, the drain after
the duration, and the sink (a snapshot about once a second, records in batches). Routing,
caching and affinity are the Engine's, exactly as in simulation.

Client workers are identified by the Engine's `Dispatch.worker`; a `RequestSender` sends for
them (`LocalSender`: all in this process). Hosting them elsewhere is another sender: the
Dispatch (credit, worker, affinity) is all that crosses.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

from runner.client import ResponseResult, Timeouts
from runner.ending import EndedBy, Ending
from runner.metrics import RequestRecord, RunMetrics
from runner.metrics.gaps import encode_gaps
from runner.metrics.records import ErrorCategory
from runner.output import RecordDict, Sink, Snapshot, SnapshotBuilder
from runner.replay.engine import Dispatch, Engine, EngineConfig
from runner.replay.scheduler import ReplayConfig
from runner.servermetrics import ViewProvider
from runner.summary import run_summary
from runner.trace import Trace
from runner.wallclock.load import LoopLoad
from runner.wallclock.sender import LocalSender, PostingSender, RemoteWorkers, RequestSender
from runner.wallclock.served import ServedIndex

__all__ = ["DRAIN_GRACE_S", "LiveConfig", "LiveResult", "replay_live"]

# Once the scheduler has stopped issuing (duration reached, a stop), requests still in flight
# get this long to return before they are cancelled: a stalled stream must not hold the run
# open long past its duration, and a normal answer should still be measured.
DRAIN_GRACE_S: Final = 3.0
_MAX_CONNECTIONS: Final = 4096
_TIMER_FLOOR_S: Final = 0.001  # the scheduler's shortest wait (see `run`)
ERROR_SHARE_MIN_FINISHED: Final = 100  # a share over fewer requests says little
# Records go to the sink at least this often (wall seconds), not only with each snapshot: what
# a killed worker loses is what the driver and the sink held unstored (the sink flushes at
# least every 0.5 s: runs/sink.py), so about 0.75 s of answers, not a snapshot interval's more.
RECORD_HANDOFF_S: Final = 0.25


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveConfig:
    endpoint: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    headers: tuple[tuple[str, str], ...] = ()
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    timeouts: Timeouts = field(default_factory=Timeouts)
    isolate_trees: bool = True  # a marker per tree instance: users never share cache
    want_worker_id: bool = True  # ask for nvext.worker_id (Dynamo; the mock honours it)
    ignore_eos: bool = True  # output lengths as the trace recorded them
    # Stop early when this many consecutive requests failed (0: never).
    failure_threshold: int = 50
    # Stop when more than this share of the requests that ran their course failed, once
    # ERROR_SHARE_MIN_FINISHED have (None: never).
    stop_error_share: float | None = None
    snapshot_interval_s: float = 1.0
    slo_ms: Mapping[str, float] = field(default_factory=dict)  # goodput thresholds

    @property
    def connections(self) -> int:
        """Connections sized to what can be in flight: lanes times parallel subagents (opened
        on demand; the ceiling keeps an uncapped rate run within fd limits)."""
        return min(_MAX_CONNECTIONS, max(8, self.replay.concurrency * 4))


@dataclass(slots=True)
class LiveResult:
    summary: dict[str, Any]
    metrics: RunMetrics
    engine: Engine
    ended_by: Ending


async def replay_live(
    traces: Sequence[Trace],
    config: LiveConfig,
    *,
    sink: Sink | None = None,
    stop: asyncio.Event | None = None,
    sender: RequestSender | None = None,
    server_metrics: ViewProvider | None = None,
) -> LiveResult:
    """Replay `traces` against the endpoint; `stop` set from outside cancels promptly and
    keeps every record that arrived (in-flight requests end as `cancelled`). `sender`
    replaces the in-process HTTP sender (client workers hosted elsewhere); `server_metrics`
    gives each snapshot the endpoint's latest /metrics view."""
    run = _LiveRun(traces, config, sink, sender)
    run.server_metrics = server_metrics
    if isinstance(run.sender, RemoteWorkers):
        run.sender.on_worker_lost = run.lose_worker
    try:
        return await run.run(stop or asyncio.Event())
    finally:
        await run.close()


class _LiveRun:
    def __init__(
        self,
        traces: Sequence[Trace],
        config: LiveConfig,
        sink: Sink | None,
        sender: RequestSender | None,
    ) -> None:
        trees = [tree for trace in traces for tree in trace.trees]
        self.config = config
        self.sink = sink
        self.server_metrics: ViewProvider | None = None
        self.engine = Engine(trees, config.replay, config.engine)
        self.metrics = RunMetrics(slo_ms=config.slo_ms)
        self.served = ServedIndex()  # the server's worker ids -> record indices
        self.snapshots = SnapshotBuilder(
            self.engine,
            self.metrics,
            interval_s=config.snapshot_interval_s,
            duration_s=config.replay.duration_s,
            max_requests=config.replay.max_requests,
            max_trees=config.replay.max_trees,
        )
        self.sender: RequestSender = sender or LocalSender(
            traces,
            endpoint=config.endpoint,
            model=config.model,
            api_key=config.api_key,
            headers=dict(config.headers),
            timeouts=config.timeouts,
            connections=config.connections,
            isolate_trees=config.isolate_trees,
            want_worker_id=config.want_worker_id,
            ignore_eos=config.ignore_eos,
        )
        # A sender that takes dispatches without a task each (runner/fleet), else None.
        self.posting = self.sender if isinstance(self.sender, PostingSender) else None
        self.t0 = time.perf_counter()
        self.tasks: set[asyncio.Task[None]] = set()  # to cancel and await at the end
        self.load: LoopLoad | None = None  # the client's own load (from run() on)
        self.sending = 0  # requests whose task has not ended yet
        self.wake = asyncio.Event()
        # While the loop waits: the earliest due time it waits for (inf: none; None: it is
        # not waiting). An answer that makes something due before it wakes the loop.
        self.waiting_for: float | None = None
        self.consecutive_failures = 0
        self.ended: Ending | None = None  # a stop of the driver's own; else the scheduler's
        self.pending_records: list[RecordDict] = []
        self.drain_deadline: float | None = None  # when in-flight requests get cancelled
        self.workers_lost: list[dict[str, float]] = []  # {"worker", "at_s"}, in order

    def lose_worker(self, worker: int, at: float) -> None:
        """A client worker's host stopped answering at `at` (perf_counter; its owed requests
        were answered `worker_lost` by the sender): the engine drops it, its sessions fail or
        migrate. The run's log says which worker, when, and what became of what it owed."""
        at_s = round(at - self.t0, 3)  # the sender's own reading: the summary says one time
        self.workers_lost.append({"worker": worker, "at_s": at_s})
        last = len(self.workers_lost) >= self.config.engine.client_workers
        if last:
            # Nobody left to send: the run ends, with what was measured.
            self.ended = self.ended or Ending(EndedBy.WORKERS_LOST, "every client worker was lost")
        else:
            self.engine.lose_worker(worker)
        if self.sink is not None:
            self.sink.log("warning", self._loss_line(worker, at_s, last=last))
        self.wake.set()

    def _loss_line(self, worker: int, at_s: float, *, last: bool) -> str:
        where = owed = ""
        if isinstance(self.sender, RemoteWorkers):
            report = self.sender.summary(self.t0)
            host = next((h.get("host") for h in report["hosts"] if h["worker"] == worker), None)
            where = f" (process {host})" if host else ""
            loss = next((x for x in reversed(report["lost"]) if x["worker"] == worker), None)
            if loss is not None:
                sent, unread = loss["in_flight"], loss["unread"]
                owed = (
                    f"; the {sent + unread} requests it owed ({sent} sent and unanswered, "
                    f"{unread} never read) end as worker_lost, none re-sent"
                )
        if last:
            then = "every client worker is lost: the run ends"
        elif self.config.engine.on_worker_loss == "migrate":
            then = "its sessions continue on the other client workers"
        else:
            then = "its sessions end as worker_lost"
        return (
            f"client worker {worker}{where} lost at t = {at_s:.1f} s: it stopped answering"
            f"{owed}; {then}"
        )

    def now(self) -> float:
        return time.perf_counter() - self.t0

    async def run(self, stop: asyncio.Event) -> LiveResult:
        config = self.config
        engine = self.engine
        scheduler = engine.scheduler
        loop = asyncio.get_running_loop()
        relay = asyncio.create_task(self._relay_stop(stop))
        load = self.load = LoopLoad.start()
        self.t0 = time.perf_counter()
        engine.start(0.0)
        next_snapshot = config.snapshot_interval_s
        next_handoff = RECORD_HANDOFF_S
        while True:
            if stop.is_set() and self.ended is None:
                self.ended = Ending.cancelled()
            if self.ended is not None and not scheduler.stopped:
                scheduler.stop(self.now())
                self._cancel_sending()
            if scheduler.finished and not self.sending:
                break
            now = self.now()
            if scheduler.stopped and self.sending:
                if self.drain_deadline is None:
                    self.drain_deadline = now + DRAIN_GRACE_S
                elif now >= self.drain_deadline:
                    self._cancel_sending()
            posting = self.posting
            for dispatch in engine.dispatch_due(now):
                self.sending += 1
                if posting is not None and dispatch.error is None:
                    posting.post(dispatch, self._posted)
                    continue
                task = asyncio.create_task(self._send(dispatch))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
            if self.sink is not None and now >= next_snapshot:
                self._publish(final=False)
                next_snapshot = now + config.snapshot_interval_s
                next_handoff = now + RECORD_HANDOFF_S
            elif now >= next_handoff:
                self._hand_over()
                next_handoff = now + RECORD_HANDOFF_S
            if scheduler.finished and not self.sending:
                continue  # the duration ended it just now: no tick to wait for
            due = engine.next_due()
            wait_s = config.snapshot_interval_s
            if due is not None:
                wait_s = min(wait_s, max(0.0, due - self.now()))
            if self.drain_deadline is not None:
                wait_s = min(wait_s, max(0.0, self.drain_deadline - self.now()))
            if self.sink is not None:
                # Records keep coming without waking the loop (`_wake_if_needed`): their
                # handoff is on its clock.
                wait_s = min(wait_s, max(0.0, next_handoff - self.now()))
            self.wake.clear()
            if wait_s > 0:
                # Woken by an answer that needs it, by `stop`, or by this timer: no task per
                # wait. At least a millisecond: asyncio's epoll rounds a shorter wait up to one
                # anyway, and uvloop (fleet orchestrators) rounds it down to zero, which would
                # spin.
                self.waiting_for = math.inf if due is None else due
                timer = loop.call_later(max(wait_s, _TIMER_FLOOR_S), self.wake.set)
                await self.wake.wait()
                self.waiting_for = None
                timer.cancel()
            else:
                await asyncio.sleep(0)  # let responses in before issuing more
        relay.cancel()
        await load.stop()  # before the final snapshot: its read needs no running probe
        elapsed_s = self.now()
        ended = self.ended or scheduler.ending(elapsed_s)
        summary = run_summary(engine, self.metrics, elapsed_s=elapsed_s)
        summary["stopped_reason"] = ended.stopped_reason
        summary["migrations"] = _matrix(engine.caches.migrations)
        if self.workers_lost:
            summary["client_workers_lost"] = list(self.workers_lost)
        if isinstance(self.sender, RemoteWorkers):
            summary["fleet"] = self.sender.summary(self.t0)
        if isinstance(self.sender, LocalSender):
            # What the in-process workers really hold of their sessions at the end: logical
            # bytes (the copies as text) beside the bytes held as shared pieces.
            summary["session_histories"] = self.sender.histories.totals()
        if self.served.labels:
            summary["inference_worker_ids"] = {
                str(index): served for index, served in sorted(self.served.labels.items())
            }
        if self.sink is not None:
            self._publish(final=True)
        return LiveResult(summary, self.metrics, engine, ended)

    def _publish(self, *, final: bool) -> None:
        """Records first, then the snapshot that counts them: a consumer never sees a
        snapshot ahead of the records it sums."""
        self._hand_over()
        assert self.sink is not None
        self.sink.snapshot(self.snapshot(final=final))

    def _hand_over(self) -> None:
        """The records waiting in the driver, to the sink."""
        if self.pending_records and self.sink is not None:
            batch, self.pending_records = self.pending_records, []
            self.sink.records(batch)

    async def _relay_stop(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self.wake.set()

    def _cancel_sending(self) -> None:
        for task in self.tasks:
            task.cancel()
        if self.posting is not None:
            self.posting.cancel_posted()

    def _posted(self, dispatch: Dispatch, result: ResponseResult) -> None:
        """A posted dispatch's outcome (PostingSender): what `_send` does after its await."""
        self.sending -= 1
        self._finish(dispatch, result, None)

    async def _send(self, dispatch: Dispatch) -> None:
        if dispatch.error is not None:
            self.sending -= 1
            self._finish(dispatch, None, dispatch.error)
            return
        done: list[ResponseResult] = []
        try:
            await self.sender.send(dispatch, done.append)
        except asyncio.CancelledError:
            pass  # the record of the cancelled request is in `done`; the run keeps it
        finally:
            # Counted down before the wake-up `_finish` sends: the loop may run before this
            # task's done-callbacks, and must not wait a whole tick for a request that ended.
            self.sending -= 1
            if done:
                self._finish(dispatch, done[0], None)
            else:
                self.wake.set()

    def _finish(self, dispatch: Dispatch, result: ResponseResult | None, error: str | None) -> None:
        credit = dispatch.credit
        turn = credit.turn
        prompt_tokens = turn.input_tokens if turn is not None else 0
        now = self.now()
        if result is None:
            record = RequestRecord.from_credit(
                credit,
                client_worker=max(0, dispatch.worker),
                start_s=now,
                end_s=now,
                prompt_tokens=prompt_tokens,
                output_tokens=0,
                error=cast(ErrorCategory, error),
            )
        else:
            record = self._record(dispatch, result, prompt_tokens)
        self.metrics.record(record)
        if self.sink is not None:
            self.snapshots.observe(record)
            self.pending_records.append(record.to_json_dict())
        category = record.error
        if category is None:
            self.consecutive_failures = 0
        elif category != "cancelled" and not self._known_loss(dispatch, category):
            self.consecutive_failures += 1
            threshold = self.config.failure_threshold
            if threshold and self.consecutive_failures >= threshold and not self.ended:
                self.ended = Ending(
                    EndedBy.FAILURES_IN_A_ROW,
                    f"{threshold} requests in a row failed (last: {category}"
                    f"{': ' + result.error_detail if result and result.error_detail else ''})",
                )
        share = self.config.stop_error_share
        if share is not None and category is not None and not self.ended:
            overall = self.metrics.overall
            finished = overall.finished
            if finished >= ERROR_SHARE_MIN_FINISHED and overall.errors > share * finished:
                self.ended = Ending(
                    EndedBy.ERROR_SHARE,
                    f"{overall.errors} of {finished} requests failed "
                    f"({overall.errors / finished:.1%} > {share:.0%}; last: {category})",
                )
        self.engine.complete(dispatch, now, error=category, served_by=record.inference_worker)
        self._wake_if_needed()

    def _wake_if_needed(self) -> None:
        """Wake the loop when a request's end changes what it waits for: something became
        due before its timer (a next turn, a child, an arrival given the freed slot), or the
        run may end. Otherwise it sleeps on: at thousands of requests a second, a turn of the
        loop per answer was a good part of an orchestrator's CPU."""
        waiting_for = self.waiting_for
        scheduler = self.engine.scheduler
        if waiting_for is None or self.ended is not None or scheduler.stopped:
            self.wake.set()
            return
        due = scheduler.next_due()
        if (due is not None and due < waiting_for) or scheduler.finished:
            self.wake.set()

    def _known_loss(self, dispatch: Dispatch, category: str) -> bool:
        """A `worker_lost` the run was told of: what a lost worker owed, or a turn of a session
        that ended with it. Such failures are the loss `lose_worker` reported once, not the
        endpoint failing, so they must not trip the failure threshold: a worker that owed more
        than the threshold would otherwise end a run that is meant to go on (PRODUCT §4.3).
        A `worker_lost` for a worker not lost (the fleet gave up on Redis) still counts: the
        threshold is what ends such a run."""
        if category != ErrorCategory.WORKER_LOST:
            return False
        return dispatch.error is not None or any(
            lost["worker"] == dispatch.worker for lost in self.workers_lost
        )

    def _record(
        self, dispatch: Dispatch, result: ResponseResult, prompt_tokens: int
    ) -> RequestRecord:
        t0 = self.t0
        chunks = result.chunk_times_s
        itl_ms = None
        # Chunks are timed per read: a stream whose tokens all came in one read (a late loop,
        # a server that buffers) shows no gap between them, which is no ITL of 0 ms: none.
        chunk_gaps = None
        if len(chunks) > 1 and chunks[-1] > chunks[0]:
            itl_ms = 1000.0 * (chunks[-1] - chunks[0]) / (len(chunks) - 1)
            chunk_gaps = encode_gaps(chunks)  # every gap the mean is taken over
        inference_worker = self.served.index(result.served_by)
        return RequestRecord.from_credit(
            dispatch.credit,
            client_worker=dispatch.worker,
            inference_worker=inference_worker,
            start_s=result.start_s - t0,
            first_token_s=None if result.first_token_s is None else result.first_token_s - t0,
            end_s=result.end_s - t0,
            prompt_tokens=result.prompt_tokens or prompt_tokens,
            output_tokens=result.output_tokens or 0,
            cached_tokens=result.cached_tokens,
            itl_ms=itl_ms,
            chunk_gaps=chunk_gaps,
            status=result.status,
            error=cast(ErrorCategory | None, None if result.error is None else str(result.error)),
        )

    def snapshot(self, *, final: bool = False) -> Snapshot:
        """Everything the live dashboard shows, cumulative (a lost one costs only freshness)."""
        now = self.now()
        return self.snapshots.build(
            t_s=now,
            wall_s=now,
            in_flight=self.engine.scheduler.in_flight,
            final=final,
            server_metrics=None if self.server_metrics is None else self.server_metrics.latest(),
            hosts=self.sender.host_view(self.t0)
            if isinstance(self.sender, RemoteWorkers)
            else None,
            client=self.load.read() if self.load is not None else None,
        )

    async def close(self) -> None:
        if self.posting is not None:
            self.posting.cancel_posted()
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.sender.aclose()


def _matrix(migrations: dict[tuple[int, int], int]) -> list[list[int]]:
    """[[from, to, count], ...]: compact and JSON-able."""
    return [[a, b, n] for (a, b), n in sorted(migrations.items())]
