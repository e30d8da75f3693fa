"""A sweep through the service on the real Dynamo 1.6.1 (frontend, KV router, 2 CPU mocker
workers, header affinity TTL 300 s), issue 20's 'done when': concurrency 1, 2, 4, 8, 16 with
arms lineage and conversation (dynamo-headers) on the Claude Code fixture with SPAWN children.
Lineage's child first-turn prefix hit ratio is at or above conversation's at every point; a
run launched on the same endpoint while the sweep runs waits for the endpoint lease
(runs/line.py) and overlaps no point."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiperf_web.endpoints.services import endpoint_create, endpoint_test_connection
from aiperf_web.runs.models import Run
from aiperf_web.scenarios.services import scenario_create, trace_upload
from aiperf_web.sweeps.models import Sweep
from aiperf_web.sweeps.selectors import sweep_report
from tests.dynamo import cluster
from tests.fixtures import CLAUDE_CODE_SUBAGENTS
from tests.infra import unavailable
from tests.web.conftest import World

# Ten live points of 20 s with the drain between them, and the run that waits: past the
# suite's 300 s per test.
# Once, on the production shape: what it adds is the real Dynamo's answer (the sweep driver, the
# endpoint lease and the worker in each shape are the mock sweeps' and leases' tests, which run
# in both); on the embedded default it took another 4 minutes to say the same.
pytestmark = [
    pytest.mark.dynamo,
    pytest.mark.slow,
    pytest.mark.timeout(1200),
    pytest.mark.shape_independent,
]

# The fixture's span; every lane starts 100-110 s in, before its three SPAWN subagents (spawned
# at 120-170 s, tests/fixtures/README.md), so each point measures children's first turns.
_SPAN_S = 10395.28
_LOADS = [1, 2, 4, 8, 16]


@pytest.fixture(scope="module")
def dynamo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.DynamoCluster]:
    """Its own cluster (tests/dynamo/cluster.py): 2 mockers, KV router, TTL 300."""
    missing = cluster.not_installed()
    if missing is not None:
        unavailable(f"real Dynamo not installed ({missing}): run scripts/dynamo-cpu.sh install")
    started = cluster.start(Path(tmp_path_factory.mktemp("dynamo-run")))
    try:
        yield started
    finally:
        started.stop()


def _interval(run: Run) -> tuple[Any, Any]:
    assert run.started_at is not None and run.finished_at is not None, run.status
    return run.started_at, run.finished_at


def test_lineage_vs_conversation_sweep_on_the_real_dynamo(
    live_world: World, wait_for: Any, dynamo: cluster.DynamoCluster
) -> None:
    world = live_world
    endpoint = endpoint_create(
        actor=world.owner,
        team=world.team,
        name="real dynamo",
        base_url=dynamo.base_url,
        model=dynamo.model,
        server_kind="dynamo",
    )
    endpoint_test_connection(actor=world.owner, endpoint=endpoint)
    endpoint.refresh_from_db()
    assert "dynamo-headers" in endpoint.affinity_choices, endpoint.affinity_headline
    trace = trace_upload(
        actor=world.owner,
        team=world.team,
        filename=CLAUDE_CODE_SUBAGENTS.name,
        chunks=[CLAUDE_CODE_SUBAGENTS.read_bytes()],
        name="claude-code-subagents",
    )
    scenario = scenario_create(
        actor=world.owner,
        team=world.team,
        name="subagents on dynamo",
        # Few requests per point: one tree per lane from before its subagents run; 20 s (6 s cut
        # more than a fifth of conversation's requests at c=16, an invalid point).
        spec={"duration_s": 20, "speedup": 20000, "start_window": [100 / _SPAN_S, 110 / _SPAN_S]},
        trace_ids=[trace.uuid],
    )
    headers = {"affinity": "dynamo-headers"}
    response = world.api("teammate").post(
        "/api/v1/sweeps",
        {
            "scenario": str(scenario.uuid),
            "endpoint": str(endpoint.uuid),
            "sweep": {
                "concurrency": _LOADS,
                "arms": [
                    {"name": "lineage", "overrides": {**headers, "scope": "lineage"}},
                    {"name": "conversation", "overrides": {**headers, "scope": "conversation"}},
                ],
                "cooldown_s": 1,
            },
        },
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    sweep_id = response.json()["id"]

    # Meanwhile, once the third point runs, a plain run on the same endpoint: it waits.
    def third_running() -> bool:
        return Run.objects.filter(
            sweep_point__sweep__uuid=sweep_id, sweep_point__seq=2, status="running"
        ).exists()

    wait_for(third_running, timeout_s=300, every_s=0.3)
    other = world.api("teammate").post(
        "/api/v1/runs",
        {"scenario": str(scenario.uuid), "endpoint": str(endpoint.uuid)},
        content_type="application/json",
    )
    assert other.status_code == 201, other.content
    other_id = other.json()["id"]
    # The wait assertion relies on the endpoint lease of runs/line.py (helper L's, a310c5b).
    waiting = world.api("teammate").get(f"/api/v1/runs/{other_id}").json()
    assert waiting["status"] == "queued", waiting["status"]
    assert waiting["waiting"]["reason"] == "endpoint", waiting["waiting"]

    def ended() -> Sweep | None:
        sweep = Sweep.objects.get(uuid=sweep_id)
        return sweep if sweep.status in ("succeeded", "failed", "cancelled") else None

    sweep = wait_for(ended, timeout_s=900, every_s=1.0)
    assert sweep.status == "succeeded", (sweep.reason, sweep.verdict_message)
    report = sweep_report(sweep)
    assert report.runs == 10
    child = {
        arm: [row.mean("child_first_turn_hit_ratio") for row in report.aggregates if row.arm == arm]
        for arm in ("lineage", "conversation")
    }
    print(f"real Dynamo, child first-turn hit ratio per load {_LOADS}: {child}")
    assert all(p.valid for p in report.points), sweep.verdict_message
    for load, lineage, conversation in zip(
        _LOADS, child["lineage"], child["conversation"], strict=True
    ):
        assert lineage is not None and conversation is not None, (load, child)
        # The same tolerance as tests/dynamo/test_affinity_real.py: a block's worth of noise.
        assert lineage >= conversation - 0.001, (load, child)

    # No point overlapped another run on the endpoint: the plain run came between points.
    other_run = Run.objects.get(uuid=other_id)
    wait_for(lambda: Run.objects.get(uuid=other_id).finished_at is not None, timeout_s=300)
    other_run.refresh_from_db()
    points = [p.run for p in sweep.points.select_related("run").order_by("seq")]
    intervals = [_interval(run) for run in points if run is not None]
    start, end = _interval(other_run)
    assert all(end <= s or start >= e for s, e in intervals), (start, end, intervals)
    for (_, e1), (s2, _) in itertools.pairwise(intervals):
        assert s2 >= e1
    assert other_run.overlaps == [] and all(run.overlaps == [] for run in points if run)
