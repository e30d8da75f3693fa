"""Built-in samples are the public traces read in place; without them the product still works."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aiperf_web.scenarios.samples import SAMPLES
from aiperf_web.stack.demo import demo_bootstrap
from tests.fixtures import DAG_SPAWN
from tests.web.conftest import World, samples_dir_with


@pytest.mark.parametrize("folder", ["empty", "missing"])
def test_without_the_public_traces_the_demo_replays_the_synthetic_workload(
    db: Any, settings: Any, tmp_path: Path, mock_url: str, folder: str
) -> None:
    # No sample is installed: an empty folder, or one that is not there (a bare clone).
    settings.AIPERF_SAMPLES_DIR = tmp_path if folder == "empty" else tmp_path / "absent"
    boot = demo_bootstrap(mock_url=mock_url)
    spec = boot.scenario.spec
    assert spec["workload"]["traces"] == [] and spec["workload"]["synthetic"] is not None
    assert "synthetic" in boot.scenario.description


def test_with_the_public_traces_the_demo_replays_the_claude_code_session(
    db: Any, mock_url: str
) -> None:
    sample = SAMPLES["claude-code-subagents"]
    if not sample.available:
        pytest.skip(
            f"sample traces not found at {sample.path}: the shared/ folder beside the checkout"
        )
    boot = demo_bootstrap(mock_url=mock_url)
    assert len(boot.scenario.spec["workload"]["traces"]) == 1


def test_only_installed_samples_are_offered_and_a_missing_one_is_a_clear_422(
    world: World, settings: Any, tmp_path: Path
) -> None:
    # Only dag-small is installed (a copy of the project's fixture stands in for its file).
    settings.AIPERF_SAMPLES_DIR = samples_dir_with(tmp_path, key="dag-small", source=DAG_SPAWN)
    api = world.api("owner")
    offered = [s["key"] for s in api.get("/api/v1/traces/samples").json()]
    assert offered == ["dag-small"]
    response = api.post("/api/v1/traces", {"sample": "claude-code-subagents"})
    assert response.status_code == 422, response.content
    (error,) = response.json()["errors"]
    assert error["field"] == "sample" and "AIPERF_SAMPLES_DIR" in error["message"]
    assert api.post("/api/v1/traces", {"sample": "dag-small"}).status_code == 201


def test_without_samples_the_traces_page_says_where_they_come_from_and_offers_the_upload(
    world: World, settings: Any, tmp_path: Path
) -> None:
    # A bare clone: no public traces. No empty list, no "This field is required".
    settings.AIPERF_SAMPLES_DIR = tmp_path / "absent"
    owner = world.client("owner")
    html = owner.get("/traces/").content.decode()
    card = html.split('id="samples-card"')[1].split("</section>")[0]
    assert "<select" not in card and "AIPERF_SAMPLES_DIR" in card
    assert str(tmp_path / "absent") in card and 'href="#upload-card"' in card
    assert 'id="upload-card"' in html
    # A sample POST anyway (an old tab) is answered with the same why, not a required field.
    page = owner.post("/traces/", {"action": "sample", "sample-sample": "dag-small"})
    text = page.content.decode()
    assert page.status_code == 200 and "This field is required" not in text
    assert "No built-in sample is installed on this server" in text
    # With one installed, the form offers it.
    settings.AIPERF_SAMPLES_DIR = samples_dir_with(tmp_path, key="dag-small", source=DAG_SPAWN)
    html = owner.get("/traces/").content.decode()
    card = html.split('id="samples-card"')[1].split("</form>")[0]
    assert "<select" in card and "dag-small" in card
