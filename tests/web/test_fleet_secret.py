"""A fleet run's endpoint API key and secret headers never lie in Redis in the clear (issue 21
item 4): the hosts' configuration is sealed under the run's own key, and the host tasks carry
that key sealed under the service's at-rest key (runner/fleet/host.py, runs/fleet.py).

Through the service, for real: a mock that demands the API key (so a run that succeeds proves
the hosts had it), a Celery runs worker, the hosts worker, and the test's Redis watched the
whole run long with MONITOR (every command any client sent: the broker's task messages, the
run's config, the credit streams) and scanned over and over (every key of the database, every
stream entry, list item, hash field), each looked at as sent and with its base64 bodies (Celery's
messages) decoded. Neither the API key nor the secret header's value appears, in any form."""

from __future__ import annotations

import base64
import binascii
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings

from aiperf_web.endpoints.models import Endpoint
from aiperf_web.endpoints.services import endpoint_update
from runner.mockserver import MockServerConfig, start_mock_server
from tests.infra import needs
from tests.web.conftest import World, final_run

API_KEY = "sk-fleet-" + "7Qm2x9VtR4kLp8Zw3Nc6"
GATEWAY = "gw-secret-" + "Hy5Jd1Ue0Bq"

_B64 = re.compile(rb"[A-Za-z0-9+/=_-]{16,}")


def _forms(data: bytes) -> list[bytes]:
    """`data` and every base64 run inside it decoded (Celery bodies, nested once more)."""
    found = [data]
    for depth in range(2):
        more = []
        for chunk in found[-1:] if depth else found:
            for match in _B64.findall(chunk):
                for decode in (base64.b64decode, base64.urlsafe_b64decode):
                    try:
                        more.append(decode(match + b"=" * (-len(match) % 4)))
                    except (binascii.Error, ValueError):
                        continue
        found.extend(more)
    return found


def _leaks(data: bytes) -> list[str]:
    return [
        name
        for name, secret in (("API key", API_KEY), ("secret header", GATEWAY))
        if any(secret.encode() in form for form in _forms(data))
    ]


class RedisWatch:
    """MONITOR on the test's Redis plus repeated scans of its database, until `stop()`."""

    def __init__(self, url: str) -> None:
        import redis

        self.redis = redis.Redis.from_url(url)
        self.commands: list[bytes] = []
        self.values: list[bytes] = []
        self.keys_seen: set[bytes] = set()
        self.stopping = threading.Event()
        self.ready = threading.Event()
        self.threads = [
            threading.Thread(target=self._monitor, daemon=True),
            threading.Thread(target=self._scan, daemon=True),
        ]
        for thread in self.threads:
            thread.start()
        assert self.ready.wait(10), "MONITOR did not start"

    def _monitor(self) -> None:
        with self.redis.monitor() as monitor:
            self.ready.set()
            # Every database of the server: the channel layer or a cache may use another one.
            for event in monitor.listen():
                self.commands.append(str(event.get("command", "")).encode())
                if self.stopping.is_set():
                    return

    def _scan(self) -> None:
        while not self.stopping.is_set():
            for key in self.redis.scan_iter(count=1000):
                self.keys_seen.add(key)
                self.values.extend(self._read(key))
            self.stopping.wait(0.05)

    def _read(self, key: bytes) -> Iterator[bytes]:
        kind = self.redis.type(key)
        if kind == b"string":
            value = self.redis.get(key)
            if value is not None:
                yield value
        elif kind == b"list":
            yield from self.redis.lrange(key, 0, -1)
        elif kind == b"hash":
            for field, value in self.redis.hgetall(key).items():
                yield field + b"=" + value
        elif kind == b"set":
            yield from self.redis.smembers(key)
        elif kind == b"zset":
            yield from self.redis.zrange(key, 0, -1)
        elif kind == b"stream":
            for _, fields in self.redis.xrange(key):
                for field, value in fields.items():
                    yield field + b"=" + value

    def stop(self) -> None:
        self.stopping.set()
        self.redis.ping()  # an event for MONITOR to wake on
        for thread in self.threads:
            thread.join(timeout=10)


@pytest.fixture
def keyed_mock() -> Iterator[str]:
    """A mock that answers 401 without `Authorization: Bearer API_KEY`."""
    server = start_mock_server(MockServerConfig(api_key=API_KEY))
    try:
        yield server.url
    finally:
        server.stop()


def test_the_leak_finder_finds_a_key_as_celery_would_carry_it() -> None:
    """The check itself: plaintext, base64 (as a Celery body), base64 of a JSON in base64."""
    inner = base64.b64encode(f'[["x", "{API_KEY}"], {{}}]'.encode())
    body = b'{"body": "' + base64.b64encode(b'{"a": "' + inner + b'"}') + b'"}'
    assert _leaks(body) == ["API key"]
    assert _leaks(f"SET k {GATEWAY}".encode()) == ["secret header"]
    assert _leaks(base64.b64encode(b"nothing here, " * 4)) == []


@needs(not settings.REDIS_URL, "the watch reads Redis (set REDIS_URL)")
def test_the_watch_catches_a_key_left_in_a_stream_or_sent_in_a_command() -> None:
    """The watch itself, on the real Redis: a plaintext key in a stream entry is found by the
    scan and by MONITOR; one sent base64-encoded in a list (as Celery would) too."""
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL)
    stream, listed = f"leak-probe-{uuid.uuid4().hex}", f"leak-probe-{uuid.uuid4().hex}"
    watch = RedisWatch(settings.REDIS_URL)
    try:
        client.xadd(stream, {b"config": f'{{"api_key": "{API_KEY}"}}'.encode()})
        client.lpush(listed, base64.b64encode(f"x-gateway-token: {GATEWAY}".encode()))
        time.sleep(0.3)  # a scan or two
    finally:
        watch.stop()
        client.delete(stream, listed)
    scanned = {name for value in watch.values for name in _leaks(value)}
    sent = {name for command in watch.commands for name in _leaks(command)}
    assert scanned == sent == {"API key", "secret header"}


def test_a_fleet_runs_api_key_and_secret_headers_never_reach_redis_in_the_clear(
    live_world: World, hosts_worker: str, keyed_mock: str, wait_for: Callable[..., Any]
) -> None:
    endpoint = endpoint_update(
        actor=live_world.owner,
        endpoint=live_world.endpoint,
        base_url=keyed_mock,
        api_key=API_KEY,
        secret_headers={"X-Gateway-Token": GATEWAY},
    )
    assert Endpoint.objects.get(pk=endpoint.pk).has_api_key
    watch = RedisWatch(settings.AIPERF_FLEET_REDIS_URL)
    try:
        run_id = live_world.launch_fleet_run(duration_s=4, concurrency=3)
        run = final_run(run_id, wait_for)
    finally:
        watch.stop()
    # The hosts had the key: the mock refuses every request without it.
    assert run.status == "succeeded", run.reason
    assert run.summary["requests"] > 0 and run.summary["errors"] == 0, run.summary
    assert len(run.summary["fleet"]["hosts"]) == 3
    # The watch saw the run: its sealed configuration, its credits, its host tasks.
    config_key = next(k for k in watch.keys_seen if k.endswith(b":config"))
    commands = b"\n".join(watch.commands)
    assert b"XADD" in commands.upper() and config_key in commands
    assert b"fleet.host" in commands  # the host tasks went through the broker
    assert watch.values, "the scan read nothing"
    leaks = {(name, blob[:120]) for blob in watch.commands + watch.values for name in _leaks(blob)}
    assert leaks == set()
