"""A bounded burst of API requests against a running service, and the database connections the
service holds meanwhile (issue 13's leak): what `bench_web --only connections` prints and
what tests/web/test_ops.py asserts.

The service runs as `manage.py serve` in a child process whose connections carry their own
`application_name` (libpq's PGAPPNAME), so they are counted apart from everyone else's on a
shared server.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def served(
    *, port: int, env: dict[str, str], args: Sequence[str] = (), log: Path | None = None
) -> Iterator[str]:
    """`manage.py serve --port PORT ARGS` with `env` over this process's environment; yields
    its base URL once `/health/` answers, stops it (and the worker it started) at the end."""
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), *args],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"manage.py serve exited with {proc.returncode} (log: {log})")
            try:
                if httpx.get(f"{base}/health/", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"manage.py serve did not answer within 60 s (log: {log})")
            time.sleep(0.2)
        yield base
    finally:
        proc.send_signal(signal.SIGINT)  # serve stops its worker process too
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if log:
            out.close()  # type: ignore[union-attr]


class ConnectionCounter(threading.Thread):
    """Samples, every `every_s`, the connections to the current database whose
    application_name is `app`; `peak` is the most seen at once."""

    def __init__(self, *, app: str, every_s: float = 0.05) -> None:
        super().__init__(name="connection-counter", daemon=True)
        self.app = app
        self.every_s = every_s
        self.peak = 0
        self.done = threading.Event()
        db = connection.settings_dict
        self.conninfo = {
            "dbname": db["NAME"],
            "host": db.get("HOST") or "127.0.0.1",
            "port": db.get("PORT") or 5432,
            "user": db.get("USER") or None,
            "password": db.get("PASSWORD") or None,
        }
        # Opened here, not in run(): a database that refuses connections fails the caller.
        self.conn = psycopg.connect(
            **{k: v for k, v in self.conninfo.items() if v is not None}, autocommit=True
        )

    def count(self) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = %s AND pid <> pg_backend_pid()",
            [self.app],
        ).fetchone()
        return int(row[0]) if row else 0

    def run(self) -> None:
        while not self.done.wait(self.every_s):
            self.peak = max(self.peak, self.count())

    def stop(self) -> int:
        """Stop sampling; returns the connections held now."""
        self.done.set()
        self.join()
        held = self.count()
        self.conn.close()
        return held


@dataclass
class Burst:
    statuses: Counter[int] = field(default_factory=Counter)
    latencies_ms: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # transport errors (refused, reset)

    def pct_ms(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0

    @property
    def server_errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status >= 500)


def burst(
    *, url: str, good_token: str, threads: int = 16, requests: int = 20, bad_token: str = "x"
) -> Burst:
    """`threads` clients × `requests` GETs of `url`, every other one with a wrong token."""
    result = Burst()
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def client(k: int) -> None:
        with httpx.Client(timeout=60) as http:
            start.wait()
            for i in range(requests):
                token = good_token if (k + i) % 2 == 0 else bad_token
                began = time.perf_counter()
                try:
                    status = http.get(url, headers={"Authorization": f"Bearer {token}"}).status_code
                except httpx.HTTPError as exc:
                    with lock:
                        result.failures.append(repr(exc))
                    continue
                took_ms = (time.perf_counter() - began) * 1000
                with lock:
                    result.statuses[status] += 1
                    result.latencies_ms.append(took_ms)

    workers = [threading.Thread(target=client, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return result
