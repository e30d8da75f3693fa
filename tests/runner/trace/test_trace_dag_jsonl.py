"""aiperf dag_jsonl: forks, spawns, joins, token accounting over the accumulated history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.errors import TraceError
from runner.trace import BranchMode, TraceFormat, count_message_tokens, load_trace, render_messages
from tests.runner.trace.helpers import assert_located, write_jsonl


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def turn(text: str, **extra: Any) -> dict[str, Any]:
    return {"messages": [user(text)], "max_tokens": 5} | extra


def words(n: int, stem: str = "w") -> str:
    return " ".join(f"{stem}{i}" for i in range(n))


def load(tmp_path: Path, rows: list[dict[str, Any]]) -> Any:
    return load_trace(write_jsonl(tmp_path / "t.dag.jsonl", rows))


def error(tmp_path: Path, rows: list[dict[str, Any]]) -> tuple[Path, TraceError]:
    path = write_jsonl(tmp_path / "bad.dag.jsonl", rows)
    with pytest.raises(TraceError) as info:
        load_trace(path)
    return path, info.value


def test_input_tokens_count_the_whole_history_with_stand_in_replies(tmp_path: Path) -> None:
    trace = load(tmp_path, [{"session_id": "r", "turns": [turn("a b c"), turn("d e")]}])
    assert trace.format is TraceFormat.DAG_JSONL
    first, second = trace.trees[0].root.turns
    assert (first.input_tokens, first.output_tokens) == (3, 5)
    assert second.input_tokens == 3 + 5 + 2  # earlier messages + reply of max_tokens + new


def test_fork_child_inherits_the_parent_history_and_its_prefix_blocks(tmp_path: Path) -> None:
    rows = [
        {"session_id": "p", "turns": [turn(words(150), forks=["c"])]},
        {"session_id": "c", "turns": [turn(words(100, "x"))]},
    ]
    tree = load(tmp_path, rows).trees[0]
    parent = tree.root.turns[0]
    child = tree.sessions["c"]
    assert child.mode is BranchMode.FORK and child.parent_id == "p"
    assert child.turns[0].input_tokens == 150 + 5 + 100
    # 150 words fill two 64-word blocks: the child starts with the same two.
    assert len(parent.hash_ids) == 2
    assert child.turns[0].hash_ids[:2] == parent.hash_ids
    assert len(child.turns[0].hash_ids) == 255 // 64


def test_spawn_child_starts_from_an_empty_context(tmp_path: Path) -> None:
    rows = [
        {"session_id": "p", "turns": [turn(words(200), spawns=["s"]), turn("go")]},
        {"session_id": "s", "turns": [turn(words(200))]},
    ]
    tree = load(tmp_path, rows).trees[0]
    spawned = tree.sessions["s"].turns[0]
    assert spawned.input_tokens == 200
    # Same words, but no shared history: the same content hashes to the same blocks.
    assert spawned.hash_ids == tree.root.turns[0].hash_ids


def test_bare_spawn_joins_on_the_next_turn(tmp_path: Path) -> None:
    rows = [
        {"session_id": "p", "turns": [turn("a", spawns=["s"]), turn("b"), turn("c")]},
        {"session_id": "s", "turns": [turn("x")]},
    ]
    (branch,) = load(tmp_path, rows).trees[0].root.turns[0].branches
    assert (branch.mode, branch.join_turn) == (BranchMode.SPAWN, 1)


def test_join_at_lets_the_parent_run_until_that_turn(tmp_path: Path) -> None:
    rows = [
        {
            "session_id": "p",
            "turns": [
                turn("a", spawns=[{"children": ["s", "t"], "join_at": 2}]),
                turn("b"),
                turn("c"),
            ],
        },
        {"session_id": "s", "turns": [turn("x")]},
        {"session_id": "t", "turns": [turn("y")]},
    ]
    (branch,) = load(tmp_path, rows).trees[0].root.turns[0].branches
    assert branch.children == ("s", "t") and branch.join_turn == 2


def test_spawn_on_the_final_turn_has_no_join(tmp_path: Path) -> None:
    rows = [
        {"session_id": "p", "turns": [turn("a", spawns=["s"])]},
        {"session_id": "s", "turns": [turn("x")]},
    ]
    (branch,) = load(tmp_path, rows).trees[0].root.turns[0].branches
    assert branch.join_turn is None


def test_background_fork_may_sit_on_any_turn(tmp_path: Path) -> None:
    rows = [
        {
            "session_id": "p",
            "turns": [turn("a", forks=[{"child": "c", "background": True}]), turn("b")],
        },
        {"session_id": "c", "turns": [turn("x")]},
    ]
    (branch,) = load(tmp_path, rows).trees[0].root.turns[0].branches
    assert branch.mode is BranchMode.FORK and branch.join_turn is None


def test_delay_is_read_in_milliseconds_and_times_are_nominal(tmp_path: Path) -> None:
    rows = [{"session_id": "r", "turns": [turn("a"), turn("b", delay=1500)]}]
    tree = load(tmp_path, rows).trees[0]
    first, second = tree.root.turns
    assert second.delay_s == 1.5
    assert not tree.timestamped
    assert first.duration_s > 0
    assert second.t_s == pytest.approx(first.t_s + first.duration_s + 1.5)


def test_strict_join_is_honoured_by_the_nominal_timeline(tmp_path: Path) -> None:
    rows = [
        {"session_id": "p", "turns": [turn("a", spawns=["s"]), turn("b")]},
        {"session_id": "s", "turns": [turn("x"), turn("y", delay=60_000)]},
    ]
    tree = load(tmp_path, rows).trees[0]
    child_end = max(t.t_s + t.duration_s for t in tree.sessions["s"].turns)
    assert tree.root.turns[1].t_s >= child_end


def test_rendered_messages_hold_the_fork_parent_history(tmp_path: Path) -> None:
    rows = [
        {
            "session_id": "p",
            "turns": [
                {
                    "messages": [{"role": "system", "content": "be brief"}, user("plan")],
                    "max_tokens": 3,
                },
                turn("go on", forks=["c"]),
            ],
        },
        {"session_id": "c", "turns": [turn("side"), turn("more")]},
    ]
    tree = load(tmp_path, rows).trees[0]
    messages = render_messages(tree, "c", 1)
    roles = [m["role"] for m in messages]
    assert roles == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert messages[-1]["content"] == "more"
    assert count_message_tokens(messages) == tree.sessions["c"].turns[1].input_tokens


def test_tools_and_extra_become_extra_body(tmp_path: Path) -> None:
    rows = [
        {"session_id": "r", "turns": [turn("a", tools=[{"type": "function"}], extra={"seed": 1})]}
    ]
    first = load(tmp_path, rows).trees[0].root.turns[0]
    assert first.extra_body == {"tools": [{"type": "function"}], "seed": 1}


def test_bare_fork_before_the_final_turn_is_rejected(tmp_path: Path) -> None:
    path, exc = error(
        tmp_path,
        [
            {"session_id": "p", "turns": [turn("a", forks=["c"]), turn("b")]},
            {"session_id": "c", "turns": [turn("x")]},
        ],
    )
    assert_located(exc, file=path, line=1, problem="is not the final turn")
    assert exc.path == "turns[0].forks[0]"


def test_unknown_child_is_rejected_at_its_reference(tmp_path: Path) -> None:
    path, exc = error(tmp_path, [{"session_id": "p", "turns": [turn("a", spawns=["ghost"])]}])
    assert_located(exc, file=path, line=1, problem="unknown child session 'ghost'")
    assert exc.path == "turns[0].spawns[0].children[0]"


def test_cycle_is_rejected(tmp_path: Path) -> None:
    path, exc = error(
        tmp_path,
        [
            {"session_id": "root", "turns": [turn("r")]},
            {"session_id": "a", "turns": [turn("a", spawns=["b"])]},
            {"session_id": "b", "turns": [turn("b", spawns=["a"])]},
        ],
    )
    assert_located(exc, file=path, line=None, problem="cycle")
    assert exc.line in (2, 3)


def test_session_forked_by_two_parents_is_rejected(tmp_path: Path) -> None:
    path, exc = error(
        tmp_path,
        [
            {"session_id": "p", "turns": [turn("a", forks=["c"])]},
            {"session_id": "q", "turns": [turn("b", forks=["c"])]},
            {"session_id": "c", "turns": [turn("x")]},
        ],
    )
    assert_located(exc, file=path, line=2, problem="FORK target of two parents")


def test_duplicate_session_ids_are_rejected(tmp_path: Path) -> None:
    path, exc = error(
        tmp_path,
        [{"session_id": "p", "turns": [turn("a")]}, {"session_id": "p", "turns": [turn("b")]}],
    )
    assert_located(exc, file=path, line=2, problem="duplicate session id 'p'")


def test_empty_turns_are_rejected(tmp_path: Path) -> None:
    path, exc = error(tmp_path, [{"session_id": "p", "turns": []}])
    assert_located(exc, file=path, line=1, problem="at least 1 item")
    assert exc.path == "turns"


def test_negative_delay_is_rejected(tmp_path: Path) -> None:
    path, exc = error(tmp_path, [{"session_id": "p", "turns": [turn("a", delay=-5)]}])
    assert_located(exc, file=path, line=1, problem="greater than or equal to 0")
    assert exc.path == "turns[0].delay"


def test_boolean_max_tokens_is_a_wrong_type(tmp_path: Path) -> None:
    path, exc = error(tmp_path, [{"session_id": "p", "turns": [turn("a", max_tokens=True)]}])
    assert_located(exc, file=path, line=1, problem="valid integer")
    assert exc.path == "turns[0].max_tokens"


def test_unknown_key_is_named(tmp_path: Path) -> None:
    path, exc = error(tmp_path, [{"session_id": "p", "turns": [turn("a", colour="red")]}])
    assert_located(exc, file=path, line=1, problem="unknown key 'colour'")
    assert exc.path == "turns[0]"


def test_system_message_outside_a_fresh_context_is_rejected(tmp_path: Path) -> None:
    path, exc = error(
        tmp_path,
        [
            {
                "session_id": "p",
                "turns": [turn("a"), {"messages": [{"role": "system", "content": "x"}]}],
            }
        ],
    )
    assert_located(exc, file=path, line=1, problem="system message")
    assert exc.path == "turns[1].messages[0]"


def test_orchestrator_conversations_are_refused_by_name(tmp_path: Path) -> None:
    path, exc = error(tmp_path, [{"session_id": "o", "orchestrator": True, "turns": []}])
    assert_located(exc, file=path, line=1, problem="orchestrator conversations are not supported")


def test_truncated_last_line_is_reported_as_such(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "cut.dag.jsonl", [{"session_id": "p", "turns": [turn("a")]}])
    path.write_text(path.read_text() + '{"session_id": "q", "turns": [{"messages": [')
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert_located(info.value, file=path, line=2, problem="truncated")


def test_pre_session_spawns_start_when_turn_0_is_issued_without_a_warning(tmp_path: Path) -> None:
    trace = load(
        tmp_path,
        [
            {"session_id": "p", "pre_session_spawns": ["h"], "turns": [turn("a"), turn("b")]},
            {"session_id": "h", "turns": [turn("c", delay=50)]},
        ],
    )
    (tree,) = trace.trees
    (branch,) = tree.sessions["p"].turns[0].branches
    assert (branch.mode, branch.children, branch.join_turn, branch.on_issue) == (
        BranchMode.SPAWN,
        ("h",),
        None,
        True,
    )
    assert "warnings" not in trace.meta
    # Nominally the helper starts its 0.05 s delay after turn 0 starts, not after it ends.
    assert tree.sessions["h"].turns[0].t_s == pytest.approx(tree.sessions["p"].turns[0].t_s + 0.05)
    assert tree.sessions["h"].turns[0].t_s < tree.sessions["p"].turns[0].duration_s


def test_a_fork_child_among_thousands_renders_its_parents_history(tmp_path: Path) -> None:
    children = [f"f{i}" for i in range(3000)]
    rows = [{"session_id": "p", "turns": [turn("a", forks=children)]}] + [
        {"session_id": c, "turns": [turn(c)]} for c in children
    ]
    (tree,) = load(tmp_path, rows).trees
    last = tree.sessions["f2999"]

    assert last.declaring_turn == 0
    messages = render_messages(tree, "f2999", 0)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert count_message_tokens(messages) == last.turns[0].input_tokens


def test_a_reply_too_long_for_any_context_is_refused_before_it_is_built(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "t.dag.jsonl",
        [{"session_id": "p", "turns": [turn("a", max_tokens=10_000_000), turn("b")]}],
    )
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert_located(info.value, file=path, line=1, problem="over the 10,000,000 limit")
    assert info.value.path == "turns[1]"
