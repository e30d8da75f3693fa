"""Celery tasks: thin interfaces over runs.services. Names are explicit so producers can send
them by name (`runs.execute`) without importing this module."""

from __future__ import annotations

import os
import socket

from celery import shared_task

from aiperf_web.runs import services


@shared_task(name=services.TASK_NAME, acks_late=True, ignore_result=True)
def execute_run(run_uuid: str) -> str:
    return services.run_execute(run_uuid=run_uuid, worker=f"{socket.gethostname()}:{os.getpid()}")
