"""Fixtures for the trace tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures import shared_sample


@pytest.fixture
def shared_traces() -> Path:
    """The public sample traces' folder; skips the test when it is not beside the checkout."""
    return shared_sample()
