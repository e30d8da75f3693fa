"""What a live request carries: literal-message prompts are isolated per tree instance just as
synthesized ones are, so live lanes share cache exactly where simulated ones do."""

from __future__ import annotations

from typing import Any

from runner.affinity.emitters import Action, AffinityDecision
from runner.credit import Credit
from runner.replay.engine import Dispatch
from runner.trace import count_message_tokens
from runner.trace.model import Branch, BranchMode, Session, Trace, TraceFormat, Tree, Turn
from runner.wallclock.prompts import RequestBuilder

SYSTEM = {"role": "system", "content": "You are a careful coding agent"}


def literal_tree(*first: dict[str, Any]) -> Tree:
    root_turn = Turn(
        index=0,
        input_tokens=9,
        output_tokens=4,
        messages=first or (SYSTEM, {"role": "user", "content": "fix the failing test"}),
        branches=(Branch(BranchMode.FORK, ("f",)),),
    )
    fork_turn = Turn(
        index=0, input_tokens=12, output_tokens=4, messages=({"role": "user", "content": "go"},)
    )
    return Tree(
        id="T",
        root_id="root",
        sessions={
            "root": Session("root", (root_turn,)),
            "f": Session("f", (fork_turn,), parent_id="root", mode=BranchMode.FORK, depth=1),
        },
    )


def builder(agent: Tree, *, isolate: bool = True) -> RequestBuilder:
    trace = Trace(format=TraceFormat.DAG_JSONL, source="inline", trees=(agent,))
    return RequestBuilder([trace], model="m", isolate_trees=isolate)


def messages(b: RequestBuilder, agent: Tree, instance: int, session: str = "root") -> list[Any]:
    template = agent.sessions[session]
    root_id = f"t{instance}:root"
    credit = Credit(
        id=instance,
        session_id=f"t{instance}:{session}",
        root_id=root_id,
        turn_index=0,
        num_turns=1,
        parent_id=None if template.parent_id is None else root_id,
        branch_mode=template.mode,
        template_id=session,
        turn=template.turns[0],
        tree=agent,
    )
    request, _ = b.build(Dispatch(credit, 0, AffinityDecision()))
    return list(request.messages)


def words(msgs: list[Any]) -> list[str]:
    return " ".join(m["content"] for m in msgs if isinstance(m["content"], str)).split()


def test_two_instances_of_a_literal_tree_differ_from_the_first_token():
    agent = literal_tree()
    b = builder(agent)
    first, second = words(messages(b, agent, 1)), words(messages(b, agent, 2))
    assert first[0] != second[0]
    assert first[1:] == second[1:]  # only the marker differs: the rest is the trace's text


def test_the_marker_keeps_the_literal_prompts_token_count():
    agent = literal_tree()
    marked = messages(builder(agent), agent, 1)
    plain = messages(builder(agent, isolate=False), agent, 1)
    assert count_message_tokens(marked) == count_message_tokens(plain)


def test_without_isolation_instances_share_their_literal_prompts():
    agent = literal_tree()
    b = builder(agent, isolate=False)
    assert messages(b, agent, 1) == messages(b, agent, 2)
    assert messages(b, agent, 1)[0] == SYSTEM


def test_a_fork_child_shares_its_parents_marked_prefix():
    agent = literal_tree()
    b = builder(agent)
    root, child = messages(b, agent, 1), messages(b, agent, 1, session="f")
    assert child[: len(root)] == root


def test_the_marker_goes_into_the_first_text_part_and_the_trace_is_left_untouched():
    parts = [{"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "look"}]
    agent = literal_tree({"role": "user", "content": parts})
    sent = messages(builder(agent), agent, 1)
    assert sent[0]["content"][1]["text"].startswith("[rid:")
    assert parts[1]["text"] == "look"  # the trace's own message is never mutated


def test_a_second_run_of_the_same_trees_shares_no_prefix_with_the_first():
    """Root ids repeat from run to run: the per-run salt keeps a re-run (or the second run of
    an A/B pair) from finding the first run's prompts in the server's prefix cache."""
    agent = literal_tree()
    first_run, second_run = builder(agent), builder(agent)
    assert words(messages(first_run, agent, 1))[0] != words(messages(second_run, agent, 1))[0]
    # Within one run an instance keeps its marker: its FORK child shares the parent's prefix.
    assert words(messages(first_run, agent, 1))[0] == words(messages(first_run, agent, 1, "f"))[0]


def test_affinity_ids_on_the_wire_carry_the_runs_salt_and_the_final_flag_stays():
    agent = literal_tree()
    b = RequestBuilder(
        [Trace(format=TraceFormat.DAG_JSONL, source="inline", trees=(agent,))],
        model="m",
        marker_salt="run7",
    )
    credit = Credit(
        id=1,
        session_id="t1:root",
        root_id="t1:root",
        turn_index=0,
        num_turns=1,
        template_id="root",
        turn=agent.sessions["root"].turns[0],
        tree=agent,
    )
    decision = AffinityDecision(
        "t1:root",
        Action.CLOSE,
        {"session_id": "t1:root", "action": "close"},
        (("X-Dynamo-Session-ID", "t1:root"), ("X-Dynamo-Session-Final", "true")),
    )
    request, headers = b.build(Dispatch(credit, 0, decision))
    assert headers == {"X-Dynamo-Session-ID": "run7/t1:root", "X-Dynamo-Session-Final": "true"}
    assert request.body()["nvext"]["session_control"] == {
        "session_id": "run7/t1:root",
        "action": "close",
    }
