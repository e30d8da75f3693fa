"""The client address behind a reverse proxy (issue 13 item 7): `manage.py serve` believes
X-Forwarded-For only from the addresses in AIPERF_TRUSTED_PROXIES, so the login throttle's
count per (username, address) follows the real client behind a trusted proxy and cannot be
dodged by a client that writes the header itself."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from aiperf_web.core.mock import free_port
from tests.web.conftest import ROOT

PASSWORD = "proxy-test-pw"
MAX_FAILURES = 3


@contextmanager
def _serve(data_dir: Path, **extra_env: str) -> Iterator[str]:
    """`manage.py serve` as the Dockerfile runs it (no mock, no worker), embedded shape."""
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "FORWARDED_ALLOW_IPS", "AIPERF_TRUSTED_PROXIES")
    } | {
        "AIPERF_DATA_DIR": str(data_dir),
        "AIPERF_ADMIN_PASSWORD": PASSWORD,
        "AIPERF_MOCK_URL": "http://127.0.0.1:9",
        "AIPERF_LOGIN_MAX_FAILURES": str(MAX_FAILURES),
        **extra_env,
    }
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--no-mock", "--no-worker"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/health/", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail("serve did not answer within 60 s")
            time.sleep(0.2)
        yield base
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _login(base: str, username: str, password: str, forwarded_for: str) -> int:
    """A whole login (form, CSRF cookie, POST) by a client claiming `forwarded_for`."""
    headers = {"X-Forwarded-For": forwarded_for}
    with httpx.Client(base_url=base, headers=headers, timeout=10) as client:
        page = client.get("/accounts/login/")
        match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert match, "the login form carries a CSRF token"
        response = client.post(
            "/accounts/login/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": match[1]},
        )
        return response.status_code


def test_a_client_cannot_dodge_the_address_lock_with_x_forwarded_for_by_default(
    tmp_path: Path,
) -> None:
    with _serve(tmp_path) as base:
        for n in range(MAX_FAILURES):
            assert _login(base, "admin", f"guess-{n}", forwarded_for=f"203.0.113.{n}") == 200
        # Every failure came from 127.0.0.1, whatever the header said: admin is locked there.
        assert _login(base, "admin", PASSWORD, forwarded_for="203.0.113.200") == 200


def test_behind_a_trusted_proxy_the_lock_follows_the_forwarded_client(tmp_path: Path) -> None:
    with _serve(tmp_path, AIPERF_TRUSTED_PROXIES="127.0.0.1") as base:
        for n in range(MAX_FAILURES):
            assert _login(base, "admin", f"guess-{n}", forwarded_for="203.0.113.7") == 200
        assert _login(base, "admin", PASSWORD, forwarded_for="203.0.113.7") == 200, "locked"
        assert _login(base, "admin", PASSWORD, forwarded_for="203.0.113.8") == 302


def test_x_forwarded_for_from_an_untrusted_peer_is_ignored(tmp_path: Path) -> None:
    # A proxy is configured, but this client (127.0.0.1) is not it.
    with _serve(tmp_path, AIPERF_TRUSTED_PROXIES="10.255.0.1") as base:
        for n in range(MAX_FAILURES):
            assert _login(base, "admin", f"guess-{n}", forwarded_for=f"203.0.113.{n}") == 200
        assert _login(base, "admin", PASSWORD, forwarded_for="203.0.113.200") == 200
