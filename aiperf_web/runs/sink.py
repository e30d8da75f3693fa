"""The sink the worker hands to `runner.run`: stores snapshots as a time series, records in
bulk and log lines, and passes each stored snapshot to the live channel.

The engine calls a sink on its own thread, inside its event loop for live runs, so the sink
only appends to a queue; one writer thread owns every database write. That keeps the engine's
loop free of I/O (a run launched by the service keeps the CLI's request rate) and keeps the
ORM out of async contexts. The writer stores records in batches (COPY on PostgreSQL,
multi-row INSERTs on SQLite) at least every _RECORD_FLUSH_S, and snapshots at most every
_MIN_SAMPLE_GAP_S of *run* time (a live run sends one per `snapshot_interval_s`; a simulated
one one per simulated interval, dozens per wall second, and every one is a chart point); the
last snapshot is always stored. The live channel gets at most one per _PUBLISH_GAP_S of wall
time, latest wins (viewers fill skipped seqs from the database), and always the last.

Records waiting for the writer are bounded (_MAX_BACKLOG_BATCHES batches): a simulated run makes
records faster than any database stores them, and an unbounded queue grew with the run and
had to be written out after a cancel (tens of seconds). Past the bound `records()` waits for
the writer, unless the run is stopping; so a cancel never waits for more than that backlog.

A database blip loses nothing (issue 26 item 3): every write (records, samples, log lines)
goes through `db_retry`, which drops the broken connection and tries again with backoff while
PostgreSQL is away (a restart, a failover, terminated backends). Meanwhile the engine goes on
and the records wait in memory, bounded by AIPERF_DB_OUTAGE_BUFFER (past it the engine waits
too); a batch whose COPY may have landed before the connection died is counted, not stored
twice. Only an outage longer than AIPERF_DB_OUTAGE_S fails the run ("storing results failed:
the database was unreachable for ..."), which keeps every record stored before it.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection

from aiperf_web.runs.leaks import LeakSeries
from aiperf_web.runs.models import Run, RunLog, RunRecord, RunSample
from aiperf_web.runs.publisher import log_line, publish_log, publish_snapshot
from runner import RecordDict, Snapshot, gaps_from_text

log = logging.getLogger(__name__)

_MIN_SAMPLE_GAP_S = 0.5  # run seconds
_PUBLISH_GAP_S = 1.0  # wall seconds
# Records are stored at least this often (and at every AIPERF_RECORD_BATCH): with the engine's
# hand-over every 0.25 s (runner/wallclock/replay.py RECORD_HANDOFF_S) a killed worker loses
# about a second of answers at most (scripts/record_loss_measure.py: 2.05-2.09 s at the
# previous 1 s flush, records handed over with each snapshot; 1.12-1.26 s now, load ~28).
_RECORD_FLUSH_S = 0.5
_MAX_BACKLOG_BATCHES = 2  # records not yet stored, in AIPERF_RECORD_BATCH units
_STOP = object()
T = TypeVar("T")
_RETRY_FIRST_S = 0.2  # the first pause after a failed write; doubled up to _RETRY_MAX_S
_RETRY_MAX_S = 2.0

# Errors that say the database is away (a lost or refused connection, a terminated backend, a
# pool with no connection to give), not that the write is wrong: only these are retried. A
# constraint violation (the run deleted meanwhile, say) fails at once.
try:  # COPY goes through psycopg's own connection, whose errors Django does not wrap
    import psycopg

    DB_AWAY: tuple[type[BaseException], ...] = (
        OperationalError,
        InterfaceError,
        psycopg.OperationalError,
        psycopg.InterfaceError,
    )
except ImportError:  # pragma: no cover - the embedded shape may lack the driver
    DB_AWAY = (OperationalError, InterfaceError)


class DatabaseAway(Exception):
    """The database stayed unreachable past AIPERF_DB_OUTAGE_S."""


def db_retry(
    write: Callable[[], T],
    *,
    what: str,
    outage_s: float | None = None,
    landed: Callable[[], bool] | None = None,
    on_outage: Callable[[bool], None] | None = None,
) -> T | None:
    """`write()`, tried again with backoff on a fresh connection while the database is away,
    for at most `outage_s` (AIPERF_DB_OUTAGE_S) from the first failure; then DatabaseAway.
    `landed()`, asked after a failure, says the write took effect before the connection
    died (then None is returned). `on_outage(True/False)` hears when an outage starts and
    ends."""
    limit = float(settings.AIPERF_DB_OUTAGE_S if outage_s is None else outage_s)
    began: float | None = None
    pause = _RETRY_FIRST_S
    while True:
        try:
            if began is not None and landed is not None and landed():
                result: T | None = None
            else:
                result = write()
        except DB_AWAY as exc:
            connection.close()  # a pooled connection may be dead too: the next is fresh
            now = time.monotonic()
            if began is None:
                began = now
                log.warning("%s failed (%s): retrying while the database is away", what, exc)
                if on_outage is not None:
                    on_outage(True)
            if now - began >= limit:
                raise DatabaseAway(
                    f"the database was unreachable for over {limit:g} s "
                    f"(AIPERF_DB_OUTAGE_S) while {what}: {str(exc).strip()[:200]}"
                ) from exc
            time.sleep(min(pause, max(0.0, began + limit - now)))
            pause = min(pause * 2, _RETRY_MAX_S)
            continue
        if began is not None:
            log.warning(
                "%s succeeded after %.1f s of database outage", what, time.monotonic() - began
            )
            if on_outage is not None:
                on_outage(False)
        return result


def _split_gaps(record: RecordDict) -> tuple[dict[str, Any], bytes | None]:
    """The record without its `chunk_gaps_us` (base64 text) and those gaps as bytes, for the
    RunRecord.chunk_gaps column (4 bytes a gap, not 5.3 as text inside the JSON)."""
    data: dict[str, Any] = dict(record)
    text = data.pop("chunk_gaps_us", None)
    return data, None if text is None else gaps_from_text(text)


def records_insert(*, run_pk: int, first_seq: int, batch: Sequence[RecordDict]) -> int:
    """Store records `first_seq, first_seq+1, ...` of a run; returns how many."""
    if not batch:
        return 0
    if connection.vendor == "postgresql":
        connection.ensure_connection()
        raw = connection.connection
        dumps = json.dumps
        sql = "COPY runs_runrecord (run_id, seq, warmup, data, chunk_gaps) FROM STDIN"
        with raw.cursor() as cur, cur.copy(sql) as copy:
            write = copy.write_row
            seq = first_seq
            for record in batch:
                data, gaps = _split_gaps(record)
                write((run_pk, seq, bool(record.get("warmup")), dumps(data), gaps))
                seq += 1
    else:
        rows = []
        for i, record in enumerate(batch):
            data, gaps = _split_gaps(record)
            warmup = bool(record.get("warmup"))
            rows.append(
                RunRecord(
                    run_id=run_pk, seq=first_seq + i, warmup=warmup, data=data, chunk_gaps=gaps
                )
            )
        RunRecord.objects.bulk_create(rows, batch_size=500)
    return len(batch)


class RunSink:
    """The engine-facing side (snapshot, records, log) is a queue append; `close()` drains
    the queue and returns once everything is stored."""

    def __init__(self, *, run: Run, stop: threading.Event) -> None:
        self.run_pk = run.pk
        self.run_uuid = str(run.uuid)
        self.team_uuid = str(run.team.uuid)  # its runs lists hear of each published snapshot
        self.stop = stop
        self.batch_size = settings.AIPERF_RECORD_BATCH
        self.records_written = 0
        self.samples_written = 0
        # The leak verdict published with each snapshot: worked out here once, for every viewer.
        self._leaks = LeakSeries()
        self.failure: BaseException | None = None
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        # Records handed over and not yet stored; the engine waits while it is over the bound.
        self._backlog = 0
        self._max_backlog = _MAX_BACKLOG_BATCHES * self.batch_size
        # While the database is away the engine goes on: records wait up to this many.
        self._outage_backlog = max(self._max_backlog, settings.AIPERF_DB_OUTAGE_BUFFER)
        self._outage_began: float | None = None
        self.outages: list[float] = []  # seconds each outage the run rode out lasted
        self._room = threading.Condition()
        self._writer = threading.Thread(
            target=self._write_loop, name=f"run-sink-{run.pk}", daemon=True
        )
        self._writer.start()
        self._closed = False
        self._last_publish = 0.0

    # -- the Sink protocol (engine thread) ---------------------------------------------------

    def snapshot(self, snapshot: Snapshot) -> None:
        self._queue.put(("snapshot", snapshot))

    def records(self, batch: list[RecordDict]) -> None:
        with self._room:
            self._backlog += len(batch)
            self._queue.put(("records", batch))
            # Not while stopping: a cancel must end the run, not wait for the database.
            while (
                self._backlog > self._bound() and not self.stop.is_set() and self._writer.is_alive()
            ):
                self._room.wait(0.1)

    def _bound(self) -> int:
        return self._max_backlog if self._outage_began is None else self._outage_backlog

    def _outage(self, away: bool) -> None:
        """The writer's retries say the database went away or came back."""
        with self._room:
            if away:
                self._outage_began = time.monotonic()
            elif self._outage_began is not None:
                self.outages.append(time.monotonic() - self._outage_began)
                self._outage_began = None
            self._room.notify_all()
        if not away:
            lasted = self.outages[-1]
            self._queue.put(
                (
                    "log",
                    (
                        "warning",
                        f"the database was unreachable for {lasted:.1f} s: the run went on, "
                        f"its records waited in memory ({self._backlog} now) and are stored",
                    ),
                )
            )

    def log(self, level: Literal["info", "warning", "error"], message: str) -> None:
        self._queue.put(("log", (level, message)))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._queue.put(_STOP)
        self._writer.join()

    # -- the writer thread ---------------------------------------------------------------------

    def _write_loop(self) -> None:
        pending: list[RecordDict] = []
        unsaved: Snapshot | None = None
        last_sample_t: float | None = None
        last_flush = time.monotonic()
        try:
            while True:
                try:
                    item = self._queue.get(timeout=_RECORD_FLUSH_S / 2)
                except queue.Empty:
                    item = None
                if item is _STOP:
                    break
                if item is not None:
                    kind, payload = item
                    if kind == "records":
                        pending.extend(payload)
                    elif kind == "snapshot":
                        unsaved = payload
                    else:
                        level, message = payload
                        self._store_log(level, message)
                now = time.monotonic()
                if pending and (
                    len(pending) >= self.batch_size or now - last_flush >= _RECORD_FLUSH_S
                ):
                    self._flush(pending)
                    pending = []
                    last_flush = now
                if unsaved is not None:
                    t_s = float(unsaved.get("t_s") or 0.0)
                    if last_sample_t is None or t_s - last_sample_t >= _MIN_SAMPLE_GAP_S:
                        self._store_sample(unsaved, final=False)
                        unsaved = None
                        last_sample_t = t_s
            # The end: everything still buffered is stored.
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not _STOP and item[0] == "records":
                    pending.extend(item[1])
                elif item is not _STOP and item[0] == "snapshot":
                    unsaved = item[1]
                elif item is not _STOP and item[0] == "log":
                    # Lines queued behind the stop (an outage's end, say) are kept too.
                    self._store_log(*item[1])
            self._flush(pending)
            if unsaved is not None:
                self._store_sample(unsaved, final=True)
        except BaseException as exc:  # stop the run rather than measure into the void
            log.exception("run %s: storing results failed", self.run_uuid)
            self.failure = exc
            self.stop.set()
        finally:
            connection.close()

    def _store_log(self, level: str, message: str) -> None:
        line = db_retry(
            lambda: RunLog.objects.create(run_id=self.run_pk, level=level, message=message[:2000]),
            what=f"run {self.run_uuid}: storing a log line",
            on_outage=self._outage,
        )
        if line is not None:
            publish_log(run_uuid=self.run_uuid, lines=[log_line(line)])

    def _store_sample(self, snapshot: Snapshot, *, final: bool) -> None:
        data: dict[str, Any] = dict(snapshot)
        seq = self.samples_written
        t_s = float(data.get("t_s") or 0.0)
        db_retry(
            lambda: RunSample.objects.create(run_id=self.run_pk, seq=seq, t_s=t_s, data=data),
            what=f"run {self.run_uuid}: storing snapshot {seq}",
            landed=lambda: RunSample.objects.filter(run_id=self.run_pk, seq=seq).exists(),
            on_outage=self._outage,
        )
        self.samples_written += 1
        self._leaks.add(t_s, data)
        now = time.monotonic()
        if final or now - self._last_publish >= _PUBLISH_GAP_S:
            self._last_publish = now
            publish_snapshot(
                run_uuid=self.run_uuid,
                seq=seq,
                t_s=t_s,
                data=data,
                leak=dict(self._leaks.brief()),
                team_uuid=self.team_uuid,
            )

    def _flush(self, batch: list[RecordDict]) -> None:
        first = self.records_written
        end = first + len(batch)

        def landed() -> bool:
            # COPY is one statement: a batch is stored whole or not at all.
            stored = RunRecord.objects.filter(run_id=self.run_pk, seq__gte=first, seq__lt=end)
            return stored.count() == len(batch)

        db_retry(
            lambda: records_insert(run_pk=self.run_pk, first_seq=first, batch=batch),
            what=f"run {self.run_uuid}: storing records {first}..{end - 1}",
            landed=landed,
            on_outage=self._outage,
        )
        self.records_written = end
        with self._room:
            self._backlog -= len(batch)
            self._room.notify_all()
