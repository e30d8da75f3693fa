"""Traces shrunk to fit a small model: every prompt and output length times one factor, with
the shared-prefix structure kept.

A prompt is its hash-id blocks then an unhashed tail. Scaling shrinks the block itself
(`block_size` tokens become floor(block_size x factor)), so the same hash ids still name the
same, shorter text: two requests that shared k blocks share k blocks after, and a growing
conversation still grows by whole blocks. The factor actually applied is therefore
new_block / block_size (at most the one asked), the same for prompts and outputs; below one
token per block a tree cannot shrink further. Literal chat messages (dag_jsonl, native turns
with `messages`) are replayed as recorded and cannot be scaled.

`fitting_factor` finds the largest factor at which every request of a workload fits a context
window, given how many of the server's tokens one trace token (one word) costs. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from runner.errors import SpecError
from runner.trace.model import Trace, Tree, Turn

__all__ = ["ContextCost", "fitting_factor", "scale_trace", "scale_traces"]

_EPSILON = 1e-9  # 0.25 x 64 is 16 blocks, not 15.999...


@dataclass(frozen=True, slots=True)
class ContextCost:
    """What a request costs in a server's context window: `per_word` tokens for each trace
    token (word) of the prompt, `overhead` tokens per request (chat template, marker), and
    one token per output token (what `max_tokens` reserves)."""

    max_model_len: int
    per_word: float
    overhead: float

    def tokens(self, turn: Turn) -> float:
        return self.per_word * turn.input_tokens + self.overhead + turn.output_tokens


def scale_traces(traces: Sequence[Trace], factor: float) -> list[Trace]:
    """Every trace scaled by `factor` (0 < factor <= 1); `traces` as they are for 1."""
    if factor == 1:
        return list(traces)
    return [scale_trace(trace, factor) for trace in traces]


def scale_trace(trace: Trace, factor: float) -> Trace:
    """`trace` with every length times `factor`, block by block (module docstring). Raises
    SpecError naming the trace when it carries literal messages or a tree cannot shrink that
    far."""
    if not 0 < factor <= 1:
        raise ValueError(f"factor must be in (0, 1], got {factor}")
    return dataclasses.replace(trace, trees=tuple(_tree(trace, t, factor) for t in trace.trees))


def _tree(trace: Trace, tree: Tree, factor: float) -> Tree:
    block = math.floor(tree.block_size * factor + _EPSILON)
    if block < 1:
        raise SpecError(
            f"length_scale: {factor:.4g} is below one token per block for tree {tree.id!r} of "
            f"{trace.source} ({tree.block_size}-token blocks): the smallest factor it takes is "
            f"1/{tree.block_size} = {1 / tree.block_size:.4g}",
            fields={"length_scale": f"below 1/{tree.block_size} for {trace.source}"},
        )
    applied = block / tree.block_size
    sessions = {}
    for session_id, session in tree.sessions.items():
        turns = []
        for turn in session.turns:
            if turn.messages is not None:
                raise SpecError(
                    f"length_scale: {trace.source} replays literal chat messages (session "
                    f"{session_id!r}), whose text cannot be scaled; use a trace of token counts "
                    "and hash ids (Claude Code, Mooncake, native without messages), or leave "
                    "length_scale at 1 and fit_context off",
                    fields={"length_scale": f"{trace.source} carries literal messages"},
                )
            turns.append(_turn(turn, tree.block_size, block, applied))
        sessions[session_id] = dataclasses.replace(session, turns=tuple(turns))
    return dataclasses.replace(tree, sessions=sessions, block_size=block)


def _turn(turn: Turn, old_block: int, new_block: int, applied: float) -> Turn:
    # Whole blocks stay whole (a shared prefix of k blocks is k blocks after); the tail scales.
    blocks, tail = divmod(turn.input_tokens, old_block)
    input_tokens = blocks * new_block + math.floor(tail * applied + _EPSILON)
    return dataclasses.replace(
        turn,
        input_tokens=max(1, input_tokens),
        output_tokens=max(1, math.floor(turn.output_tokens * applied + _EPSILON)),
    )


def fitting_factor(traces: Sequence[Trace], cost: ContextCost, *, cap: float = 1.0) -> float:
    """The largest factor up to `cap` at which every request of `traces`, scaled, costs at most
    `cost.max_model_len`: the factor to give `scale_traces`. Raises SpecError saying which
    request cannot fit when none does (the window cannot hold even the overhead, or a tree
    would need less than one token per block)."""
    room = cost.max_model_len - cost.overhead
    factor, worst = cap, None
    for trace in traces:
        for tree in trace.trees:
            for session in tree.sessions.values():
                for turn in session.turns:
                    # Scaled lengths are at most factor x the recorded ones: a safe bound.
                    need = cost.per_word * turn.input_tokens + turn.output_tokens
                    if room <= 0 or need * factor > room:
                        factor, worst = max(0.0, room / need), (trace, tree, session.id, turn)
    if worst is None:
        return factor
    trace, tree, session_id, turn = worst
    if factor * tree.block_size < 1 - _EPSILON:
        raise SpecError(
            f"fit_context: the endpoint's context of {cost.max_model_len} tokens is too small "
            f"for {trace.source}: turn {turn.index} of session {session_id!r} "
            f"({turn.input_tokens} prompt + {turn.output_tokens} output tokens as recorded, "
            f"about {cost.tokens(turn):.0f} of the server's) would need a factor of "
            f"{factor:.4g}, below one token per {tree.block_size}-token block; serve the "
            "model with a longer --max-model-len or replay a shorter trace",
            fields={"fit_context": f"{trace.source} cannot fit {cost.max_model_len} tokens"},
        )
    return factor
