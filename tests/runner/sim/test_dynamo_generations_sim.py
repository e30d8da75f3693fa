"""The seeds' lineage-vs-conversation effect under each Dynamo generation the cluster models:
on a round-robin cluster (no KV index) lineage affinity reuses at least as much prefix cache
as conversation affinity and never closes early, with each generation's own contract."""

from __future__ import annotations

from typing import Any

import pytest

from runner.affinity.emitters import AffinityConfig, AffinityKind
from runner.cluster import ClusterConfig
from runner.replay.engine import EngineConfig
from runner.replay.scheduler import ReplayConfig
from runner.sim.simulator import SimConfig, simulate
from runner.trace import SyntheticConfig, generate_synthetic
from runner.trace.model import Tree

# Each generation with the affinity that works on it (docs/product.md §4.5):
#   bind  --affinity dynamo-nvext --affinity-actions bind
#   1.2   --affinity dynamo-nvext --affinity-actions open
#   1.6   --affinity dynamo-headers, the frontend with a header TTL
GENERATIONS: dict[str, tuple[ClusterConfig, dict[str, Any]]] = {
    "bind": (
        ClusterConfig(workers=8, dynamo_version="bind"),
        {"kind": AffinityKind.DYNAMO_NVEXT, "actions": "bind"},
    ),
    "1.2": (
        ClusterConfig(workers=8, dynamo_version="1.2"),
        {"kind": AffinityKind.DYNAMO_NVEXT, "actions": "open"},
    ),
    "1.6": (
        ClusterConfig(workers=8, dynamo_version="1.6", header_affinity_ttl_s=300),
        {"kind": AffinityKind.DYNAMO_HEADERS},
    ),
}


@pytest.fixture(scope="module")
def trees() -> tuple[Tree, ...]:
    return generate_synthetic(SyntheticConfig(trees=8, seed=3)).trees


def _run(trees: tuple[Tree, ...], cluster: ClusterConfig, **affinity: Any) -> Any:
    config = SimConfig(
        replay=ReplayConfig(concurrency=8, duration_s=600),
        engine=EngineConfig(client_workers=8, affinity=AffinityConfig(**affinity)),
        cluster=cluster,
    )
    return simulate(trees, config).summary


@pytest.mark.parametrize("version", list(GENERATIONS))
def test_lineage_reuses_at_least_as_much_prefix_cache_and_never_closes_early(
    trees: tuple[Tree, ...], version: str
) -> None:
    cluster, affinity = GENERATIONS[version]
    assert cluster.router == "round-robin"
    conversation = _run(trees, cluster, scope="conversation", **affinity)
    lineage = _run(trees, cluster, scope="lineage", **affinity)
    assert lineage["prefix_cache_hit_ratio"] >= conversation["prefix_cache_hit_ratio"]
    assert lineage["early_closes"] == 0
    assert conversation["errors"] == lineage["errors"] == 0
    assert lineage["requests"] > 1000


def test_dynamo_16_refuses_the_session_control_contract(trees: tuple[Tree, ...]) -> None:
    cluster, _ = GENERATIONS["1.6"]
    refused = _run(trees, cluster, kind=AffinityKind.DYNAMO_NVEXT, scope="lineage")
    assert refused["errors_by_category"].get("http_4xx", 0) == refused["requests"] > 0
