"""`manage.py serve` with AIPERF_REAL_DYNAMO=1 starts the real Dynamo on CPU
(scripts/dynamo-cpu.sh) as a second built-in endpoint (without the setting nothing of it runs:
tests/web/test_real_server_settings.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from aiperf_web.endpoints.services import endpoint_test_connection
from aiperf_web.stack import dynamo as real
from aiperf_web.stack.demo import demo_bootstrap, real_dynamo_bootstrap
from runner import Generation
from tests.infra import unavailable


@pytest.mark.dynamo
@pytest.mark.shape_independent  # the Dynamo processes are the same in every shape
def test_the_real_dynamo_starts_and_becomes_a_builtin_dynamo_endpoint_with_header_affinity(
    db: Any, mock_url: str, tmp_path: Path
) -> None:
    missing = real.real_dynamo_missing()
    if missing is not None:
        unavailable(missing)
    demo_bootstrap(mock_url=mock_url)
    dynamo = real.RealDynamo(run_dir=tmp_path / "dynamo-run")
    try:
        dynamo.start()
        endpoint = real_dynamo_bootstrap(url=dynamo.url, model=dynamo.model)
        assert (endpoint.server_kind, endpoint.is_builtin) == ("dynamo", True)
        assert endpoint.model == dynamo.model and endpoint.base_url == dynamo.url
        assert real_dynamo_bootstrap(url=dynamo.url, model=dynamo.model).pk == endpoint.pk
        endpoint_test_connection(actor=User.objects.get(username="admin"), endpoint=endpoint)
        assert endpoint.generation is Generation.V1_6  # released 1.6.1: no session_control
        assert "dynamo-nvext" not in endpoint.affinity_choices
    finally:
        dynamo.stop()
    assert not list((tmp_path / "dynamo-run").glob("*.pid"))
