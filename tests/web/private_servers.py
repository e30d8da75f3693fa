"""PostgreSQL and Redis servers of a test's own, on free loopback ports: the fault tests stop,
restart and kill them, which the suite's shared servers must never see."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from aiperf_web.core.mock import free_port


def pg_bin() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return found[-1].parent if found else None


def _as_postgres(*argv: str) -> list[str]:
    """initdb refuses root: run PostgreSQL's tools as the postgres user when we are root."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *argv]
    return list(argv)


class PrivatePostgres:
    """A PostgreSQL cluster in a folder of the test's own, trusted on loopback, on a free
    port; restarted with `pg_ctl restart -m fast`, as an operator or a failover does."""

    def __init__(self, bindir: Path) -> None:
        self.port = free_port()
        self.bindir = bindir
        # Not under pytest's folder, which the postgres user may not enter.
        self.directory = Path(tempfile.mkdtemp(prefix="aiperf-faults-pg-"))
        self.data = self.directory / "pgdata"
        self.log = self.directory / "postgres.log"
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/aiperf"

    def _ctl(self, *args: str) -> None:
        subprocess.run(
            _as_postgres(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-w", *args),
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=120,
        )

    def create(self) -> None:
        self.data.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres")
            shutil.chown(self.data, "postgres")
        subprocess.run(
            _as_postgres(
                str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres",
                "--auth=trust", "-E", "UTF8", "--no-sync",
            ),
            check=True, stdout=subprocess.DEVNULL, timeout=180,
        )  # fmt: skip
        self.start()
        import psycopg

        with psycopg.connect(
            f"postgresql://postgres@127.0.0.1:{self.port}/postgres", autocommit=True
        ) as admin:
            admin.execute("CREATE DATABASE aiperf")

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c max_connections=100"
        )
        self._ctl("-l", str(self.log), "-o", options, "start")

    def restart(self) -> None:
        self._ctl("-m", "fast", "restart")

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._ctl("-m", "immediate", "stop")
        shutil.rmtree(self.directory, ignore_errors=True)


class PrivateRedis:
    """A redis-server of the test's own, without persistence (a restart empties it)."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.directory = directory
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.directory)],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        import redis

        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError(f"redis-server did not start on {self.port}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


def tools_missing() -> str | None:
    """Why the private servers cannot be made here, or None."""
    if shutil.which("redis-server") is None:
        return "redis-server is not installed"
    if pg_bin() is None:
        return "PostgreSQL's server tools (initdb, pg_ctl) are not installed"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "runuser is missing (initdb refuses root)"
    return None
