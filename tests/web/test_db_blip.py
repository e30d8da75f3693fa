"""A database blip at the end of a run (issue 13 item 10): the engine finished, then every
database connection the run's code holds is terminated on the server
(`pg_terminate_backend`), as a PostgreSQL restart or failover does. The run's final save
retries on a fresh connection: the run ends `succeeded` with its summary, not `failed` by the
stale-run reaper with the summary lost.

A blip in the middle of a run loses nothing (issue 26 item 3): its connections are terminated
again and again while it stores records, samples, log lines and heartbeats; every write retries
(runs.sink.db_retry) and the run succeeds with as many records stored as requests answered.
An outage longer than AIPERF_DB_OUTAGE_S fails the run, which keeps what it stored.

PostgreSQL only; the run executes in this process (as `run_execute` does for the inline
commands), so only this process's connections are terminated, never another session's.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from aiperf_web.runs import claiming, executing, services
from aiperf_web.runs import sink as runs_sink
from aiperf_web.runs.models import Run, RunLog, RunRecord, Status
from aiperf_web.runs.sink import RunSink
from tests.infra import needs
from tests.web.conftest import World, _test_database_url

postgres_only = needs(
    not settings.DATABASE_URL, "terminating backends needs PostgreSQL (DATABASE_URL)"
)


def _own_postgres_client_ports() -> list[int]:
    """Local ports of this process's TCP connections to the database server."""
    db_port = int(settings.DATABASES["default"].get("PORT") or 5432)
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = []
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            local, remote, inode = fields[1], fields[2], fields[9]
            if inode in inodes and int(remote.rsplit(":", 1)[1], 16) == db_port:
                ports.append(int(local.rsplit(":", 1)[1], 16))
    return ports


def _terminate_own_backends() -> int:
    ports = _own_postgres_client_ports()
    with psycopg.connect(_test_database_url(), autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND client_port = ANY(%s)",
            (ports,),
        ).fetchall()
    return sum(1 for (done,) in rows if done)


@postgres_only
def test_a_run_whose_connections_die_at_its_end_keeps_its_summary(
    transactional_db: Any, mock_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = World(mock_url)
    launched = services.run_launch(
        actor=world.owner, scenario_id=world.scenario.uuid, enqueue=False
    )
    terminated: list[int] = []
    close = RunSink.close

    def close_then_blip(sink: RunSink) -> None:
        close(sink)  # the engine is done and every record and sample is stored
        terminated.append(_terminate_own_backends())

    monkeypatch.setattr(RunSink, "close", close_then_blip)
    try:
        status = executing.run_execute(run_uuid=str(launched.uuid), worker="blip-test")
    finally:
        # The pool may still hold connections the blip killed: later tests get a new one.
        connection.close()
        connection.close_pool()

    assert terminated and terminated[0] >= 1, "no connection of the run was terminated"
    assert status == Status.SUCCEEDED
    ended = Run.objects.get(pk=launched.pk)
    assert ended.status == Status.SUCCEEDED, ended.reason
    assert ended.summary and ended.summary.get("requests", 0) > 0
    assert ended.finished_at is not None
    assert ended.records_count > 0
    # The reaper has nothing to judge: the run is final.
    assert claiming.runs_reap_stale(older_than_s=0) == 0


def _stored_records(run_pk: int) -> int:
    with psycopg.connect(_test_database_url(), autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FROM runs_runrecord WHERE run_id = %s", (run_pk,)
        ).fetchone()
    return int(row[0]) if row else 0


@postgres_only
def test_a_run_whose_connections_die_mid_run_loses_no_record(
    transactional_db: Any, mock_url: str
) -> None:
    world = World(mock_url)
    launched = services.run_launch(
        actor=world.owner,
        scenario_id=world.scenario.uuid,
        endpoint_id=world.endpoint.uuid,
        overrides={"duration_s": 6},
        enqueue=False,
    )
    terminated: list[int] = []
    done = threading.Event()

    def blips() -> None:
        # Once the run has stored records: every connection of this process to the database
        # (the sink's writer, the watcher's heartbeat, the worker's) killed 5 times, 0.4 s apart.
        deadline = time.monotonic() + 30
        while not done.is_set() and _stored_records(launched.pk) == 0:
            if time.monotonic() > deadline:
                return
            time.sleep(0.1)
        for _ in range(5):
            terminated.append(_terminate_own_backends())
            time.sleep(0.4)

    blipper = threading.Thread(target=blips, daemon=True)
    blipper.start()
    try:
        status = executing.run_execute(run_uuid=str(launched.uuid), worker="blip-mid-run")
    finally:
        done.set()
        blipper.join(timeout=10)
        connection.close()
        connection.close_pool()

    assert sum(terminated) >= 5, f"too few of the run's connections were terminated: {terminated}"
    ended = Run.objects.get(pk=launched.pk)
    assert status == Status.SUCCEEDED, ended.reason
    assert ended.status == Status.SUCCEEDED, ended.reason
    summary = ended.summary or {}
    stored = RunRecord.objects.filter(run=ended)
    answered = summary.get("requests", 0) + stored.filter(warmup=True).count()
    # Records stored == requests answered, none twice (the key is (run, seq)).
    assert stored.count() == ended.records_count == answered > 0
    assert stored.filter(warmup=False).count() == summary["requests"]
    # The outage it rode out is in its log, and the run did not stop early.
    outages = RunLog.objects.filter(run=ended, message__startswith="the database was unreachable")
    assert outages.exists(), list(
        RunLog.objects.filter(run=ended).values_list("message", flat=True)
    )
    assert summary.get("elapsed_s", 0) >= 5.5


def test_an_outage_past_its_limit_fails_the_run_keeping_what_it_stored(
    transactional_db: Any, mock_url: str, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    from django.db import OperationalError

    settings.AIPERF_DB_OUTAGE_S = 1.5
    world = World(mock_url)
    launched = services.run_launch(
        actor=world.owner,
        scenario_id=world.scenario.uuid,
        endpoint_id=world.endpoint.uuid,
        overrides={"duration_s": 8},
        enqueue=False,
    )
    insert = runs_sink.records_insert
    calls: list[int] = []

    def first_batch_then_away(**kwargs: Any) -> int:
        # The first batch is stored; then the database is away for good (for records).
        calls.append(len(kwargs["batch"]))
        if len(calls) > 1:
            raise OperationalError("connection refused (the test's outage)")
        return insert(**kwargs)

    monkeypatch.setattr(runs_sink, "records_insert", first_batch_then_away)
    started = time.monotonic()
    status = executing.run_execute(run_uuid=str(launched.uuid), worker="blip-outage")
    took = time.monotonic() - started

    ended = Run.objects.get(pk=launched.pk)
    assert status == Status.FAILED
    assert ended.status == Status.FAILED
    assert "AIPERF_DB_OUTAGE_S" in ended.reason and "1.5 s" in ended.reason, ended.reason
    assert ended.reason.startswith("storing results failed: the database was unreachable")
    # What it stored before the outage is kept and counted.
    assert ended.records_count == calls[0] == RunRecord.objects.filter(run=ended).count() > 0
    # It stopped at the limit rather than measuring into the void for the whole 8 s.
    assert took < 8, took


def test_a_write_the_database_refuses_is_not_retried(transactional_db: Any) -> None:
    """Only a database that is away is waited for: a write it refuses (here a log line of a run
    deleted meanwhile) fails at once, instead of holding the worker for AIPERF_DB_OUTAGE_S."""
    from django.db import IntegrityError

    calls: list[int] = []

    def write() -> Any:
        calls.append(1)
        return RunLog.objects.create(run_id=2_000_000_000, level="info", message="orphan")

    with pytest.raises(IntegrityError):
        runs_sink.db_retry(write, what="storing a log line of a deleted run")
    assert calls == [1]
