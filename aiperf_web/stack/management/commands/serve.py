"""`python manage.py serve`: the whole service in one command and one process tree.

Migrates, prepares the demo objects, starts the built-in mock cluster as a child process
(unless AIPERF_MOCK_URL names one) and, with AIPERF_REAL_DYNAMO=1, a real Dynamo on CPU in
the background (aiperf_web.stack.dynamo), with AIPERF_REAL_VLLM=1 a real vLLM on CPU
(aiperf_web.stack.vllm), starts the Celery worker (a thread on the in-memory broker
in the embedded default; a `celery -A aiperf_web worker -Q runs` child process when REDIS_URL is
set), then serves HTTP and WebSocket with uvicorn until interrupted. Every child is supervised
(aiperf_web.stack.supervise): started again when it dies; /healthz says when the mock, the
real Dynamo or the real vLLM is down.
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType
from typing import Any

import uvicorn
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from aiperf_web.core.mock import MockServer
from aiperf_web.core.proxy import uvicorn_proxy_options
from aiperf_web.ops.health import health_server_watch
from aiperf_web.runs.claiming import StaleRunReaper, runs_requeue_queued
from aiperf_web.stack.demo import DEMO_USER, demo_bootstrap, mock_url_default
from aiperf_web.stack.dynamo import real_dynamo_launch
from aiperf_web.stack.supervise import Child, MockChild, ProcessChild, Supervised
from aiperf_web.stack.vllm import real_vllm_launch
from aiperf_web.stack.worker import EmbeddedWorker, worker_command
from aiperf_web.sweeps.pickup import SweepPickup


class _Server(uvicorn.Server):
    """uvicorn's server, which at the first SIGINT or SIGTERM also ends the supervision of the
    children before its graceful shutdown: a Ctrl-C reaches the children too, and they must not
    be started again while the service stops (the `finally` of handle() stops them all)."""

    def __init__(self, config: uvicorn.Config, *, supervised: list[Supervised]) -> None:
        super().__init__(config)
        self.supervised = supervised

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        for keeper in self.supervised:
            keeper.stopping.set()
        super().handle_exit(sig, frame)


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
        # No webhook may call the site's own port (core/webhooks.py): known here and, through
        # the environment, in the worker processes started below.
        os.environ["AIPERF_SERVE_PORT"] = str(opts["port"])
        settings.AIPERF_SERVE_PORT = opts["port"]
        if not opts["no_migrate"]:
            call_command("migrate", interactive=False, verbosity=0)
        # Stopped in reverse order at exit: the web side's helpers first, the mock last.
        supervised: list[Supervised] = []

        def watch(label: str, child: Child, *, started: bool, health: str = "") -> None:
            keeper = Supervised(label, child, started=started)
            keeper.start()
            supervised.append(keeper)
            if health:
                health_server_watch(health, keeper.status)

        mock_url = mock_url_default()
        if not settings.AIPERF_MOCK_URL and not opts["no_mock"]:
            mock = MockServer(
                port=settings.AIPERF_MOCK_PORT, time_scale=settings.AIPERF_MOCK_TIME_SCALE
            )
            mock.start()  # before the demo objects, which point at its port
            mock_url = mock.url
            watch("the built-in mock", MockChild(mock), started=True, health="mock")
        try:
            if not opts["no_bootstrap"]:
                boot = demo_bootstrap(mock_url=mock_url)
                if boot.admin_password:
                    out.write(
                        f"Created user {DEMO_USER} with password {boot.admin_password} "
                        "(shown once; set AIPERF_ADMIN_PASSWORD to choose it)"
                    )
            dynamo = real_dynamo_launch(say=out.write, bootstrap=not opts["no_bootstrap"])
            if dynamo is not None:
                watch("real Dynamo (CPU)", dynamo, started=False, health="dynamo")
            vllm = real_vllm_launch(say=out.write, bootstrap=not opts["no_bootstrap"])
            if vllm is not None:
                watch("the real vLLM (CPU)", vllm, started=False, health="vllm")
            if not opts["no_worker"]:
                if settings.EMBEDDED:
                    worker = EmbeddedWorker(concurrency=settings.AIPERF_EMBEDDED_WORKERS)
                    worker.start()
                    watch("the embedded worker", worker, started=True)
                    # The in-memory broker died with the previous process: its queued runs
                    # are sent again (the claim makes a duplicate harmless).
                    requeued = runs_requeue_queued()
                    if requeued:
                        out.write(f"re-queued {requeued} run(s) left queued by the last start")
                else:
                    runs = ProcessChild(
                        worker_command(
                            queue=settings.AIPERF_RUNS_QUEUE,
                            concurrency=settings.AIPERF_EMBEDDED_WORKERS,
                        )
                    )
                    runs.start()
                    watch("the runs worker", runs, started=True)
                    if settings.AIPERF_HOST_PROCESSES > 0:
                        # Client workers of runs with client_worker_processes, a group of
                        # client_workers_per_host per pool process for a run's length
                        # (runs/fleet.py).
                        hosts = ProcessChild(
                            worker_command(
                                queue=settings.AIPERF_HOSTS_QUEUE,
                                concurrency=settings.AIPERF_HOST_PROCESSES,
                                extra=("-n", "hosts@%h"),  # beside the runs worker's name
                            )
                        )
                        hosts.start()
                        watch("the hosts worker", hosts, started=True)
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
            # So are sweeps no run's end moved on (sweeps/pickup.py; the embedded worker sends
            # no worker_ready, where every Celery worker process starts its own).
            SweepPickup().start()
            # uvicorn re-raises SIGTERM after its graceful shutdown; as SystemExit it lets the
            # `finally` below stop the worker and the mock instead of orphaning them.
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            config = uvicorn.Config(
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
            server = _Server(config, supervised=supervised)
            server.run()
            if not server.started:
                raise CommandError(f"could not serve on {opts['host']}:{opts['port']}")
        finally:
            for keeper in reversed(supervised):
                keeper.stop()
