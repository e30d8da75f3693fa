"""Traces shrunk to fit a small model (runner/trace/scale.py): lengths times a factor in whole
tokens per block, the shared-prefix structure kept, literal messages and factors below one
token per block refused, and the largest factor at which every request fits a window."""

from __future__ import annotations

from itertools import combinations

import pytest

from runner.errors import SpecError
from runner.trace import Trace, Turn, load_trace, synthesize_prompt
from runner.trace.scale import ContextCost, fitting_factor, scale_trace
from tests.fixtures import CLAUDE_CODE_SUBAGENTS, DAG_SPAWN


def turns(trace: Trace) -> list[tuple[str, int, Turn]]:
    return [
        (session.id, turn.index, turn)
        for tree in trace.trees
        for session in tree.sessions.values()
        for turn in session.turns
    ]


def prompts(trace: Trace) -> list[list[str]]:
    """Every request's prompt words, as a replay without tree markers sends them."""
    [tree] = trace.trees
    return [
        synthesize_prompt(
            input_tokens=turn.input_tokens,
            hash_ids=turn.hash_ids,
            block_size=tree.block_size,
            scope="scale-test",
            request_key=f"{session_id}:{index}",
        ).split()
        for session_id, index, turn in turns(trace)
    ]


def shared_blocks(a: list[str], b: list[str], block: int) -> int:
    """Whole blocks of equal words at the start of both prompts."""
    same = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    return same // block


def test_every_length_shrinks_in_whole_tokens_per_block() -> None:
    trace = load_trace(CLAUDE_CODE_SUBAGENTS)
    scaled = scale_trace(trace, 0.25)
    assert scaled.trees[0].block_size == 16
    for (sid, index, old), (_, _, new) in zip(turns(trace), turns(scaled), strict=True):
        blocks, tail = divmod(old.input_tokens, 64)
        assert new.input_tokens == blocks * 16 + tail // 4, (sid, index)
        assert new.output_tokens == max(1, old.output_tokens // 4)
        # What is not a length stays: the blocks' names and the clock.
        assert new.hash_ids == old.hash_ids and new.delay_s == old.delay_s
        assert new.t_s == old.t_s and new.branches == old.branches


def test_a_factor_rounds_down_to_whole_tokens_per_block() -> None:
    trace = load_trace(CLAUDE_CODE_SUBAGENTS)
    assert scale_trace(trace, 0.3).trees[0].block_size == 19  # 19.2 tokens: 19
    assert scale_trace(trace, 1 / 64).trees[0].block_size == 1


def test_requests_share_as_many_blocks_after_scaling_as_before() -> None:
    """Every pair of the fixture's 61 prompts: the main chain's consecutive turns share all
    but their last block, the siblings a 20-block prefix, the parent and its children none;
    the scaled prompts share the same number of (smaller) blocks, pair by pair."""
    trace = load_trace(CLAUDE_CODE_SUBAGENTS)
    scaled = scale_trace(trace, 0.25)
    before, after = prompts(trace), prompts(scaled)
    shared = 0
    for i, j in combinations(range(len(before)), 2):
        blocks = shared_blocks(before[i], before[j], 64)
        assert shared_blocks(after[i], after[j], 16) == blocks, (i, j)
        shared += blocks > 0
    assert shared > 100  # the fixture is made of shared prefixes: this compared many


def test_literal_messages_cannot_be_scaled() -> None:
    with pytest.raises(SpecError, match="literal chat messages") as refused:
        scale_trace(load_trace(DAG_SPAWN), 0.5)
    assert refused.value.fields == {"length_scale": f"{DAG_SPAWN} carries literal messages"}


def test_below_one_token_per_block_is_refused_naming_the_smallest_factor() -> None:
    with pytest.raises(SpecError, match=r"smallest factor it takes is 1/64 = 0\.01562"):
        scale_trace(load_trace(CLAUDE_CODE_SUBAGENTS), 1 / 128)


def test_the_fitting_factor_is_the_largest_at_which_every_request_fits() -> None:
    trace = load_trace(CLAUDE_CODE_SUBAGENTS)
    cost = ContextCost(max_model_len=4096, per_word=3.0, overhead=20)
    factor = fitting_factor([trace], cost)
    # The longest request (7,109 prompt + 618 output tokens as recorded) fills the window.
    worst = max(3.0 * t.input_tokens + t.output_tokens for _, _, t in turns(trace))
    assert worst * factor == pytest.approx(4096 - 20)
    for _, _, turn in turns(scale_trace(trace, factor)):
        assert cost.tokens(turn) <= 4096
    # A cap below it wins; a window that holds everything needs no shrinking.
    assert fitting_factor([trace], cost, cap=0.1) == 0.1
    roomy = ContextCost(max_model_len=200_000, per_word=3.0, overhead=20)
    assert fitting_factor([trace], roomy) == 1.0


def test_a_window_too_small_for_one_token_per_block_names_the_request_and_the_fix() -> None:
    cost = ContextCost(max_model_len=256, per_word=3.0, overhead=20)
    with pytest.raises(SpecError) as refused:
        fitting_factor([load_trace(CLAUDE_CODE_SUBAGENTS)], cost)
    message = str(refused.value)
    assert "context of 256 tokens is too small" in message
    assert "below one token per 64-token block" in message
    assert "--max-model-len" in message
    assert refused.value.fields == {"fit_context": f"{CLAUDE_CODE_SUBAGENTS} cannot fit 256 tokens"}
