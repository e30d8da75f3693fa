"""The public sample traces in ../shared/traces import with the counts we checked by hand."""

from __future__ import annotations

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


def test_claude_code_subagents_become_spawn_children(shared_traces: Path) -> None:
    trace = load_trace(shared_traces / "weka_claude_code" / "trace_0282.json")
    stats = inspect_trace(trace)
    assert stats["format"] == "claude_code"
    assert (stats["trees"], stats["sessions"], stats["requests"]) == (1, 4, 103)
    assert (stats["spawn_children"], stats["fork_children"], stats["max_depth"]) == (3, 0, 1)
    tree = trace.trees[0]
    assert tree.timestamped and tree.block_size == 64
    root = tree.root
    assert len(root.turns) == 49
    children = {s.id: s for s in tree.sessions.values() if not s.is_root}
    assert {len(s.turns) for s in children.values()} == {14, 22, 18}
    assert all(
        s.mode is BranchMode.SPAWN and s.subagent_type == "Explore" for s in children.values()
    )
    # All three start after the request at t=55 (the last one at or before t=272..350).
    declared = [(turn.index, b.children, b.join_turn) for turn in root.turns for b in turn.branches]
    assert declared == [(1, ("agent_001", "agent_002"), 3), (1, ("agent_003",), 4)]


def test_claude_code_child_delay_is_measured_from_the_declaring_request_end(
    shared_traces: Path,
) -> None:
    tree = load_trace(shared_traces / "weka_claude_code" / "trace_0282.json").trees[0]
    first = tree.sessions["agent_001"].turns[0]
    # Spawned at 272.112 s; the declaring request started at 55 s and took 23.17 s.
    assert first.t_s == pytest.approx(272.112)
    assert first.delay_s == pytest.approx(272.112 - (55 + 23.17))
    main = tree.root.turns
    assert main[1].delay_s == pytest.approx(55 - 17.59)
    assert all(t.delay_s >= 0 for s in tree.sessions.values() for t in s.turns)


def test_claude_code_session_without_subagents_is_one_chain(shared_traces: Path) -> None:
    stats = inspect_trace(load_trace(shared_traces / "weka_claude_code" / "trace_0022.json"))
    assert (stats["trees"], stats["sessions"], stats["requests"]) == (1, 1, 7)


def test_mooncake_conversation_head_matches_the_reference_statistics(shared_traces: Path) -> None:
    stats = inspect_trace(
        load_trace(shared_traces / "mooncake" / "conversation_trace.head2000.jsonl")
    )
    assert stats["format"] == "mooncake"
    assert stats["requests"] == 2000
    assert stats["input_tokens"]["mean"] == pytest.approx(13_721, abs=1)
    assert stats["input_tokens"]["median"] == 7965
    assert stats["ideal_prefix_hit_ratio"] == pytest.approx(0.289, abs=0.001)
    # Derived sessions: fewer trees than requests, each tree one session.
    assert stats["sessions"] == stats["trees"] < 2000
    assert 669 <= stats["span_s"] < 700


def test_mooncake_synthetic_trace_matches_the_reference_statistics(shared_traces: Path) -> None:
    stats = inspect_trace(load_trace(shared_traces / "mooncake" / "synthetic_trace.jsonl"))
    assert stats["requests"] == 3993
    assert stats["input_tokens"]["median"] == 11_587
    assert stats["ideal_prefix_hit_ratio"] == pytest.approx(0.640, abs=0.001)


def test_azure_rows_become_single_turn_trees(shared_traces: Path) -> None:
    trace = load_trace(shared_traces / "azure" / "AzureLLMInferenceTrace_conv.csv")
    stats = inspect_trace(trace)
    assert stats["format"] == "azure_csv"
    assert stats["requests"] == stats["trees"] == stats["sessions"] == 19_366
    first, second = trace.trees[0].root.turns[0], trace.trees[1].root.turns[0]
    assert first.t_s == 0.0 and first.input_tokens == 374 and first.output_tokens == 44
    # 18:15:50.9951690 - 18:15:46.6805900
    assert second.t_s == pytest.approx(4.314579, abs=1e-6)
    assert second.delay_s == second.t_s  # every tree starts at the trace start


# file → (trees, sessions, requests, fork children, spawn children, max depth), counted by hand
DAG_SAMPLES = {
    "background_fork.dag.jsonl": (1, 2, 5, 1, 0, 1),
    "bg_fork_fanout.dag.jsonl": (1, 6, 7, 5, 0, 1),
    "bg_fork_nested.dag.jsonl": (1, 3, 6, 2, 0, 2),
    "multi_root_single_turn.dag.jsonl": (2, 6, 6, 4, 0, 1),
    "small.dag.jsonl": (1, 3, 5, 2, 0, 1),
    "spawn_minimal.dag.jsonl": (1, 2, 2, 0, 1, 1),
}


@pytest.mark.parametrize("name", sorted(DAG_SAMPLES))
def test_every_aiperf_dag_sample_imports_with_its_counts(shared_traces: Path, name: str) -> None:
    trace = load_trace(shared_traces / "aiperf_dag" / name)
    stats = inspect_trace(trace)
    assert stats["format"] == "dag_jsonl"
    got = tuple(
        stats[k]
        for k in ("trees", "sessions", "requests", "fork_children", "spawn_children", "max_depth")
    )
    assert got == DAG_SAMPLES[name]
    # The token count of every rendered history is the turn's input_tokens.
    for tree in trace.trees:
        for session in tree.sessions.values():
            for turn in session.turns:
                messages = render_messages(tree, session.id, turn.index)
                assert count_message_tokens(messages) == turn.input_tokens


def test_aiperf_templates_import_as_mooncake(shared_traces: Path) -> None:
    precise = load_trace(shared_traces / "aiperf_dag" / "aiperf_template_precise_schedule.jsonl")
    assert precise.format is TraceFormat.MOONCAKE
    assert inspect_trace(precise)["requests"] == 8
    production = load_trace(shared_traces / "aiperf_dag" / "aiperf_template_production_trace.jsonl")
    stats = inspect_trace(production)
    # Rows 3 ([1,2,3]: cut to [1,2], 1024 tokens hold two blocks) and 6 ([1,2,4]) are one
    # conversation; every other row stands alone.
    assert (stats["requests"], stats["sessions"]) == (10, 9)
    assert stats["warnings"] == 1


def test_consecutive_recorded_prompts_share_their_text_prefix(shared_traces: Path) -> None:
    trace = load_trace(shared_traces / "weka_claude_code" / "trace_0022.json")
    tree = trace.trees[0]
    scope = trace.meta["hash_scope"]
    marker = instance_marker("lane-0/tree-0")
    first, second = tree.root.turns[:2]
    texts = [
        synthesize_prompt(
            input_tokens=t.input_tokens,
            hash_ids=t.hash_ids,
            block_size=tree.block_size,
            scope=scope,
            request_key=f"{tree.root_id}:{t.index}",
            marker=marker,
        )
        for t in (first, second)
    ]
    assert [count_tokens(x) for x in texts] == [first.input_tokens, second.input_tokens]
    shared_words = len(first.hash_ids) * tree.block_size
    assert texts[0].split()[:shared_words] == texts[1].split()[:shared_words]
