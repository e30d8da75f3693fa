"""The fleet's lean Redis connection (runner/fleet/resp.py) against the real Redis: replies in
order and on the URL's database, an error reply raised as redis-py's, a call cancelled midway
leaving the connection usable, and a dropped link reopened by the next call."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import redis
from redis.exceptions import ResponseError

from runner.fleet.loop import fleet_loop
from runner.fleet.resp import connect
from tests.runner.fleet.conftest import REDIS_URL


def _run(coro):  # type: ignore[no-untyped-def]
    with asyncio.Runner(loop_factory=fleet_loop) as runner:
        return runner.run(coro)


def test_a_pipeline_answers_in_order_on_the_urls_database():
    key = f"test-resp:{uuid.uuid4().hex}"
    plain = redis.Redis.from_url(REDIS_URL)

    async def go() -> list:
        conn = connect(REDIS_URL, timeout_s=5.0)
        try:
            return await conn.call(
                [("RPUSH", key, b"a\r\n\x00", "b"), ("LRANGE", key, 0, -1), ("EXPIRE", key, 60)]
            )
        finally:
            await conn.aclose()

    try:
        assert _run(go()) == [2, [b"a\r\n\x00", b"b"], 1]
        # The same database as redis-py's client of the same URL (SELECT from the URL).
        assert plain.lrange(key, 0, -1) == [b"a\r\n\x00", b"b"]
    finally:
        plain.delete(key)


def test_an_error_reply_raises_and_a_cancelled_call_leaves_the_connection_usable():
    key = f"test-resp:{uuid.uuid4().hex}"

    async def go() -> tuple[list, list]:
        conn = connect(REDIS_URL, timeout_s=5.0)
        try:
            with pytest.raises(ResponseError):
                await conn.call([("SET", key, "x"), ("LPUSH", key, "y")])  # wrong type
            # A blocking pop cancelled while Redis holds it: its reply (nil, 0.3 s later) is
            # read and dropped, and the next call gets its own.
            pop = asyncio.create_task(conn.call([("BLMPOP", 0.3, 1, key + ":none", "LEFT")]))
            await asyncio.sleep(0.05)
            pop.cancel()
            with pytest.raises(asyncio.CancelledError):
                await pop
            after = await conn.call([("GET", key), ("DEL", key)])
            # The link dropped under it: the next call opens a new one.
            assert conn.protocol is not None and conn.protocol.transport is not None  # type: ignore[attr-defined]
            conn.protocol.transport.abort()  # type: ignore[attr-defined]
            await asyncio.sleep(0.05)
            again = await conn.call([("PING",)])
            return after, again
        finally:
            await conn.aclose()

    after, again = _run(go())
    assert after == [b"x", 1]
    assert again == [b"PONG"]
