"""Celery tasks: thin interfaces over runs.worker. Names are explicit so producers can send
them by name (`runs.execute`) without importing this module."""

from __future__ import annotations

import os
import socket

from celery import shared_task

from aiperf_web.runs.fleet import HOST_TASK
from aiperf_web.runs.tickets import TASK_NAME
from aiperf_web.runs.worker import run_execute_next
from runner import serve_host


@shared_task(name=TASK_NAME, acks_late=True, ignore_result=True)
def execute_run(run_uuid: str = "") -> str:
    # A ticket: `run_uuid` names the launch that sent it, but the fairest queued run starts.
    return run_execute_next(worker=f"{socket.gethostname()}:{os.getpid()}")


@shared_task(name=HOST_TASK, acks_late=False, ignore_result=True)
def host_client_worker(redis_url: str, run_key: str, worker: int) -> str:
    # One client worker of a run whose workers are processes (runs/fleet.py), until it ends.
    return serve_host(redis_url, run_key, worker).stopped
