"""The API against its own OpenAPI schema, driven by schemathesis (a property-based tester that
nobody here wrote): every operation, with generated valid and invalid inputs, over real HTTP
with an API token. No answer may be a server error, and every answer must match the schema."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.web.conftest import World

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")


# Run once, on the production shape when there is one: what it checks (no 5xx, answers as the
# schema says) belongs to the API layer; the database engines' own edge cases (NUL, huge
# offsets, oversized bodies) are pinned by test_hostile_http.py, which runs in both shapes.
@pytest.mark.shape_independent
def test_the_api_holds_to_its_schema_under_generated_requests(
    transactional_db: Any, mock_url: str, service: str, tmp_path: Path
) -> None:
    world = World(mock_url)
    result = subprocess.run(
        [
            str(SCHEMATHESIS),
            "run",
            f"{service}/api/v1/openapi.json",
            "--header",
            f"Authorization: Bearer {world.tokens['owner']}",
            "--checks",
            "not_a_server_error,response_schema_conformance",
            "--phases",
            "coverage,fuzzing",
            "--max-examples",
            "5",
            "--seed",
            "1",
            "--workers",
            "1",
            "--report-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,  # its .schemathesis cache stays out of the checkout
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "failed" not in result.stdout.split("SUMMARY")[-1]
