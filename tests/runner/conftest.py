"""Shared fixtures: the project's Claude Code session fixture, and the public session with
subagents (../shared/traces) that the seed tables of docs/product.md come from."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures import CLAUDE_CODE_SUBAGENTS, shared_sample

CLAUDE_CODE_SAMPLE = "weka_claude_code/trace_0282.json"


@pytest.fixture(scope="session")
def claude_code_trace() -> Path:
    """A Claude Code session with three SPAWN subagents (tests/fixtures/README.md)."""
    return CLAUDE_CODE_SUBAGENTS


@pytest.fixture(scope="session", params=["fixture", "sample"])
def seed_trace(request: pytest.FixtureRequest) -> Path:
    """The fixture, then the public session the seed tables were measured on (which skips
    when the shared/ folder is not beside the checkout): the same behaviour on both."""
    if request.param == "sample":
        return shared_sample(CLAUDE_CODE_SAMPLE)
    return CLAUDE_CODE_SUBAGENTS
