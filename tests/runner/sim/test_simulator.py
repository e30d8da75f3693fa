"""The engine against the simulated cluster: the seeds' tables reproduce (docs/product.md §1,
§4), on the project's Claude Code fixture and, when it is there, on the public session."""

from __future__ import annotations

import pytest

from runner.affinity.emitters import AffinityConfig, AffinityKind
from runner.cluster import ClusterConfig
from runner.replay.engine import EngineConfig
from runner.replay.scheduler import ReplayConfig
from runner.routing.router import Policy
from runner.sim.simulator import SimConfig, simulate
from runner.trace import SyntheticConfig, generate_synthetic, load_trace
from runner.trace.model import Branch, BranchMode, Session
from tests.runner.factories import tree, turns, with_branches

SEED_RUN = ReplayConfig(concurrency=256, duration_s=3600, start_window=(0.0, 1.0), joins="recorded")


NO_AFFINITY = AffinityConfig()
ROUND_ROBIN_8 = ClusterConfig(workers=8, router="round-robin")


def run_trace(
    trace, *, policy=Policy.SPAWN_PIN, affinity=NO_AFFINITY, replay=SEED_RUN, cluster=ROUND_ROBIN_8
):
    config = SimConfig(
        replay=replay,
        engine=EngineConfig(policy=policy, client_workers=8, affinity=affinity),
        cluster=cluster,
    )
    return simulate(load_trace(trace).trees, config).summary


@pytest.fixture(scope="module")
def legacy_and_fixed(seed_trace):
    return (
        run_trace(seed_trace, policy=Policy.LEGACY),
        run_trace(seed_trace, policy=Policy.SPAWN_PIN),
    )


def test_legacy_routing_bounces_subagents_and_leaks_session_copies(legacy_and_fixed):
    legacy, _ = legacy_and_fixed
    assert legacy["sessions_multi_worker"] > 0
    assert legacy["worker_switches"] > 0
    assert legacy["orphaned_session_copies"] > 0


def test_spawn_pin_keeps_every_subagent_on_one_worker(legacy_and_fixed):
    _, fixed = legacy_and_fixed
    assert fixed["sessions_multi_worker"] == 0
    assert fixed["worker_switches"] == 0
    assert fixed["orphaned_session_copies"] == 0
    assert fixed["peak_orphaned_session_copies"] == 0


def test_both_policies_replay_the_same_requests(legacy_and_fixed):
    legacy, fixed = legacy_and_fixed
    assert legacy["requests"] == fixed["requests"] > 1000
    assert legacy["sessions"] == fixed["sessions"]


@pytest.fixture(scope="module")
def conversation_and_lineage(seed_trace):
    def nvext(scope):
        return AffinityConfig(kind=AffinityKind.DYNAMO_NVEXT, scope=scope)

    return (
        run_trace(seed_trace, affinity=nvext("conversation")),
        run_trace(seed_trace, affinity=nvext("lineage")),
    )


def test_lineage_affinity_reuses_more_prefix_cache_than_conversation(conversation_and_lineage):
    conversation, lineage = conversation_and_lineage
    assert lineage["prefix_cache_hit_ratio"] > conversation["prefix_cache_hit_ratio"]


def test_lineage_never_closes_early_and_closes_at_most_once_per_drained_tree(
    conversation_and_lineage,
):
    _, lineage = conversation_and_lineage
    assert lineage["early_closes"] == 0
    assert 0 < lineage["affinity_closes"] <= lineage["trees_completed"]
    assert lineage["errors"] == 0


def test_root_final_closes_tear_down_the_tree_while_subagents_still_run():
    # The root's final turn comes while its subagent has 9 turns to go (recorded joins).
    root_turns = turns(2)
    root_turns[0] = with_branches(root_turns[0], Branch(BranchMode.SPAWN, ("sub",)))
    agent = tree(
        Session("root", tuple(root_turns)),
        Session("sub", tuple(turns(10)), parent_id="root", mode=BranchMode.SPAWN, depth=1),
    )
    config = SimConfig(
        replay=ReplayConfig(concurrency=4, max_trees=8),
        engine=EngineConfig(
            affinity=AffinityConfig(
                kind=AffinityKind.DYNAMO_NVEXT, scope="lineage", close_on="root-final"
            )
        ),
    )
    hazard = simulate([agent], config).summary
    assert hazard["early_closes"] == hazard["trees_completed"] == 8
    config = SimConfig(
        replay=config.replay,
        engine=EngineConfig(
            affinity=AffinityConfig(kind=AffinityKind.DYNAMO_NVEXT, scope="lineage")
        ),
    )
    safe = simulate([agent], config).summary
    assert safe["early_closes"] == 0 and safe["affinity_closes"] == 8


def test_dynamo_12_rejects_bind_and_the_open_contract_works(seed_trace):
    replay = ReplayConfig(concurrency=8, duration_s=600)
    old = ClusterConfig(workers=4, dynamo_version="1.2")
    binds = run_trace(
        seed_trace,
        replay=replay,
        cluster=old,
        affinity=AffinityConfig(kind=AffinityKind.DYNAMO_NVEXT),
    )
    opens = run_trace(
        seed_trace,
        replay=replay,
        cluster=old,
        affinity=AffinityConfig(kind=AffinityKind.DYNAMO_NVEXT, actions="open"),
    )
    assert binds["errors_by_category"].get("http_4xx", 0) > 0
    assert opens["errors"] == 0


def test_a_simulation_is_deterministic_for_a_seed(seed_trace):
    replay = ReplayConfig(concurrency=16, duration_s=900, start_window=(0.0, 1.0), seed=5)
    a = run_trace(seed_trace, replay=replay)
    b = run_trace(seed_trace, replay=replay)
    assert a == b


def test_engine_memory_stays_bounded_under_spawn_pin():
    trees = generate_synthetic(SyntheticConfig(trees=8)).trees
    config = SimConfig(
        replay=ReplayConfig(concurrency=16, duration_s=7200),
        cluster=ClusterConfig(workers=16),
    )
    result = simulate(trees, config)
    engine = result.engine
    assert result.summary["requests"] > 5000
    assert result.summary["trees_completed"] > 16
    # Only live work is tracked: bounded by the lanes, not by the requests replayed.
    live_sessions_bound = 16 * 40
    assert engine.router.key_count <= live_sessions_bound
    assert engine.caches.tracked_sessions <= live_sessions_bound
    assert len(engine.scheduler._runs) <= 16
