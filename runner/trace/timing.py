"""Nominal request durations and the nominal timeline of an untimed tree.

Traces without recorded times (dag_jsonl, untimed native, synthetic) still need `t_s` and
`duration_s` so a replay can place a start instant t* inside a tree. This module estimates a
request's duration from its token counts and lays a tree out on that estimate, honouring
delays and strict joins. The figures are placeholders for placement only; nothing measures
against them. It never touches recorded times.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from runner.trace.model import Tree, Turn

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
    """Estimated request duration: base + prefill + decode (see the constants above)."""
    return (
        NOMINAL_BASE_S
        + input_tokens * NOMINAL_PREFILL_S_PER_TOKEN
        + output_tokens * NOMINAL_DECODE_S_PER_TOKEN
    )


def _nominal(turn: Turn) -> float:
    return nominal_duration_s(turn.input_tokens, turn.output_tokens)


def with_nominal_times(tree: Tree, *, duration_s: Callable[[Turn], float] = _nominal) -> Tree:
    """The tree with every turn's `t_s` / `duration_s` laid out from its delays.

    A root's turn 0 starts at its own delay; a child's turn 0 starts its delay after the
    parent's declaring turn ends; every later turn starts its delay after the previous turn
    ends, or after the last child joining on it ends if that is later (strict joins: the
    think time runs after the wait). `timestamped` is left False.
    """
    timed: dict[str, list[Turn]] = {}

    def lay_out(session_id: str, origin_s: float) -> float:
        session = tree.sessions[session_id]
        joins: dict[int, float] = {}
        out: list[Turn] = []
        prev_end = origin_s
        for turn in session.turns:
            start = max(prev_end, joins.get(turn.index, prev_end)) + turn.delay_s
            length = duration_s(turn)
            out.append(dataclasses.replace(turn, t_s=start, duration_s=length))
            prev_end = start + length
            for branch in turn.branches:
                for child in branch.children:
                    child_end = lay_out(child, prev_end)
                    if branch.join_turn is not None:
                        joins[branch.join_turn] = max(joins.get(branch.join_turn, 0.0), child_end)
        timed[session_id] = out
        return prev_end

    lay_out(tree.root_id, 0.0)
    sessions = {
        sid: dataclasses.replace(s, turns=tuple(timed[sid])) for sid, s in tree.sessions.items()
    }
    return dataclasses.replace(tree, sessions=sessions, timestamped=False)
