"""endpoints 0004 moves a stored detection to the engine's one vocabulary of Dynamo generations
(runner.dynamo.Generation) and drops the stored list of usable modes, which follows from the
generation; backward, the probe's old names and the list come back. Run on the real schema:
migrated back to 0003, rows written as the old code wrote them, forward, then back again."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from runner import Generation

BEFORE = [("endpoints", "0003_secret_headers")]
AFTER = [("endpoints", "0004_generation_values")]
# What the probe stored before 0004: (old name, header affinity, usable modes).
OLD_ROWS = {
    "dev": ("bind", True, ["none", "header", "dynamo-nvext", "dynamo-headers"]),
    "v12": ("open", False, ["none", "header", "dynamo-nvext"]),
    "v16": ("headers", True, ["none", "header", "dynamo-headers"]),
    "plain": (None, None, ["none", "header", "dynamo-headers"]),
}


def _migrate(targets: list[tuple[str, str]]) -> Any:
    """The schema with endpoints migrated to `targets` (every other app at its latest), and
    the historical app registry of that state."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    others = [key for key in executor.loader.graph.leaf_nodes() if key[0] != "endpoints"]
    return executor.loader.project_state([*others, *targets]).apps


@pytest.fixture
def at_0003(transactional_db: Any) -> Iterator[Any]:
    apps = _migrate(BEFORE)
    try:
        yield apps
    finally:
        _migrate(_latest())  # the rest of the suite needs the current schema


def _latest() -> list[tuple[str, str]]:
    executor = MigrationExecutor(connection)
    return [key for key in executor.loader.graph.leaf_nodes() if key[0] == "endpoints"]


def test_stored_generations_move_to_the_engines_values_and_back(at_0003: Any) -> None:
    Team = at_0003.get_model("teams", "Team")
    Endpoint = at_0003.get_model("endpoints", "Endpoint")
    team = Team.objects.create(name="migrating")
    now = timezone.now()
    for name, (generation, header, usable) in OLD_ROWS.items():
        Endpoint.objects.create(
            team=team,
            name=name,
            base_url="http://127.0.0.1:9/v1",
            model="m",
            server_kind="dynamo",
            affinity_generation=generation,
            header_affinity=header,
            affinity_usable=usable,
            affinity_detected_at=now,
        )
    Endpoint.objects.create(team=team, name="untested", base_url="http://x/v1", model="m")

    after = _migrate(AFTER).get_model("endpoints", "Endpoint")
    moved = dict(after.objects.values_list("name", "affinity_generation"))
    assert moved == {
        "dev": Generation.BIND.value,
        "v12": Generation.V1_2.value,
        "v16": Generation.V1_6.value,
        "plain": None,
        "untested": None,
    }
    assert "affinity_usable" not in {f.name for f in after._meta.get_fields()}

    back = _migrate(BEFORE).get_model("endpoints", "Endpoint")
    restored = {
        e.name: (e.affinity_generation, e.header_affinity, sorted(e.affinity_usable))
        for e in back.objects.exclude(affinity_detected_at=None)
    }
    assert restored == {
        name: (generation, header, sorted(usable))
        for name, (generation, header, usable) in OLD_ROWS.items()
    }
    assert back.objects.get(name="untested").affinity_usable is None
