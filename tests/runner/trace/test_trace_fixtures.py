"""The project's trace fixtures import with the properties the engine tests rely on
(tests/fixtures/README.md): a regenerated fixture that loses one fails here, not downstream."""

from __future__ import annotations

import json
from collections import Counter
from itertools import pairwise
from pathlib import Path

import pytest

from runner.trace import (
    BranchMode,
    TraceFormat,
    count_message_tokens,
    count_tokens,
    inspect_trace,
    instance_marker,
    load_trace,
    render_messages,
    synthesize_prompt,
)
from tests.fixtures import (
    CLAUDE_CODE_SUBAGENTS,
    DAG_FORK_FANOUT,
    DAG_SPAWN,
    FIXTURES,
)


def test_the_claude_code_fixture_has_three_spawn_subagents_declared_and_joined_as_recorded():
    trace = load_trace(CLAUDE_CODE_SUBAGENTS)
    stats = inspect_trace(trace)
    assert stats["format"] == "claude_code"
    assert (stats["trees"], stats["sessions"], stats["requests"]) == (1, 4, 61)
    assert (stats["spawn_children"], stats["fork_children"], stats["max_depth"]) == (3, 0, 1)
    tree = trace.trees[0]
    assert tree.timestamped and tree.block_size == 64
    children = [s for s in tree.sessions.values() if not s.is_root]
    assert all(s.mode is BranchMode.SPAWN and s.subagent_type == "Explore" for s in children)
    # Spawned at 120-170 s, after turn 1 (40 s): declared there; turn 2 (185 s) does not wait.
    root = tree.root
    declared = [(turn.index, b.children, b.join_turn) for turn in root.turns for b in turn.branches]
    assert declared == [(1, ("agent_001", "agent_002"), 3), (1, ("agent_003",), 4)]
    assert root.turns[2].t_s < min(s.turns[-1].t_s for s in children)
    first = tree.sessions["agent_001"].turns[0]
    assert first.t_s == pytest.approx(120.112)
    assert first.delay_s == pytest.approx(120.112 - (root.turns[1].t_s + root.turns[1].duration_s))


def test_the_claude_code_fixture_shares_prefixes_as_a_recorded_session_does():
    tree = load_trace(CLAUDE_CODE_SUBAGENTS).trees[0]
    main = tree.root.turns
    parent_blocks = {h for turn in main for h in turn.hash_ids}
    firsts = [s.turns[0].hash_ids for s in tree.sessions.values() if not s.is_root]
    # SPAWN: no block in common with the parent; siblings share their own 20-block prefix.
    assert all(not parent_blocks & set(ids) for ids in firsts)
    assert all(ids[:20] == firsts[0][:20] for ids in firsts)
    assert len({ids[20] for ids in firsts}) == 3
    # A growing conversation: each prompt holds the previous one but for its last block.
    for before, after in pairwise(main):
        assert after.hash_ids[: len(before.hash_ids) - 1] == before.hash_ids[:-1]
    assert max(b.t_s - a.t_s for a, b in pairwise(main)) >= 9000


def test_consecutive_prompts_of_the_fixture_share_their_text_prefix():
    trace = load_trace(CLAUDE_CODE_SUBAGENTS)
    tree = trace.trees[0]
    first, second = tree.root.turns[:2]
    texts = [
        synthesize_prompt(
            input_tokens=t.input_tokens,
            hash_ids=t.hash_ids,
            block_size=tree.block_size,
            scope=trace.meta["hash_scope"],
            request_key=f"{tree.root_id}:{t.index}",
            marker=instance_marker("lane-0/tree-0"),
        )
        for t in (first, second)
    ]
    assert [count_tokens(x) for x in texts] == [first.input_tokens, second.input_tokens]
    shared_words = (len(first.hash_ids) - 1) * tree.block_size
    assert texts[0].split()[:shared_words] == texts[1].split()[:shared_words]


def test_the_mooncake_fixture_has_coarse_stamps_and_derived_conversations():
    path = FIXTURES / "mooncake_arrivals.jsonl"
    trace = load_trace(path)
    stats = inspect_trace(trace)
    assert trace.format is TraceFormat.MOONCAKE and stats["warnings"] == 0
    assert stats["requests"] == 48 and stats["sessions"] == stats["trees"] == 11
    assert 90 <= stats["span_s"] < 95
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert max(Counter(r["timestamp"] for r in rows).values()) > 1


def test_the_azure_fixture_rows_become_single_turn_trees():
    trace = load_trace(FIXTURES / "azure_arrivals.csv")
    stats = inspect_trace(trace)
    assert trace.format is TraceFormat.AZURE_CSV
    assert stats["requests"] == stats["trees"] == stats["sessions"] == 40
    first, second = trace.trees[0].root.turns[0], trace.trees[1].root.turns[0]
    assert (first.t_s, first.input_tokens, first.output_tokens) == (0.0, 784, 377)
    # 09:12:07.0559854 - 09:12:03.1647254
    assert second.t_s == pytest.approx(3.89126, abs=1e-6)


@pytest.mark.parametrize(
    ("path", "counts"),
    [
        # (trees, sessions, requests, fork children, spawn children, max depth)
        (DAG_SPAWN, (1, 2, 2, 0, 1, 1)),
        (DAG_FORK_FANOUT, (1, 6, 7, 5, 0, 1)),
    ],
    ids=lambda v: v.name if isinstance(v, Path) else "",
)
def test_the_dag_fixtures_import_with_their_counts(path: Path, counts: tuple[int, ...]) -> None:
    trace = load_trace(path)
    stats = inspect_trace(trace)
    assert stats["format"] == "dag_jsonl" and stats["warnings"] == 0
    got = tuple(
        stats[k]
        for k in ("trees", "sessions", "requests", "fork_children", "spawn_children", "max_depth")
    )
    assert got == counts
    for tree in trace.trees:
        for session in tree.sessions.values():
            for turn in session.turns:
                messages = render_messages(tree, session.id, turn.index)
                assert count_message_tokens(messages) == turn.input_tokens
