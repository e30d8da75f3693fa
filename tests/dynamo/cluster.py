"""A real NVIDIA Dynamo 1.6.1 on CPU for tests: one frontend (KV router, header session
affinity) and N `dynamo.mocker` workers, started by scripts/dynamo-cpu.sh on a free loopback
port in a run folder of the caller's choosing (logs, pid files, discovery folder).

`scripts/dynamo-cpu.sh install` must have filled the Dynamo venv first (DYNAMO_VENV, default
var/dynamo-venv) and the model folder (DYNAMO_MODEL_DIR, default var/dynamo-model);
`not_installed()` says when it has not.
"""

from __future__ import annotations

import os
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "dynamo-cpu.sh"
DYNAMO_VERSION = "1.6.1"


def venv_dir() -> Path:
    return Path(os.environ.get("DYNAMO_VENV", ROOT / "var" / "dynamo-venv"))


def model_dir() -> Path:
    return Path(os.environ.get("DYNAMO_MODEL_DIR", ROOT / "var" / "dynamo-model"))


def not_installed() -> str | None:
    """Why the real Dynamo cannot start here, or None when it can (the install's stamps)."""
    if not (venv_dir() / f".dynamo-cpu-{DYNAMO_VERSION}").is_file():
        return f"no Dynamo {DYNAMO_VERSION} venv at {venv_dir()}"
    if not (model_dir() / ".dynamo-cpu-model-v1").is_file():
        return f"no model folder at {model_dir()}"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class DynamoCluster:
    """A started frontend + mockers; `stop()` ends them (safe to call twice)."""

    base_url: str
    model: str
    run_dir: Path
    workers: int
    affinity_ttl: int | None

    def stop(self) -> None:
        subprocess.run(
            ["bash", str(SCRIPT), "stop", "--run-dir", str(self.run_dir)],
            check=False,
            capture_output=True,
            timeout=60,
        )

    def log(self, name: str = "frontend") -> str:
        """One process's log ("frontend", "mocker-0", ...), for failure messages."""
        path = self.run_dir / f"{name}.log"
        return path.read_text(errors="replace") if path.is_file() else ""


def start(
    run_dir: Path,
    *,
    workers: int = 2,
    affinity_ttl: int | None = 300,
    affinity_mode: str | None = None,
    router_mode: str = "kv",
    speedup: float = 100.0,
    port: int | None = None,
    timeout_s: float = 120.0,
) -> DynamoCluster:
    """Start the cluster and return once a 1-token chat completion answers and the router
    sees every worker. `affinity_ttl=None` starts the frontend without session affinity."""
    port = port or free_port()
    args = [
        "bash",
        str(SCRIPT),
        "start",
        "--run-dir",
        str(run_dir),
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--ttl",
        "off" if affinity_ttl is None else str(affinity_ttl),
        "--router-mode",
        router_mode,
        "--speedup",
        str(speedup),
        "--timeout",
        str(int(timeout_s)),
    ]
    if affinity_mode:
        args += ["--affinity-mode", affinity_mode]
    run_dir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s + 60)
    if done.returncode != 0:
        subprocess.run(
            ["bash", str(SCRIPT), "stop", "--run-dir", str(run_dir)],
            check=False,
            capture_output=True,
            timeout=60,
        )
        raise RuntimeError(
            f"dynamo-cpu.sh start failed ({done.returncode}): {done.stderr.strip()[-2000:]}"
        )
    report = dict(
        line.split("=", 1) for line in done.stdout.splitlines() if line.startswith("DYNAMO_")
    )
    return DynamoCluster(
        base_url=report["DYNAMO_URL"],
        model=report["DYNAMO_MODEL"],
        run_dir=run_dir,
        workers=workers,
        affinity_ttl=affinity_ttl,
    )
