"""The agent trees over time (issue 27 item 6): each session of a tree carries its requests
with their send and last-token times, both workers and the cached share, which the run page's
swim-lane timeline draws; a run's trees stored in the older shape are built again."""

from __future__ import annotations

from typing import Any

import pytest

from aiperf_web.reports.models import RunTrees
from aiperf_web.reports.selectors.trees import TREES_VERSION, run_trees, trees_build
from aiperf_web.runs.models import Run, RunRecord
from aiperf_web.runs.sink import records_insert
from tests.web.conftest import World


def _record(sid: str, turn: int, start: float, end: float, client: int, inference: int,
            *, parent: str | None = None, depth: int = 0) -> dict[str, Any]:  # fmt: skip
    return {
        "root_id": "t1:trace", "session_id": sid, "parent_id": parent, "depth": depth,
        "branch_mode": "spawn" if depth else "root", "turn_index": turn, "start_s": start,
        "end_s": end, "client_worker": client, "inference_worker": inference,
        "cached_tokens": 64 * turn, "prompt_tokens": 128, "error": None,
    }  # fmt: skip


RECORDS = [
    _record("t1:trace", 0, 0.0, 1.0, 0, 1),
    _record("t1:agent", 1, 2.5, 3.0, 2, 0, parent="t1:trace", depth=1),  # a bounce: 1 -> 2
    _record("t1:agent", 0, 1.2, 2.0, 1, 1, parent="t1:trace", depth=1),
    _record("t1:trace", 1, 3.1, 4.0, 0, 1),
]


def test_each_session_carries_its_requests_in_turn_order_with_both_workers() -> None:
    (tree,) = trees_build(RECORDS)
    agent = next(n for n in tree["nodes"] if n["id"] == "t1:agent")
    assert agent["requests"] == [
        [0, 1.2, 2.0, 1, 1, 0, 128, None],
        [1, 2.5, 3.0, 2, 0, 64, 128, None],
    ]
    assert agent["bounced"] and agent["client_workers"] == [1, 2]
    root = next(n for n in tree["nodes"] if n["id"] == "t1:trace")
    assert [r[1:3] for r in root["requests"]] == [[0.0, 1.0], [3.1, 4.0]]


@pytest.mark.django_db
def test_trees_stored_in_the_older_shape_are_built_again(world: World) -> None:
    run = Run.objects.get(pk=world.run.pk)
    RunRecord.objects.filter(run=run).delete()
    records_insert(run_pk=run.pk, first_seq=0, batch=RECORDS)  # type: ignore[arg-type]
    RunTrees.objects.update_or_create(run=run, defaults={"data": {"trees": [], "complete": True}})
    data = run_trees(run_obj=run)
    assert data["version"] == TREES_VERSION and data["trees"]
    (tree,) = data["trees"]
    assert {n["id"]: len(n["requests"]) for n in tree["nodes"]} == {"t1:trace": 2, "t1:agent": 2}
    assert RunTrees.objects.get(run=run).data["version"] == TREES_VERSION
