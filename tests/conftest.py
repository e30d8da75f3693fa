"""Suite-wide rules: a test marked `infra_missing` (tests/infra.py) skips or, under CI, fails
with its reason; and under CI the web and browser tests run on the production shape or fail."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.infra import strict, unavailable

TESTS = Path(__file__).resolve().parent
PRODUCTION_SHAPE_TESTS = (TESTS / "web", TESTS / "browser")


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Under CI, a web or browser test collected without DATABASE_URL and REDIS_URL would run
    on the embedded default and look green: each fails instead, saying what to set."""
    if not strict() or (os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL")):
        return
    missing = pytest.mark.infra_missing(
        "CI runs the web and browser tests on PostgreSQL and Redis, but DATABASE_URL and "
        'REDIS_URL are not both set: bring them up with scripts/services.sh up, then eval "$('
        'scripts/services.sh env)"'
    )
    for item in items:
        if any(folder in Path(str(item.fspath)).parents for folder in PRODUCTION_SHAPE_TESTS):
            item.add_marker(missing)


def pytest_runtest_setup(item: Any) -> None:
    mark = item.get_closest_marker("infra_missing")
    if mark is not None:
        unavailable(mark.args[0])
