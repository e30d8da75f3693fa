"""`python manage.py serve`: the whole service in one command and one process tree.

Migrates, prepares the demo objects, starts the built-in mock cluster as a child process
(unless AIPERF_MOCK_URL names one) and, with AIPERF_REAL_DYNAMO=1, a real Dynamo on CPU in
the background (aiperf_web.stack.dynamo), starts the Celery worker (a thread on the in-memory broker
in the embedded default; a `celery -A aiperf_web worker -Q runs` child process when REDIS_URL is
set), then serves HTTP and WebSocket with uvicorn until interrupted.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from typing import Any

import uvicorn
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from aiperf_web.core.mock import MockServer, die_with_parent
from aiperf_web.core.proxy import uvicorn_proxy_options
from aiperf_web.runs.worker import StaleRunReaper, runs_requeue_queued
from aiperf_web.stack.demo import DEMO_USER, demo_bootstrap, mock_url_default
from aiperf_web.stack.dynamo import RealDynamo, real_dynamo_launch
from aiperf_web.stack.worker import EmbeddedWorker, worker_command


class Command(BaseCommand):
    help = "Serve aiperf-web (HTTP + WebSocket), with its worker and the built-in mock cluster."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-migrate", action="store_true", help="skip migrate")
        parser.add_argument(
            "--no-bootstrap", action="store_true", help="skip creating the demo objects"
        )
        parser.add_argument("--no-mock", action="store_true", help="do not start the mock")
        parser.add_argument(
            "--no-worker",
            action="store_true",
            help="do not start a worker (production: run `celery -A aiperf_web worker -Q runs`)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        out = self.stdout
        if not opts["no_migrate"]:
            call_command("migrate", interactive=False, verbosity=0)
        mock: MockServer | None = None
        mock_url = mock_url_default()
        if not settings.AIPERF_MOCK_URL and not opts["no_mock"]:
            mock = MockServer(
                port=settings.AIPERF_MOCK_PORT, time_scale=settings.AIPERF_MOCK_TIME_SCALE
            )
            mock.start()
            mock_url = mock.url
        worker: EmbeddedWorker | None = None
        worker_process: subprocess.Popen[bytes] | None = None
        hosts_process: subprocess.Popen[bytes] | None = None
        dynamo: RealDynamo | None = None
        try:
            if not opts["no_bootstrap"]:
                boot = demo_bootstrap(mock_url=mock_url)
                if boot.admin_password:
                    out.write(
                        f"Created user {DEMO_USER} with password {boot.admin_password} "
                        "(shown once; set AIPERF_ADMIN_PASSWORD to choose it)"
                    )
            dynamo = real_dynamo_launch(say=out.write, bootstrap=not opts["no_bootstrap"])
            if not opts["no_worker"]:
                if settings.EMBEDDED:
                    worker = EmbeddedWorker(concurrency=settings.AIPERF_EMBEDDED_WORKERS)
                    worker.start()
                    # The in-memory broker died with the previous process: its queued runs
                    # are sent again (the claim makes a duplicate harmless).
                    requeued = runs_requeue_queued()
                    if requeued:
                        out.write(f"re-queued {requeued} run(s) left queued by the last start")
                else:
                    worker_process = subprocess.Popen(
                        worker_command(
                            queue=settings.AIPERF_RUNS_QUEUE,
                            concurrency=settings.AIPERF_EMBEDDED_WORKERS,
                        ),
                        preexec_fn=die_with_parent,
                    )
                    if settings.AIPERF_HOST_PROCESSES > 0:
                        # Client workers of runs with client_worker_processes, a group of
                        # client_workers_per_host per pool process for a run's length
                        # (runs/fleet.py).
                        hosts_process = subprocess.Popen(
                            worker_command(
                                queue=settings.AIPERF_HOSTS_QUEUE,
                                concurrency=settings.AIPERF_HOST_PROCESSES,
                                extra=("-n", "hosts@%h"),  # beside the runs worker's name
                            ),
                            preexec_fn=die_with_parent,
                        )
            db = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
            broker = "Redis" if settings.REDIS_URL else "in-process"
            password_hint = (
                "from AIPERF_ADMIN_PASSWORD"
                if settings.AIPERF_ADMIN_PASSWORD
                else boot.admin_password
                if not opts["no_bootstrap"] and boot.admin_password
                else "as printed at first start (reset: manage.py changepassword admin)"
            )
            out.write(
                f"aiperf-web on http://{opts['host']}:{opts['port']}/  "
                f"(database {db}, worker {broker}, built-in mock {mock_url})\n"
                f"  log in as {DEMO_USER}, password {password_hint}"
            )
            # Runs whose worker died (a killed process) are failed, here as in every worker.
            StaleRunReaper().start()
            # uvicorn re-raises SIGTERM after its graceful shutdown; as SystemExit it lets the
            # `finally` below stop the worker and the mock instead of orphaning them.
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            uvicorn.run(
                "aiperf_web.asgi:application",
                host=opts["host"],
                port=opts["port"],
                log_level="warning",
                access_log=False,
                lifespan="off",
                # The client address (login throttle, logs) from X-Forwarded-For only when it
                # comes from a proxy named in AIPERF_TRUSTED_PROXIES.
                **uvicorn_proxy_options(),
            )
        finally:
            if worker is not None:
                worker.stop()
            for process in (worker_process, hosts_process):
                if process is None:
                    continue
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
            if mock is not None:
                mock.stop()
            if dynamo is not None:
                dynamo.stop()
