"""`real_dynamo`: a real Dynamo 1.6.1 (frontend + 2 CPU mocker workers) for the session, or a
skip when `scripts/dynamo-cpu.sh install` has not been run on this machine (a failure under CI,
which installs it: tests/infra.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.dynamo import cluster
from tests.infra import unavailable


@pytest.fixture(scope="session")
def real_dynamo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.DynamoCluster]:
    if cluster.not_installed() is not None:
        unavailable("real Dynamo not installed: run scripts/dynamo-cpu.sh install")
    started = cluster.start(tmp_path_factory.mktemp("dynamo-run"))
    try:
        yield started
    finally:
        started.stop()
