"""Celery tasks: thin interfaces over runs.executing. Names are explicit so producers can send
them by name (`runs.execute`) without importing this module."""

from __future__ import annotations

import os
import socket

from celery import shared_task

from aiperf_web.runs.executing import run_execute_next
from aiperf_web.runs.fleet import HOST_TASK, fleet_secret_open
from aiperf_web.runs.tickets import TASK_NAME
from runner import serve_hosts


@shared_task(name=TASK_NAME, acks_late=True, ignore_result=True)
def execute_run(run_uuid: str = "") -> str:
    # A ticket: `run_uuid` names the launch that sent it, but the fairest queued run starts.
    return run_execute_next(worker=f"{socket.gethostname()}:{os.getpid()}")


@shared_task(name=HOST_TASK, acks_late=False, ignore_result=True)
def host_client_workers(
    redis_url: str, run_key: str, workers: list[int], sealed_secret: str
) -> list[str]:
    # A group of client workers of a run whose workers are processes (runs/fleet.py), served
    # together by this pool process until the run ends. The run's key came sealed under the
    # service's at-rest key (the task's arguments lie in the broker, Redis).
    secret = fleet_secret_open(sealed_secret)
    return [report.stopped for report in serve_hosts(redis_url, run_key, workers, secret=secret)]
