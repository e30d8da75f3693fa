"""Fixtures for the trace tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.runner.trace.helpers import SHARED_TRACES


@pytest.fixture
def shared_traces() -> Path:
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"sample traces not found at {SHARED_TRACES} (../shared is absent)")
    return SHARED_TRACES
