"""The built-in mock cluster as a child process of `manage.py serve` (the embedded default's
ready endpoint): `python -m runner mock-server` on loopback, speaking current released Dynamo
(1.3 to 1.6: no nvext.session_control, sessions pinned by the X-Dynamo-Session-ID header with
the frontend's affinity TTL on), so what works on it works on a real Dynamo."""

from __future__ import annotations

import ctypes
import signal
import socket
import subprocess
import sys
import time

import httpx

from runner import Generation


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def die_with_parent() -> None:
    """In a child, before exec: ask Linux to SIGTERM it when its parent dies, so a killed
    `serve` never leaves its mock or worker behind (one process tree). No-op elsewhere."""
    if sys.platform != "linux":
        return
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class MockServer:
    """Start with `start()`, stop with `stop()`; `url` is its base URL."""

    def __init__(
        self,
        *,
        port: int,
        time_scale: float,
        workers: int = 8,
        dynamo_version: str = Generation.V1_6.value,
        header_affinity_ttl_s: float | None = 300,
    ) -> None:
        self.port = port if port_free(port) else free_port()
        self.time_scale = time_scale
        self.workers = workers
        self.dynamo_version = dynamo_version
        # Dynamo's --router-session-affinity-ttl-secs: without it header affinity is off.
        self.header_affinity_ttl_s = header_affinity_ttl_s
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, *, timeout_s: float = 30.0) -> None:
        ttl = (
            []
            if self.header_affinity_ttl_s is None
            else ["--header-affinity-ttl", f"{self.header_affinity_ttl_s:g}"]
        )
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "runner",
                "mock-server",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
                "--time-scale",
                str(self.time_scale),
                "--dynamo-version",
                self.dynamo_version,
                *ttl,
            ],
            stdout=subprocess.DEVNULL,
            preexec_fn=die_with_parent,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the mock server exited with code {self.process.returncode}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the mock server did not answer on {self.url} within {timeout_s} s")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
