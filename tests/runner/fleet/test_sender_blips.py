"""How the fleet's orchestrator counts Redis failures (runner/fleet/sender.py,
`_redis_failed`): a kind of call that Redis has failed for the grace without one success
between ends the run's owed requests as lost; blips with successes between never add up.
The watch on the hosts is driven here by a stand-in for its one look, so the count alone is
under test (tests/runner/fleet/test_fleet.py stops a real Redis for the whole path)."""

from __future__ import annotations

import uuid

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from runner.bench.fleet import _on_fleet_loop, small_trace
from runner.fleet import FleetSender
from runner.fleet import sender as sender_module
from runner.replay.engine import EngineConfig
from runner.replay.scheduler import ReplayConfig
from runner.wallclock import LiveConfig
from tests.runner.fleet.conftest import REDIS_URL


def _watched(looks: list[bool], monkeypatch: pytest.MonkeyPatch) -> str | None:
    """Run the sender's watch over `looks` (True: Redis answered that look, False: it failed);
    returns why the sender gave up, or None. Looks come every 0.1 s; the grace is 0.35 s."""
    monkeypatch.setattr(sender_module, "_REDIS_GRACE_S", 0.35)
    monkeypatch.setattr(sender_module, "HEARTBEAT_TTL_S", 0.6)  # a look every 0.1 s
    config = LiveConfig(
        endpoint="http://127.0.0.1:9",
        model="m",
        replay=ReplayConfig(timing="closed", concurrency=1, max_requests=1, seed=1),
        engine=EngineConfig(client_workers=1),
    )
    sender = FleetSender([small_trace(2)], config, redis_url=REDIS_URL, run=uuid.uuid4().hex)
    remaining = list(looks)

    async def look() -> None:
        if not remaining:
            sender._closing = True
            return
        if not remaining.pop(0):
            raise RedisConnectionError("connection reset by peer")

    sender._watch_once = look  # type: ignore[method-assign]
    _on_fleet_loop(sender._watch_loop())
    return sender.broken


def test_blips_with_successes_between_never_add_up_to_the_grace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A failure, then a second well past the grace, with answered looks between: the run
    # goes on. (Counting from the first failure ever gave up at the second.)
    assert _watched([False] + [True] * 8 + [False, True], monkeypatch) is None


def test_failing_for_the_whole_grace_gives_up(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = _watched([True] + [False] * 8, monkeypatch)
    assert broken is not None and broken.startswith("lost contact with Redis"), broken
