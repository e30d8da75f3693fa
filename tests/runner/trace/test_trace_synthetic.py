"""The synthetic agentic generator: deterministic by seed, shaped like a coding agent."""

from __future__ import annotations

import itertools
import statistics

import pytest
from pydantic import ValidationError

from runner.trace import BranchMode, SyntheticConfig, Trace, TraceFormat, generate_synthetic
from runner.trace.timing import with_nominal_times

SMALL = SyntheticConfig(trees=6, seed=11)


@pytest.fixture(scope="module")
def trace() -> Trace:
    return generate_synthetic(SMALL)


def test_same_seed_gives_the_same_trace(trace: Trace) -> None:
    assert generate_synthetic(SMALL).trees == trace.trees


def test_another_seed_gives_another_trace(trace: Trace) -> None:
    other = generate_synthetic(SMALL.model_copy(update={"seed": 12}))
    assert other.trees != trace.trees


def test_asking_for_more_trees_keeps_the_first_ones_shape(trace: Trace) -> None:
    more = generate_synthetic(SMALL.model_copy(update={"trees": 8}))
    shape = [[len(s.turns) for s in t.sessions.values()] for t in trace.trees]
    assert [[len(s.turns) for s in t.sessions.values()] for t in more.trees[:6]] == shape


def test_trace_is_synthetic_timestamped_and_well_formed(trace: Trace) -> None:
    assert trace.format is TraceFormat.SYNTHETIC and len(trace.trees) == 6
    for tree in trace.trees:
        assert tree.timestamped and tree.block_size == 64
        lo, hi = SMALL.main_turns
        assert lo <= len(tree.root.turns) <= hi
        for session in tree.sessions.values():
            assert session.depth <= SMALL.max_depth
            for turn in session.turns:
                assert 100 <= turn.output_tokens <= 1000
                assert len(turn.hash_ids) == turn.input_tokens // 64
                assert turn.duration_s > 0 and turn.delay_s >= 0


def test_subagents_come_in_parallel_groups_sharing_a_system_prefix(trace: Trace) -> None:
    groups = [
        (tree, b)
        for tree in trace.trees
        for s in tree.sessions.values()
        for t in s.turns
        for b in t.branches
        if b.mode is BranchMode.SPAWN
    ]
    assert groups
    for tree, branch in groups:
        assert 2 <= len(branch.children) <= 4
        firsts = [tree.sessions[c].turns[0] for c in branch.children]
        assert all(5 <= len(tree.sessions[c].turns) <= 25 for c in branch.children)
        assert all(tree.sessions[c].subagent_type == "Explore" for c in branch.children)
        # Siblings share at least the 9k-token prefix (140 blocks of 64).
        shared = min(firsts, key=lambda t: len(t.hash_ids)).hash_ids[:140]
        assert len(shared) == 140 and all(t.hash_ids[:140] == shared for t in firsts)


def test_spawn_child_shares_no_block_with_its_parent(trace: Trace) -> None:
    for tree in trace.trees:
        for session in tree.sessions.values():
            if session.mode is BranchMode.SPAWN and session.parent_id == tree.root_id:
                parent_blocks = set(tree.root.turns[0].hash_ids)
                assert not parent_blocks & set(session.turns[0].hash_ids)


def test_fork_child_starts_with_its_parent_context() -> None:
    forked = generate_synthetic(SyntheticConfig(trees=4, seed=3, fork_probability=0.5))
    seen = 0
    for tree in forked.trees:
        for turn, branch, child in (x for s in tree.sessions for x in tree.children_of(s)):
            if branch.mode is BranchMode.FORK:
                seen += 1
                first = tree.sessions[child].turns[0]
                assert first.hash_ids[: len(turn.hash_ids)] == turn.hash_ids
                assert first.input_tokens > turn.input_tokens + turn.output_tokens
    assert seen


def test_main_chain_reuses_most_blocks_turn_to_turn(trace: Trace) -> None:
    reuse = []
    for tree in trace.trees:
        turns = tree.root.turns
        for prev, cur in itertools.pairwise(turns):
            if cur.hash_ids[: len(prev.hash_ids)] == prev.hash_ids:  # not a compaction
                reuse.append(len(prev.hash_ids) / len(cur.hash_ids))
    assert 0.84 <= statistics.median(reuse) <= 0.99


def test_think_times_are_a_few_seconds(trace: Trace) -> None:
    gaps = [t.delay_s for tree in trace.trees for s in tree.sessions.values() for t in s.turns[1:]]
    assert 2.0 <= statistics.fmean(gaps) <= 5.0


def test_default_config_issues_over_100k_requests_per_hour_at_256_lanes() -> None:
    # Lanes replay trees back to back; with 2 s requests and strict joins (the slower case),
    # requests per lane-second times 256 lanes times 3600 s.
    trace = generate_synthetic(SyntheticConfig(trees=8))
    requests = sum(t.requests for t in trace.trees)
    busy_s = sum(with_nominal_times(t, duration_s=lambda _: 2.0).span_s for t in trace.trees)
    assert requests / busy_s * 256 * 3600 >= 100_000


def test_depth_zero_gives_lone_roots() -> None:
    flat = generate_synthetic(SyntheticConfig(trees=3, max_depth=0))
    assert all(len(t.sessions) == 1 for t in flat.trees)


@pytest.mark.parametrize(("strict", "expect_join"), [(1.0, True), (0.0, False)])
def test_join_strictness_decides_whether_spawns_gate_the_next_turn(
    strict: float, expect_join: bool
) -> None:
    cfg = SyntheticConfig(trees=4, spawn_probability=0.3, join_strict_probability=strict)
    for tree in generate_synthetic(cfg).trees:
        for session in tree.sessions.values():
            last = len(session.turns) - 1
            for turn in session.turns:
                for b in turn.branches:
                    if b.mode is BranchMode.SPAWN and turn.index < last:
                        assert (b.join_turn == turn.index + 1) is expect_join


def test_config_rejects_inverted_ranges_and_unknown_knobs() -> None:
    with pytest.raises(ValidationError, match="main_turns"):
        SyntheticConfig(main_turns=(30, 10))
    with pytest.raises(ValidationError):
        SyntheticConfig(colour="red")  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        SyntheticConfig(spawn_probability=1.5)


def test_common_prefix_is_shared_by_every_root() -> None:
    trees = generate_synthetic(SyntheticConfig(trees=3, common_prefix_tokens=12_800)).trees
    heads = {t.root.turns[0].hash_ids[:200] for t in trees}
    assert len(heads) == 1
    assert len({t.root.turns[0].hash_ids[:201] for t in trees}) == 3
