"""Shared fixtures: the public sample traces beside the project (../shared/traces)."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"


@pytest.fixture(scope="session")
def claude_code_trace() -> Path:
    path = SHARED_TRACES / "weka_claude_code" / "trace_0282.json"
    if not path.exists():
        pytest.skip(f"sample trace not found at {path} (the shared/ folder beside the project)")
    return path
