"""Prompt synthesis: exact token counts, determinism, shared prefixes, per-instance markers."""

from __future__ import annotations

from typing import Any

import pytest

from runner.trace import count_message_tokens, count_tokens, instance_marker, synthesize_prompt
from runner.trace.prompts import synthesize_reply


def prompt(
    tokens: int,
    ids: list[int],
    *,
    key: str = "s:0",
    marker: str | None = None,
    block: int = 64,
    scope: str = "trace-a",
) -> str:
    return synthesize_prompt(
        input_tokens=tokens,
        hash_ids=ids,
        block_size=block,
        scope=scope,
        request_key=key,
        marker=marker,
    )


@pytest.mark.parametrize("tokens", [1, 2, 63, 64, 65, 127, 128, 500, 20_000])
@pytest.mark.parametrize("blocks", [0, 1, 2, 8, 400])
@pytest.mark.parametrize("marker", [None, "[rid:0123456789ab]"])
def test_prompt_has_exactly_the_requested_tokens(
    tokens: int, blocks: int, marker: str | None
) -> None:
    text = prompt(tokens, list(range(1, blocks + 1)), marker=marker)
    assert count_tokens(text) == tokens


def test_zero_tokens_is_an_empty_prompt() -> None:
    assert prompt(0, [1, 2]) == ""


def test_same_inputs_give_the_same_prompt() -> None:
    assert prompt(1000, [4, 5, 6], key="x") == prompt(1000, [4, 5, 6], key="x")


def test_equal_hash_id_prefixes_give_equal_text_prefixes() -> None:
    a = prompt(64 * 5, [1, 2, 3, 4, 5])
    b = prompt(64 * 4 + 10, [1, 2, 3, 9, 10])
    shared = len(prompt(64 * 3, [1, 2, 3]))
    assert a[:shared] == b[:shared]
    assert a[: shared + 2] != b[: shared + 2]


def test_partial_last_block_is_the_start_of_that_block() -> None:
    full = prompt(128, [1, 2])
    cut = prompt(100, [1, 2])
    assert full.startswith(cut)


def test_unhashed_tail_is_fresh_per_request() -> None:
    one = prompt(64 + 40, [1], key="s:1")
    two = prompt(64 + 40, [1], key="s:2")
    head = len(prompt(64, [1]))
    assert one[:head] == two[:head]
    assert one[head:] != two[head:]


def test_different_markers_give_different_prompts_of_equal_length_in_tokens() -> None:
    m1, m2 = instance_marker("lane-1/tree-0"), instance_marker("lane-2/tree-0")
    assert m1 != m2 and m1.startswith("[rid:") and len(m1) == len("[rid:]") + 12
    p1, p2 = prompt(300, [1, 2, 3], marker=m1), prompt(300, [1, 2, 3], marker=m2)
    assert p1 != p2 and p1.split()[0] == m1
    assert p1.split()[1:] == p2.split()[1:]
    assert count_tokens(p1) == count_tokens(p2) == 300


def test_without_a_marker_two_instances_share_the_text() -> None:
    assert prompt(300, [1, 2, 3], key="lane-1")[:200] == prompt(300, [1, 2, 3], key="lane-2")[:200]


def test_hash_ids_are_scoped_to_their_trace() -> None:
    assert prompt(128, [1, 2], scope="trace-a") != prompt(128, [1, 2], scope="trace-b")


def test_surplus_hash_ids_are_ignored() -> None:
    assert prompt(70, [1, 2, 3, 4]) == prompt(70, [1, 2])


def test_marker_must_be_a_single_word() -> None:
    with pytest.raises(ValueError, match="one word"):
        prompt(10, [], marker="two words")


def test_reply_has_the_requested_tokens_and_is_fixed_by_the_turn() -> None:
    reply = synthesize_reply(session_id="s", turn_index=3, output_tokens=42)
    assert count_tokens(reply) == 42
    assert reply == synthesize_reply(session_id="s", turn_index=3, output_tokens=42)
    assert reply != synthesize_reply(session_id="s", turn_index=4, output_tokens=42)


def test_message_tokens_count_text_parts_only() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "a b c"}, {"type": "image_url"}]},
        {"role": "assistant", "content": None, "tool_calls": []},
    ]
    assert count_message_tokens(messages) == 5


def test_cached_blocks_are_the_text_made_afresh_and_the_cache_stays_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Blocks come from a cache after their first use: the prompt is the same text as one
    made from freshly drawn blocks, and the cache never holds more than its cap."""
    from runner.trace import prompts

    monkeypatch.setattr(prompts, "_BLOCK_CACHE_CHARS", 20_000)
    monkeypatch.setattr(prompts, "_block_cache", {})
    monkeypatch.setattr(prompts, "_block_cache_chars", 0)
    ids = list(range(1, 201))  # about 80,000 characters of blocks: four times the cap
    first = prompt(200 * 64, ids, scope="cache-test")
    again = prompt(200 * 64, ids, scope="cache-test")
    fresh = " ".join(prompts._make_block("cache-test", 64, h) for h in ids)
    assert first == again == fresh
    held = sum(len(text) for text in prompts._block_cache.values())
    assert held == prompts._block_cache_chars <= 20_000
    assert 0 < len(prompts._block_cache) < len(ids)
