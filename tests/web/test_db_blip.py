"""A database blip at the end of a run (issue 13 item 10): the engine finished, then every
database connection the run's code holds is terminated on the server
(`pg_terminate_backend`), as a PostgreSQL restart or failover does. The run's final save
retries on a fresh connection: the run ends `succeeded` with its summary, not `failed` by the
stale-run reaper with the summary lost.

PostgreSQL only; the run executes in this process (as `run_execute` does for the inline
commands), so only this process's connections are terminated, never another session's.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from aiperf_web.runs import services
from aiperf_web.runs import worker as runs_worker
from aiperf_web.runs.models import Run, Status
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
        status = runs_worker.run_execute(run_uuid=str(launched.uuid), worker="blip-test")
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
    assert runs_worker.runs_reap_stale(older_than_s=0) == 0
