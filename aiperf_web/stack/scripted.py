"""A real server `manage.py serve` starts through a script of its own (scripts/dynamo-cpu.sh,
scripts/vllm-cpu.sh), opt-in by a setting: the shape both share.

Each script takes `start --port N --run-dir D` (port 0: it picks a free one), detaches what it
starts (setsid), writes one pid file per process and a `url` file of `<PREFIX>_URL=` and
`<PREFIX>_MODEL=` lines to the run folder once a chat answers, and `stop --run-dir D` ends
them. `serve` watches them (stack/supervise.py): when one process exits, all are stopped and
started again, and the built-in endpoints follow the port they got (`ScriptedChild.seed`).
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.db import connection

from aiperf_web.core.mock import port_free


@dataclass
class ScriptedServer:
    """`start()` blocks until the script reports the server answering a chat; `url` and
    `model` are then what it reported. `stop()` is safe at any time and final."""

    run_dir: Path
    script: Path
    prefix: str  # the url file's keys: <prefix>_URL, <prefix>_MODEL
    default_port: int  # the script's own default, taken when free
    start_timeout_s: float = 180.0
    start_args: tuple[str, ...] = ()  # more options of the script's `start`
    url: str = ""
    model: str = ""
    stopped: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        # What is left of an earlier start (a frontend whose workers died, say): the script
        # would call a half-alive set "already running".
        self._script_stop()
        port = self.default_port if port_free(self.default_port) else 0  # 0: the script picks
        done = subprocess.run(
            [
                str(self.script),
                "start",
                "--port",
                str(port),
                "--run-dir",
                str(self.run_dir),
                *self.start_args,
            ],
            capture_output=True,
            text=True,
            timeout=self.start_timeout_s,
            check=False,
        )
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            raise RuntimeError(lines[-1] if lines else f"exit code {done.returncode}")
        report = dict(
            line.split("=", 1)
            for line in (self.run_dir / "url").read_text().splitlines()
            if "=" in line
        )
        self.url, self.model = report[f"{self.prefix}_URL"], report[f"{self.prefix}_MODEL"]
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
class ScriptedChild:
    """A scripted server as `serve` supervises it: each start (the first, in the background,
    and every restart) calls `seed(url, model)`, which creates or moves its built-in
    endpoints and says what it did, and the start is a log line."""

    server: ScriptedServer
    label: str
    say: Callable[[str], None]
    seed: Callable[[str, str], str] | None  # None: --no-bootstrap

    def start(self) -> None:
        self.server.start()
        where = f"{self.server.url} (model {self.server.model})"
        if self.seed is None:
            self.say(f"{self.label} ready on {where}")
            return
        try:
            seeded = self.seed(self.server.url, self.server.model)
        finally:
            connection.close()  # the supervising thread's own database connection
        self.say(f"{self.label} ready on {where}: {seeded}")

    def ended(self) -> str | None:
        return self.server.ended()

    def stop(self) -> None:
        self.server.stop()


def scripted_launch(
    *,
    wanted: bool,
    setting: str,
    missing: str | None,
    server: Callable[[], ScriptedServer],
    label: str,
    say: Callable[[str], None],
    seed: Callable[[str, str], str] | None,
) -> ScriptedChild | None:
    """With the setting on and the server installed: the child for the caller to start under
    supervision in the background (the service does not wait the minute a start takes). None
    otherwise, saying why when it was asked for."""
    if not wanted:
        return None
    if missing is not None:
        say(f"{setting} is set, but {missing}: serving without it")
        return None
    child = ScriptedChild(server=server(), label=label, say=say, seed=seed)
    say(f"starting {label} in the background (logs in {child.server.run_dir})")
    return child
