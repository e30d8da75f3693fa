"""`python manage.py bench_web`: figures for the web side, printed, never pass/fail.

- records: per-request records stored through the sink's bulk path (COPY on PostgreSQL),
  rows/s;
- claim: queued → running latency of simulated runs through the broker and a worker (the
  embedded worker thread, or a running `celery -A aiperf_web worker -Q runs` with REDIS_URL);
- list: `GET /api/v1/runs` with 10,000 stored runs, p50/p95 ms;
- service: requests/s of a run launched through the service (the task body) vs the CLI
  (`python -m runner replay`) on the same spec against the same mock, alternated;
- connections (PostgreSQL): `manage.py serve` under a burst of 16 clients × 20
  `GET /api/v1/runs` (half with wrong tokens), with the pool and without it (a connection per
  request): connections at peak and after, 5xx answers, latency p50/p95;
- worker-rss (with REDIS_URL; not in the default set): a pool process's RSS over
  `--rss-runs` (50) consecutive 15 s live runs, without recycling and with the settings' rule;
- cancel-generation (not in the default set): seconds from Cancel to `cancelled` for runs
  cancelled while their big synthetic workload is still being generated.

Writes into the configured database under a team `bench-<random>`, deleted at the end.
"""

from __future__ import annotations

import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, connection
from django.test import Client
from django.utils import timezone

from aiperf_web.celery import app
from aiperf_web.core.mock import MockServer, free_port
from aiperf_web.endpoints.services import endpoint_create
from aiperf_web.runs import executing, services
from aiperf_web.runs.models import Run, RunRecord, Status
from aiperf_web.runs.sink import records_insert
from aiperf_web.scenarios.services import scenario_create
from aiperf_web.stack.worker import EmbeddedWorker, recycling_options, worker_command
from aiperf_web.teams.models import Team
from aiperf_web.teams.services import api_token_create, team_create


def _record(i: int) -> dict[str, Any]:
    # The shape and size of a real record (runner RequestRecordJson).
    return {
        "request_id": i,
        "session_id": f"t{i % 97}:s{i % 13}",
        "root_id": f"t{i % 97}:root",
        "parent_id": None,
        "depth": i % 3,
        "branch_mode": "spawn",
        "turn_index": i % 40,
        "num_turns": 40,
        "lane": i % 64,
        "client_worker": i % 8,
        "inference_worker": i % 8,
        "start_s": i * 0.001,
        "first_token_s": i * 0.001 + 0.02,
        "end_s": i * 0.001 + 0.3,
        "prompt_tokens": 40_000 + i % 1000,
        "cached_tokens": 38_000,
        "output_tokens": 200,
        "itl_ms": 1.4,
        "status": 200,
        "error": None,
        "warmup": False,
        "due_s": i * 0.001,
        "ttft_ms": 20.5,
        "latency_ms": 300.1,
        "output_tokens_per_s": 666.0,
        "schedule_lag_ms": 0.4,
    }


def _rss_mb(pid: int, field: str = "VmRSS") -> float | None:
    """Resident memory of a process, MB (`VmHWM`: its peak, which Celery's memory rule
    compares on Linux, as getrusage's ru_maxrss); None once it exited (a recycled process)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return round(int(line.split()[1]) / 1024, 1)
    except FileNotFoundError:
        return None
    return None


def _worker_process(queue: str, *, recycle: bool) -> subprocess.Popen[bytes]:
    """A `celery worker` process of concurrency 1 on a queue of its own (the production
    shape), with the settings' recycling rule or none; returns once it answers a ping."""
    settings.AIPERF_RUNS_QUEUE = queue
    env = {**os.environ, "AIPERF_RUNS_QUEUE": queue}
    if not recycle:
        env |= {
            "AIPERF_WORKER_MAX_TASKS_PER_CHILD": "0",
            "AIPERF_WORKER_MAX_MEMORY_PER_CHILD_MB": "0",
        }
    proc = subprocess.Popen(
        worker_command(
            queue=queue,
            concurrency=1,
            recycle=recycle,
            loglevel="WARNING",
            extra=("-n", f"{queue}@localhost", "--without-mingle", "--without-gossip"),
        ),
        env=env,
    )
    while not app.control.ping(destination=[f"{queue}@localhost"], timeout=0.5):
        if proc.poll() is not None:
            raise CommandError(f"the worker on {queue} exited with {proc.returncode}")
    return proc


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Command(BaseCommand):
    help = "Print web-side figures: records rows/s, claim latency, run list, service vs CLI."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--only",
            choices=[
                *("records", "claim", "list", "service", "connections"),
                *("worker-rss", "cancel-generation"),
            ],
            action="append",
        )
        parser.add_argument(
            "--rss-runs", type=int, default=50, help="worker-rss: consecutive runs (default 50)"
        )
        parser.add_argument("--rss-duration", type=float, default=15.0)
        parser.add_argument(
            "--recycle",
            choices=["rule", "off", "both"],
            default="both",
            help="worker-rss: with the settings' recycling rule, without it, or both in turn",
        )
        parser.add_argument(
            "--cancel-trees",
            type=int,
            default=20_000,
            help="cancel-generation: synthetic trees of the workload (100,000 is accepted too)",
        )
        parser.add_argument("--cancel-runs", type=int, default=5, help="cancels per target")
        parser.add_argument("--records", type=int, default=200_000)
        parser.add_argument("--runs", type=int, default=10_000)
        parser.add_argument("--claims", type=int, default=20)
        parser.add_argument("--service-duration", type=float, default=8.0)
        parser.add_argument("--rounds", type=int, default=2)

    def handle(self, *args: Any, **opts: Any) -> None:
        only = set(opts["only"] or ["records", "claim", "list", "service", "connections"])
        suffix = secrets.token_hex(3)
        user = User.objects.create_user(f"bench-{suffix}", password=secrets.token_urlsafe(12))
        team = team_create(name=f"bench-{suffix}", owner=user)
        figures: dict[str, Any] = {"database": connection.vendor}
        try:
            if "records" in only:
                figures["records"] = self._records(team, opts["records"])
            if "list" in only:
                figures["run_list"] = self._list(team, user, opts["runs"])
            if "claim" in only:
                figures["claim"] = self._claim(team, user, opts["claims"])
            if "service" in only:
                figures["service_vs_cli"] = self._service(
                    team, user, opts["service_duration"], opts["rounds"]
                )
            if "connections" in only:
                figures["connections"] = self._connections(user)
            if "worker-rss" in only:
                modes = {"rule": [True], "off": [False], "both": [False, True]}[opts["recycle"]]
                figures["worker_rss"] = {
                    "recycling_rule" if recycle else "no_recycling": self._worker_rss(
                        team, user, opts["rss_runs"], opts["rss_duration"], recycle
                    )
                    for recycle in modes
                }
            if "cancel-generation" in only:
                figures["cancel_generation"] = self._cancel_generation(
                    team, user, opts["cancel_runs"], opts["cancel_trees"]
                )
        finally:
            try:
                Run.objects.filter(team=team).delete()
                Team.objects.filter(pk=team.pk).delete()
                user.delete()
            except DatabaseError as exc:
                self.stderr.write(f"cleanup of team {team.name} failed: {exc}")
        self.stdout.write(json.dumps(figures, indent=2))

    def _run(self, team: Team, **fields: Any) -> Run:
        return Run.objects.create(
            team=team,
            scenario_name="bench",
            endpoint_name="none",
            target_kind="simulated",
            spec={},
            **fields,
        )

    def _records(self, team: Team, n: int) -> dict[str, Any]:
        run = self._run(team, status=Status.SUCCEEDED)
        batch_size = 5000
        batches = [
            [_record(i) for i in range(s, min(n, s + batch_size))] for s in range(0, n, batch_size)
        ]
        started = time.perf_counter()
        seq = 0
        for batch in batches:
            seq += records_insert(run_pk=run.pk, first_seq=seq, batch=batch)  # type: ignore[arg-type]
        took = time.perf_counter() - started
        stored = RunRecord.objects.filter(run=run).count()
        RunRecord.objects.filter(run=run).delete()
        return {"rows": stored, "seconds": round(took, 3), "rows_per_s": round(stored / took)}

    def _list(self, team: Team, user: User, n: int) -> dict[str, Any]:
        now = timezone.now()
        summary = {"requests": 100, "errors": 0, "ttft_ms": {"p50": 10.0, "p90": 20.0, "p99": 30.0}}
        Run.objects.bulk_create(
            [
                Run(
                    team=team,
                    scenario_name=f"s{i % 7}",
                    endpoint_name="e",
                    target_kind="simulated",
                    spec={"concurrency": 16},
                    status=Status.SUCCEEDED,
                    summary=summary,
                    tags=",bench,",
                    created_at=now,
                )
                for i in range(n)
            ],
            batch_size=2000,
        )
        _, raw = api_token_create(user=user, name="bench")
        client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
        times: list[float] = []
        for i in range(60):
            url = (
                "/api/v1/runs?limit=50"
                if i % 2 == 0
                else "/api/v1/runs?limit=50&tag=bench&offset=500"
            )
            started = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200
        times = times[5:]  # warm caches first
        return {
            "runs": n,
            "p50_ms": round(_pct(times, 0.5), 1),
            "p95_ms": round(_pct(times, 0.95), 1),
        }

    def _claim(self, team: Team, user: User, n: int) -> dict[str, Any]:
        worker = None
        if settings.EMBEDDED:
            worker = EmbeddedWorker(concurrency=1)
            worker.start()
            time.sleep(1.0)
        scenario = scenario_create(
            actor=user, team=team, name="claim", spec={"max_requests": 5, "concurrency": 2}
        )
        latencies: list[float] = []
        try:
            for _ in range(n):
                run = services.run_launch(
                    actor=user, scenario_id=scenario.uuid, endpoint_id="simulated"
                )
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    run.refresh_from_db()
                    if run.status in (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED):
                        break
                    time.sleep(0.02)
                if run.started_at is None:
                    return {"error": "no worker consumed the runs queue within 30 s"}
                latencies.append((run.started_at - run.created_at).total_seconds() * 1000)
        finally:
            if worker is not None:
                worker.stop()
        return {
            "runs": len(latencies),
            "p50_ms": round(_pct(latencies, 0.5), 1),
            "p95_ms": round(_pct(latencies, 0.95), 1),
        }

    def _service(self, team: Team, user: User, duration_s: float, rounds: int) -> dict[str, Any]:
        mock = MockServer(port=free_port(), time_scale=0.0)
        mock.start()
        knobs = {
            "concurrency": 64,
            "speedup": 1000.0,
            "duration_s": duration_s,
            "client_workers": 8,
        }
        try:
            endpoint = endpoint_create(
                actor=user,
                team=team,
                name="bench-mock",
                base_url=mock.url,
                model="mock-model",
                server_kind="dynamo",
            )
            scenario = scenario_create(actor=user, team=team, name="svc", spec=knobs)
            cli: list[float] = []
            svc: list[float] = []

            def run_cli() -> None:
                out = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "runner",
                        "replay",
                        "--endpoint",
                        mock.url,
                        "--model",
                        "mock-model",
                        "--synthetic",
                        "--concurrency",
                        "64",
                        "--speedup",
                        "1000",
                        "--duration",
                        str(duration_s),
                        "--client-workers",
                        "8",
                        "--json",
                    ],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                cli.append(float(json.loads(out.stdout)["requests_per_s"]))

            def run_service() -> None:
                # The task body, here; when a worker consumed the queue first, it ran it.
                run = services.run_launch(
                    actor=user, scenario_id=scenario.uuid, endpoint_id=endpoint.uuid
                )
                executing.run_execute(run_uuid=str(run.uuid), worker="bench-inline")
                while run.status not in (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED):
                    time.sleep(0.2)
                    run.refresh_from_db()
                svc.append(float((run.summary or {}).get("requests_per_s") or 0.0))

            # Alternate the order so that drift on a shared machine hits both sides alike.
            for i in range(rounds):
                for step in (run_cli, run_service) if i % 2 == 0 else (run_service, run_cli):
                    step()
        finally:
            mock.stop()
        return {
            "spec": knobs,
            "cli_req_per_s": [round(x, 1) for x in cli],
            "service_req_per_s": [round(x, 1) for x in svc],
            "service_over_cli": round(statistics.median(svc) / statistics.median(cli), 3),
        }

    def _worker_rss(
        self, team: Team, user: User, n: int, duration_s: float, recycle: bool
    ) -> dict[str, Any]:
        """RSS of a prefork worker's pool process (concurrency 1) after its 1st and Nth live run
        against the mock, with the settings' recycling rule or without it (production shape).
        Read as soon as the run's final status is stored, before a recycled process exits."""
        if settings.EMBEDDED:
            return {"error": "needs REDIS_URL (a separate celery worker process)"}
        options = recycling_options() if recycle else []
        proc = _worker_process(f"runs-bench-rss-{os.getpid()}", recycle=recycle)
        mock = MockServer(port=free_port(), time_scale=0.0)
        mock.start()
        figures: dict[str, Any] = {"recycle": options, "runs": n, "duration_s": duration_s}
        try:
            endpoint = endpoint_create(
                actor=user,
                team=team,
                name=f"rss-mock-{'rule' if recycle else 'off'}",
                base_url=mock.url,
                model="mock-model",
                server_kind="dynamo",
            )
            spec = {"concurrency": 64, "speedup": 1000.0, "duration_s": duration_s}
            scenario = scenario_create(
                actor=user, team=team, name=f"rss-{'rule' if recycle else 'off'}", spec=spec
            )
            pids: list[int] = []
            series: list[float] = []
            peaks: list[float] = []
            statuses: dict[str, int] = {}
            for i in range(1, n + 1):
                run = services.run_launch(
                    actor=user, scenario_id=scenario.uuid, endpoint_id=endpoint.uuid
                )
                while run.status not in (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED):
                    time.sleep(0.1)
                    run.refresh_from_db()
                pid = int(run.worker.rsplit(":", 1)[1])
                rss_mb, peak_mb = _rss_mb(pid), _rss_mb(pid, "VmHWM")
                if pid not in pids:
                    pids.append(pid)
                if rss_mb is not None:
                    series.append(rss_mb)
                if peak_mb is not None:
                    peaks.append(peak_mb)
                statuses[run.status] = statuses.get(run.status, 0) + 1
                if i == 1 or i == n:
                    figures[f"after_run_{i}"] = {
                        "pid": pid,
                        "rss_mb": rss_mb,
                        "peak_rss_mb": peak_mb,
                        "runs_in_this_process": Run.objects.filter(
                            team=team, worker=run.worker
                        ).count(),
                    }
                self.stderr.write(
                    f"run {i}/{n} {run.status} pid {pid} rss {rss_mb} MB peak {peak_mb} MB"
                )
                # The next run must find a live pool process (a recycled one is replaced).
                time.sleep(0.5)
            figures["statuses"] = statuses
            figures["pool_processes_used"] = len(pids)
            figures["rss_max_mb"] = max(series, default=None)
            figures["peak_rss_max_mb"] = max(peaks, default=None)
            if len(series) > 1 and len(pids) == 1:
                figures["rss_mb_per_run_after_the_first"] = round(
                    (series[-1] - series[0]) / (len(series) - 1), 2
                )
        finally:
            mock.stop()
            proc.terminate()
            proc.wait(timeout=30)
        return figures

    def _cancel_generation(self, team: Team, user: User, n: int, trees: int) -> dict[str, Any]:
        """Seconds from Cancel (run_cancel, as the page and API call it) to the run stored
        `cancelled`, for runs cancelled 1 s into generating a synthetic workload of `trees`
        one-block trees (`block_size` 65,536: the most requests a spec's block estimate lets
        through; ~3.4 ms a tree to generate), on a simulated target and on the mock."""
        embedded: EmbeddedWorker | None = None
        proc: subprocess.Popen[bytes] | None = None
        if settings.EMBEDDED:
            embedded = EmbeddedWorker(concurrency=1)
            embedded.start()
        else:
            proc = _worker_process(f"runs-bench-cancel-{os.getpid()}", recycle=True)
        mock = MockServer(port=free_port(), time_scale=0.0)
        mock.start()
        synthetic = {"trees": trees, "block_size": 65_536}
        figures: dict[str, Any] = {
            "synthetic": synthetic,
            "worker": "embedded" if embedded else "celery",
        }
        try:
            endpoint = endpoint_create(
                actor=user,
                team=team,
                name="cancel-mock",
                base_url=mock.url,
                model="mock-model",
                server_kind="dynamo",
            )
            scenario = scenario_create(
                actor=user,
                team=team,
                name="cancel-generation",
                spec={"workload": {"synthetic": synthetic}, "duration_s": 60, "concurrency": 4},
            )
            for target in ("simulated", str(endpoint.uuid)):
                took: list[float] = []
                where: list[str] = []
                for _ in range(n):
                    run = services.run_launch(
                        actor=user, scenario_id=scenario.uuid, endpoint_id=target
                    )
                    while run.status == Status.QUEUED:
                        time.sleep(0.05)
                        run.refresh_from_db()
                    time.sleep(1.0)  # well into the generation
                    asked = time.monotonic()
                    services.run_cancel(actor=user, run_obj=run)
                    while run.status not in (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED):
                        if time.monotonic() - asked > 60:
                            figures["error"] = (
                                f"run {run.uuid} still {run.status} 60 s after cancel"
                            )
                            return figures
                        time.sleep(0.01)
                        run.refresh_from_db()
                    took.append(time.monotonic() - asked)
                    line = run.log_lines.filter(message__contains="while generating").first()
                    where.append(f"{run.status}: {line.message if line else 'no generation line'}")
                figures["simulated" if target == "simulated" else "endpoint"] = {
                    "cancel_to_cancelled_s": [round(t, 3) for t in took],
                    "max_s": round(max(took), 3),
                    "runs": where,
                }
        finally:
            mock.stop()
            if embedded is not None:
                embedded.stop()
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)
        return figures

    def _connections(self, user: User) -> dict[str, Any]:
        from aiperf_web.bench.burst import ConnectionCounter, burst, served

        if connection.vendor != "postgresql":
            return {"error": "needs PostgreSQL (DATABASE_URL): SQLite has no connections to count"}
        _, token = api_token_create(user=user, name="bench-connections")
        figures: dict[str, Any] = {"clients": 16, "requests_each": 20}
        size = settings.AIPERF_DB_POOL_SIZE or 8  # the configured pool, or the default
        modes = {
            f"pool_{size}": {"AIPERF_DB_POOL_SIZE": str(size)},
            "no_pool": {"AIPERF_DB_POOL_SIZE": "0"},
        }
        for mode, env in modes.items():
            app = f"aiperf-bench-{secrets.token_hex(3)}"
            # The web process alone (and its stale-run reaper): no worker, no mock.
            args = ["--no-migrate", "--no-bootstrap", "--no-mock", "--no-worker"]
            with served(port=free_port(), env={**env, "PGAPPNAME": app}, args=args) as base:
                counter = ConnectionCounter(app=app)
                counter.start()
                result = burst(url=f"{base}/api/v1/runs", good_token=token)
                held = counter.stop()
            figures[mode] = {
                "connections_peak": counter.peak,
                "connections_held_after": held,
                "responses_5xx": result.server_errors,
                "transport_errors": len(result.failures),
                "p50_ms": round(result.pct_ms(0.5), 1),
                "p95_ms": round(result.pct_ms(0.95), 1),
            }
        return figures
