"""Celery tasks: thin interfaces over runs.services. Names are explicit so producers can send
them by name (`runs.execute`) without importing this module."""

from __future__ import annotations

import os
import socket

from celery import shared_task

from aiperf_web.runs import services
from aiperf_web.runs.tickets import TASK_NAME


@shared_task(name=TASK_NAME, acks_late=True, ignore_result=True)
def execute_run(run_uuid: str = "") -> str:
    # A ticket: `run_uuid` names the launch that sent it, but the fairest queued run starts.
    return services.run_execute_next(worker=f"{socket.gethostname()}:{os.getpid()}")
