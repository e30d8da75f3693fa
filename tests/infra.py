"""What a test does when a part of the production shape it needs is not there (PostgreSQL, Redis,
a Celery worker process, client-worker hosts, the real Dynamo, Chromium).

Outside CI it skips with the reason, so `make test` on a bare clone passes with nothing
installed. Under CI (`CI=true`, which .ci/run sets) it fails with the same reason: the real
tier must never drop silently because a service did not come up. The one exception is the
embedded pass (`make web-embedded`, which sets AIPERF_TEST_PASS=embedded): it leaves the
production shape out on purpose, so what needs that shape skips there, and ran in the first
pass."""

from __future__ import annotations

import os
from typing import Any, NoReturn

import pytest


def strict() -> bool:
    """True where a missing service is a failure: CI, outside its deliberate embedded pass."""
    in_ci = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
    return in_ci and os.environ.get("AIPERF_TEST_PASS") != "embedded"


def unavailable(reason: str) -> NoReturn:
    """Skip the calling test (or fixture) with `reason`, or fail with it under CI."""
    if strict():
        pytest.fail(f"{reason} [CI=true: the real tier must run, not skip]", pytrace=False)
    pytest.skip(reason)


def needs(missing: bool, reason: str) -> Any:
    """A mark for a test that needs a part of the production shape: when `missing`, the test
    is skipped with `reason` outside CI and fails with it under CI (tests/conftest.py)."""
    if missing:
        return pytest.mark.infra_missing(reason)
    return pytest.mark.skipif(False, reason=reason)  # nothing missing: a mark that does nothing
