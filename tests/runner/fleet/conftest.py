"""The fleet's tests need Redis: the machine's (db 5 unless AIPERF_FLEET_TEST_REDIS says
otherwise), each run under keys of its own; they skip with the reason when there is none, and
fail with it under CI (tests/infra.py)."""

from __future__ import annotations

import os

import pytest
import redis

from tests.infra import unavailable

REDIS_URL = os.environ.get("AIPERF_FLEET_TEST_REDIS", "redis://127.0.0.1:6379/5")


@pytest.fixture(scope="module", autouse=True)
def _redis() -> None:
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
        return
    except redis.RedisError as exc:
        error = exc
    unavailable(f"no Redis at {REDIS_URL} ({error}): the fleet needs one")
