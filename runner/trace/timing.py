"""Nominal request durations and the nominal timeline of an untimed tree.

Traces without recorded times (dag_jsonl, untimed native, synthetic) still need `t_s` and
`duration_s` so a replay can place a start instant t* inside a tree. This module estimates a
request's duration from its token counts and lays a tree out on that estimate, honouring
delays and strict joins. The figures are placeholders for placement only; nothing measures
against them. It never touches recorded times, and never recurses (a tree may be a chain of
thousands of sessions).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from runner.trace.model import Session, Tree, Turn

__all__ = [
    "NOMINAL_BASE_S",
    "NOMINAL_DECODE_S_PER_TOKEN",
    "NOMINAL_PREFILL_S_PER_TOKEN",
    "nominal_duration_s",
    "with_nominal_times",
]

# One mid-size model on one GPU, prefix cache cold: ~50k prompt tokens/s of prefill, ~100
# output tokens/s of decode, plus a fixed 0.1 s of queueing and network.
NOMINAL_BASE_S = 0.1
NOMINAL_PREFILL_S_PER_TOKEN = 1 / 50_000
NOMINAL_DECODE_S_PER_TOKEN = 1 / 100


def nominal_duration_s(input_tokens: int, output_tokens: int) -> float:
    """Estimated request duration: base + prefill + decode (see the constants above).

    Token counts are bounded by the loaders (runner.trace.limits.MAX_TOKENS), so this is
    always finite.
    """
    return (
        NOMINAL_BASE_S
        + input_tokens * NOMINAL_PREFILL_S_PER_TOKEN
        + output_tokens * NOMINAL_DECODE_S_PER_TOKEN
    )


def _nominal(turn: Turn) -> float:
    return nominal_duration_s(turn.input_tokens, turn.output_tokens)


def timed_turn(turn: Turn, *, t_s: float, duration_s: float) -> Turn:
    """`turn` with new times (a plain constructor call: dataclasses.replace costs 8x more)."""
    return Turn(
        index=turn.index,
        input_tokens=turn.input_tokens,
        output_tokens=turn.output_tokens,
        hash_ids=turn.hash_ids,
        delay_s=turn.delay_s,
        t_s=t_s,
        duration_s=duration_s,
        branches=turn.branches,
        messages=turn.messages,
        extra_body=turn.extra_body,
        model=turn.model,
    )


@dataclass(slots=True)
class _Layout:
    """One session being laid out: what a recursive call would keep on the stack."""

    session: Session
    prev_end_s: float  # end of the last laid-out turn (at first: the session's origin)
    parent: _Layout | None = None
    join_turn: int | None = None  # the parent's turn this session's end gates
    next_turn: int = 0
    out: list[Turn] = field(default_factory=list)
    joins: dict[int, float] = field(default_factory=dict)  # turn index -> last child end
    pending: list[tuple[float, int | None, str]] = field(default_factory=list)


def with_nominal_times(tree: Tree, *, duration_s: Callable[[Turn], float] = _nominal) -> Tree:
    """The tree with every turn's `t_s` / `duration_s` laid out from its delays.

    A root's turn 0 starts at its own delay; a child's turn 0 starts its delay after the
    parent's declaring turn ends (starts, for an `on_issue` branch); every later turn starts
    its delay after the previous turn ends, or after the last child joining on it ends if that
    is later (strict joins: the think time runs after the wait). `timestamped` is left False.

    Depth-first with an explicit stack: a turn's children are laid out before the session's
    next turn, whose start may wait on them.
    """
    timed: dict[str, tuple[Turn, ...]] = {}
    stack = [_Layout(tree.root, 0.0)]
    while stack:
        frame = stack[-1]
        if frame.pending:
            origin_s, join_turn, child = frame.pending.pop()
            stack.append(_Layout(tree.sessions[child], origin_s, frame, join_turn))
            continue
        turns = frame.session.turns
        if frame.next_turn < len(turns):
            turn = turns[frame.next_turn]
            frame.next_turn += 1
            ready_s = max(frame.prev_end_s, frame.joins.get(turn.index, frame.prev_end_s))
            start_s = ready_s + turn.delay_s
            length_s = duration_s(turn)
            frame.out.append(timed_turn(turn, t_s=start_s, duration_s=length_s))
            frame.prev_end_s = start_s + length_s
            for branch in reversed(turn.branches):
                origin_s = start_s if branch.on_issue else frame.prev_end_s
                for child in reversed(branch.children):
                    frame.pending.append((origin_s, branch.join_turn, child))
            continue
        stack.pop()
        timed[frame.session.id] = tuple(frame.out)
        parent = frame.parent
        if parent is not None and frame.join_turn is not None:
            joins = parent.joins
            joins[frame.join_turn] = max(joins.get(frame.join_turn, 0.0), frame.prev_end_s)
    sessions = {
        sid: Session(
            id=s.id,
            turns=timed[sid],
            parent_id=s.parent_id,
            mode=s.mode,
            depth=s.depth,
            subagent_type=s.subagent_type,
            declaring_turn=s.declaring_turn,
        )
        for sid, s in tree.sessions.items()
    }
    return Tree(
        id=tree.id,
        root_id=tree.root_id,
        sessions=sessions,
        block_size=tree.block_size,
        timestamped=False,
    )
