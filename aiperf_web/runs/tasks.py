"""Celery tasks: thin interfaces over runs.services. Names are explicit so producers can send
them by name (`runs.execute`) without importing this module."""

from __future__ import annotations

import asyncio
import os
import socket

from celery import shared_task

from aiperf_web.runs import services
from aiperf_web.runs.fleet import HOST_TASK
from aiperf_web.runs.tickets import TASK_NAME
from runner import run_host


@shared_task(name=TASK_NAME, acks_late=True, ignore_result=True)
def execute_run(run_uuid: str = "") -> str:
    # A ticket: `run_uuid` names the launch that sent it, but the fairest queued run starts.
    return services.run_execute_next(worker=f"{socket.gethostname()}:{os.getpid()}")


@shared_task(name=HOST_TASK, acks_late=False, ignore_result=True)
def host_client_worker(redis_url: str, run_key: str, worker: int) -> str:
    # One client worker of a run whose workers are processes (runs/fleet.py), until it ends.
    return asyncio.run(run_host(redis_url, run_key, worker)).stopped
