"""Every child `manage.py serve` starts (the runs worker, the hosts worker, the built-in mock,
the real Dynamo and vLLM, the embedded worker thread) is watched by a thread of its own and
started again when it dies: after 1 s, then twice as long after each death in a row, at most
BACKOFF_CAP_S; a child that stayed up STABLE_S starts over at 1 s. Each death and each
restart is a log line (what ended, how, after how long up, when the next try is). A child that
cannot start (its port taken, its script failing) is tried again on the same schedule.

`status()` is what /healthz shows for a built-in server (ops.health.health_server_watch): "ok",
"starting" before its first start ends (a real Dynamo takes a minute, and the site serves
meanwhile), or why it is down since when, which makes the service unhealthy until it is back.
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import Protocol

from aiperf_web.core.mock import MockServer, die_with_parent

log = logging.getLogger(__name__)

BACKOFF_START_S = 1.0
BACKOFF_CAP_S = 30.0
STABLE_S = 60.0
POLL_S = 0.25  # how soon a death is noticed
STOP_TIMEOUT_S = 15.0


class Child(Protocol):
    """What the supervisor drives. `start()` returns once the child serves (or raises saying
    why it cannot); `ended()` is None while it lives, else how it ended, in a few words;
    `stop()` ends it and may be called at any time, also while `start()` runs."""

    def start(self) -> None: ...

    def ended(self) -> str | None: ...

    def stop(self) -> None: ...


def exit_words(returncode: int) -> str:
    if returncode < 0:
        return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


class ProcessChild:
    """A command run as a child process that dies with serve (the Celery workers)."""

    def __init__(self, argv: Sequence[str]) -> None:
        self.argv = list(argv)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(self.argv, preexec_fn=die_with_parent)

    def ended(self) -> str | None:
        if self.process is None:
            return "never started"
        code = self.process.poll()
        return None if code is None else exit_words(code)

    def stop(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class MockChild:
    """The built-in mock cluster, started again on the port it had (its endpoint's URL)."""

    def __init__(self, mock: MockServer) -> None:
        self.mock = mock

    def start(self) -> None:
        self.mock.start()

    def ended(self) -> str | None:
        process = self.mock.process
        if process is None:
            return "never started"
        code = process.poll()
        return None if code is None else exit_words(code)

    def stop(self) -> None:
        self.mock.stop()


class Supervised(threading.Thread):
    """Watches `child` (started already when `started` is true, else started here first)."""

    def __init__(self, name: str, child: Child, *, started: bool) -> None:
        super().__init__(name=f"supervise-{name}", daemon=True)
        self.label = name
        self.child = child
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._up = started
        self._down_since: float | None = None
        self._why = ""
        self.restarts = 0
        self._started_at = time.monotonic()

    def status(self) -> tuple[bool, str]:
        """(healthy, in words) for /healthz: "ok"; "starting" while its first start is under
        way (not a fault: the site serves meanwhile); else down since when and why, which is
        a fault until it is back (also when its first start failed)."""
        with self._lock:
            if self._up:
                return True, "ok"
            if self._down_since is None:
                return True, "starting"
            since = time.monotonic() - self._down_since
            return False, f"down for {since:.0f} s: {self._why}; being restarted"

    def run(self) -> None:
        backoff = BACKOFF_START_S
        while not self.stopping.is_set():
            if not self._up:
                try:
                    self.child.start()
                except Exception as exc:
                    if self.stopping.is_set():
                        return
                    self._mark_down(f"did not start ({type(exc).__name__}: {exc})")
                    log.error(
                        "%s did not start: %s: %s; trying again in %g s",
                        self.label,
                        type(exc).__name__,
                        exc,
                        backoff,
                    )
                    self.stopping.wait(backoff)
                    backoff = min(backoff * 2, BACKOFF_CAP_S)
                    continue
                with self._lock:
                    self._up, self._down_since = True, None
                self._started_at = time.monotonic()
                if self.restarts:
                    log.warning("%s started again (restart %d)", self.label, self.restarts)
            ended = self.child.ended()
            if ended is None:
                self.stopping.wait(POLL_S)
                continue
            if self.stopping.is_set():
                return
            up_s = time.monotonic() - self._started_at
            if up_s >= STABLE_S:
                backoff = BACKOFF_START_S
            self.restarts += 1
            self._mark_down(ended)
            log.warning(
                "%s %s after %.0f s up; restarting it in %g s (restart %d)",
                self.label,
                ended,
                up_s,
                backoff,
                self.restarts,
            )
            self.stopping.wait(backoff)
            backoff = min(backoff * 2, BACKOFF_CAP_S)

    def _mark_down(self, why: str) -> None:
        with self._lock:
            self._up = False
            self._why = why
            if self._down_since is None:
                self._down_since = time.monotonic()

    def stop(self) -> None:
        """No more restarts; then the child is stopped."""
        self.stopping.set()
        self.child.stop()  # unblocks a start under way (the mock's wait, Dynamo's script)
        self.join(timeout=STOP_TIMEOUT_S)
        self.child.stop()  # whatever a start that finished meanwhile left running
