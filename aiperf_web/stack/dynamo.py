"""A real NVIDIA Dynamo on CPU as a second built-in endpoint of `manage.py serve`, opt-in with
AIPERF_REAL_DYNAMO=1 once `scripts/dynamo-cpu.sh install` has filled `var/dynamo-venv`: the
script starts a Dynamo 1.6.1 frontend (KV router, header session affinity) and two CPU mocker
workers in the background and writes their URL and model name to its run folder; `stop` ends
them. The script detaches its processes (setsid), so `serve` stops them itself on exit, and
watches them (stack/supervise.py): when one of them exits, all are stopped and started again,
and the endpoint follows the port they got."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import connection

from aiperf_web.core.mock import port_free
from aiperf_web.stack.demo import REAL_DYNAMO_ENDPOINT, real_dynamo_bootstrap

SCRIPT = Path(settings.BASE_DIR) / "scripts" / "dynamo-cpu.sh"
VENV = Path(settings.BASE_DIR) / "var" / "dynamo-venv"
DEFAULT_PORT = 8088  # the script's own default


def real_dynamo_missing(*, script: Path | None = None, venv: Path | None = None) -> str | None:
    """Why the real Dynamo cannot be started here, or None when it can."""
    script, venv = script or SCRIPT, venv or VENV
    if not script.is_file():
        return f"{script} is missing"
    if not venv.is_dir():
        return f"Dynamo is not installed ({venv} is missing): run {script} install"
    return None


@dataclass
class RealDynamo:
    """`start()` blocks until the frontend answers a chat (the script waits for it); `url` and
    `model` are then what the script reported. `stop()` is safe at any time and final."""

    run_dir: Path
    script: Path = SCRIPT
    url: str = ""
    model: str = ""
    stopped: threading.Event = field(default_factory=threading.Event)

    def start(self, *, timeout_s: float = 180.0) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        # What is left of an earlier start (a frontend whose workers died, say): the script
        # would call a half-alive set "already running".
        self._script_stop()
        port = DEFAULT_PORT if port_free(DEFAULT_PORT) else 0  # 0: the script picks one
        done = subprocess.run(
            [str(self.script), "start", "--port", str(port), "--run-dir", str(self.run_dir)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            raise RuntimeError(lines[-1] if lines else f"exit code {done.returncode}")
        # The script's report: DYNAMO_URL=... and DYNAMO_MODEL=... lines.
        report = dict(
            line.split("=", 1)
            for line in (self.run_dir / "url").read_text().splitlines()
            if "=" in line
        )
        self.url, self.model = report["DYNAMO_URL"], report["DYNAMO_MODEL"]
        if self.stopped.is_set():  # stop() came while the script was starting
            self._script_stop()
            raise RuntimeError("stopped while starting")

    def ended(self) -> str | None:
        """None while every process the script started lives, else which one exited."""
        pids = sorted(self.run_dir.glob("*.pid"))
        if not pids:
            return "lost its processes"
        for pid_file in pids:
            if not Path(f"/proc/{pid_file.read_text().strip()}").exists():
                return f"lost its {pid_file.stem} (log: {self.run_dir / pid_file.stem}.log)"
        return None

    def stop(self) -> None:
        self.stopped.set()
        self._script_stop()

    def _script_stop(self) -> None:
        subprocess.run(
            [str(self.script), "stop", "--run-dir", str(self.run_dir)],
            capture_output=True,
            timeout=60,
            check=False,
        )


@dataclass
class DynamoChild:
    """The real Dynamo as `serve` supervises it: each start (the first, in the background, and
    every restart) creates or moves its endpoint to the port it got, and says so."""

    dynamo: RealDynamo
    say: Callable[[str], None]
    bootstrap: bool

    def start(self) -> None:
        self.dynamo.start()
        where = f"{self.dynamo.url} (model {self.dynamo.model})"
        if not self.bootstrap:
            self.say(f"{REAL_DYNAMO_ENDPOINT} ready on {where}")
            return
        try:
            real_dynamo_bootstrap(url=self.dynamo.url, model=self.dynamo.model)
        finally:
            connection.close()  # the supervising thread's own database connection
        self.say(f"{REAL_DYNAMO_ENDPOINT} ready on {where}: endpoint {REAL_DYNAMO_ENDPOINT!r}")

    def ended(self) -> str | None:
        return self.dynamo.ended()

    def stop(self) -> None:
        self.dynamo.stop()


def real_dynamo_launch(*, say: Callable[[str], None], bootstrap: bool) -> DynamoChild | None:
    """With AIPERF_REAL_DYNAMO on and Dynamo installed: the real Dynamo, for the caller to start
    under supervision in the background (the service does not wait the minute it takes). None
    otherwise (saying why when it was asked for)."""
    if not settings.AIPERF_REAL_DYNAMO:
        return None
    missing = real_dynamo_missing()
    if missing is not None:
        say(f"AIPERF_REAL_DYNAMO is set, but {missing}: serving without it")
        return None
    dynamo = RealDynamo(run_dir=Path(settings.DATA_DIR) / "dynamo-run")
    say(f"starting {REAL_DYNAMO_ENDPOINT} in the background (logs in {dynamo.run_dir})")
    return DynamoChild(dynamo=dynamo, say=say, bootstrap=bootstrap)
