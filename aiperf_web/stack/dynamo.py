"""A real NVIDIA Dynamo on CPU as a built-in endpoint of `manage.py serve`, opt-in with
AIPERF_REAL_DYNAMO=1 once `scripts/dynamo-cpu.sh install` has filled `var/dynamo-venv`: the
script starts a Dynamo 1.6.1 frontend (KV router, header session affinity) and two CPU mocker
workers in the background and writes their URL and model name to its run folder; `stop` ends
them. Started, watched and restarted as every scripted server is (stack/scripted.py), and
the endpoint follows the port they got."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from aiperf_web.stack.demo import REAL_DYNAMO_ENDPOINT, real_dynamo_bootstrap
from aiperf_web.stack.scripted import ScriptedChild, ScriptedServer, scripted_launch

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
class RealDynamo(ScriptedServer):
    script: Path = SCRIPT
    prefix: str = "DYNAMO"
    default_port: int = DEFAULT_PORT


def _seed(url: str, model: str) -> str:
    real_dynamo_bootstrap(url=url, model=model)
    return f"endpoint {REAL_DYNAMO_ENDPOINT!r}"


def real_dynamo_launch(*, say: Callable[[str], None], bootstrap: bool) -> ScriptedChild | None:
    """With AIPERF_REAL_DYNAMO on and Dynamo installed: the real Dynamo, for the caller to start
    under supervision in the background. None otherwise (saying why when it was asked for)."""
    return scripted_launch(
        wanted=settings.AIPERF_REAL_DYNAMO,
        setting="AIPERF_REAL_DYNAMO",
        missing=real_dynamo_missing() if settings.AIPERF_REAL_DYNAMO else None,
        server=lambda: RealDynamo(run_dir=Path(settings.DATA_DIR) / "dynamo-run"),
        label=REAL_DYNAMO_ENDPOINT,
        say=say,
        seed=_seed if bootstrap else None,
    )
