"""`manage.py serve` starts a real server (the real Dynamo, the real vLLM) only when its
setting asks for it, and says how to install it when asked for but missing: the opt-in both
share (aiperf_web/stack/scripted.py). Their end-to-end tests are tests/web/test_real_dynamo.py
and tests/web/test_real_vllm.py."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from aiperf_web.endpoints.models import Endpoint
from aiperf_web.stack import dynamo, vllm
from aiperf_web.stack.demo import REAL_DYNAMO_ENDPOINT, REAL_VLLM_ENDPOINT

# (the module, its launch, its setting, its endpoint's name, its install script)
SERVERS = {
    "dynamo": (dynamo, dynamo.real_dynamo_launch, "AIPERF_REAL_DYNAMO", REAL_DYNAMO_ENDPOINT,
               "dynamo-cpu.sh install"),
    "vllm": (vllm, vllm.real_vllm_launch, "AIPERF_REAL_VLLM", REAL_VLLM_ENDPOINT,
             "vllm-cpu.sh install"),
}  # fmt: skip


def _no_subprocess(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError(f"started a process: {args}")


def _server(name: str) -> tuple[ModuleType, Callable[..., Any], str, str, str]:
    return SERVERS[name]


@pytest.mark.parametrize("name", SERVERS)
def test_without_the_setting_serve_starts_nothing_and_adds_no_endpoint(
    name: str, db: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _module, launch, setting, endpoint, _install = _server(name)
    setattr(settings, setting, False)
    monkeypatch.setattr(subprocess, "run", _no_subprocess)
    said: list[str] = []
    assert launch(say=said.append, bootstrap=True) is None
    assert said == []
    assert not Endpoint.objects.filter(name=endpoint).exists()


@pytest.mark.parametrize("name", SERVERS)
def test_asked_for_but_not_installed_it_says_how_to_install_and_serves_without(
    name: str, db: Any, settings: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    module, launch, setting, _endpoint, install = _server(name)
    setattr(settings, setting, True)
    monkeypatch.setattr(module, "VENV", tmp_path / "no-venv")
    monkeypatch.setattr(subprocess, "run", _no_subprocess)
    said: list[str] = []
    assert launch(say=said.append, bootstrap=True) is None
    (line,) = said
    assert line.startswith(f"{setting} is set, but"), line
    assert "not installed" in line and install in line, line
