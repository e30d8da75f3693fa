"""Deterministic prompt text for trace turns: hash-id blocks, fresh tails, tree markers, replies.

Owns the mapping from (scope, hash id) to one fixed block of exactly `block_size` words, the
fresh words that pad a prompt past its hashed blocks, the per-tree-instance marker, and the
rendering of literal chat histories (dag_jsonl / native turns that carry `messages`). Token
counts follow `runner.trace.tokens` exactly. It runs per request in live replay, so every
text is a few slices of one precomputed word pool, never words drawn one by one; no I/O.
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections.abc import Sequence
from typing import Any

from runner.trace.model import BranchMode, Tree, Turn

__all__ = [
    "instance_marker",
    "prompt_words",
    "render_messages",
    "synthesize_prompt",
    "synthesize_reply",
]

# Pseudo-words of two or three consonant-vowel syllables: no whitespace, never mistaken for a
# marker, and every word is one token under the whitespace contract.
_CONSONANTS = "bcdfghjklmnprstvz"
_VOWELS = "aeiou"
_SYLLABLES = [c + v for c in _CONSONANTS for v in _VOWELS]


def _build_vocabulary() -> tuple[str, ...]:
    rng = random.Random("aiperf-web/vocabulary/1")
    two = [a + b for a in _SYLLABLES for b in _SYLLABLES]
    three = [w + rng.choice(_SYLLABLES) for w in rng.sample(two, 2048)]
    return tuple(rng.sample(two, 2048) + three)


_VOCABULARY = _build_vocabulary()


def prompt_words() -> tuple[str, ...]:
    """Every word synthesized text is made of (tree markers aside): a tokenizer with one id per
    word counts a prompt's tokens as this project does (scripts/vllm-cpu.sh's `words` model)."""
    return _VOCABULARY


# Fresh (uncacheable) words come from one long pool read at a per-request seeded offset: a
# string slice instead of sampling thousands of words per request. The pool is stored twice
# so any window of up to _POOL_WORDS words is one slice.
_POOL_WORDS = 1 << 16


def _build_pool() -> tuple[str, list[int]]:
    rng = random.Random("aiperf-web/fresh-pool/1")
    words = rng.choices(_VOCABULARY, k=_POOL_WORDS)
    doubled = words + words
    starts: list[int] = []
    pos = 0
    for word in doubled:
        starts.append(pos)
        pos += len(word) + 1
    starts.append(pos)  # sentinel: one past the trailing separator
    return " ".join(doubled), starts


_POOL_TEXT, _POOL_STARTS = _build_pool()


def _seed(*parts: object) -> int:
    key = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")


def _pool_words(offset: int, count: int) -> str:
    """`count` pool words from word `offset` (any length: the pool wraps)."""
    pieces: list[str] = []
    while count > 0:
        take = min(count, _POOL_WORDS)
        pieces.append(_POOL_TEXT[_POOL_STARTS[offset] : _POOL_STARTS[offset + take] - 1])
        count -= take
    return " ".join(pieces)


def _fresh_words(count: int, *key: object) -> str:
    """`count` pool words starting at an offset seeded by `key`."""
    if count <= 0:
        return ""
    return _pool_words(_seed("fresh", *key) % _POOL_WORDS, count)


# Block texts already made, oldest first, up to _BLOCK_CACHE_CHARS characters: the turns of a
# session repeat their predecessors' blocks and every lane of a tree repeats the tree's, so a
# long prompt is mostly lookups (trace_0282's later turns: about 2,000 blocks each).
_BLOCK_CACHE_CHARS = 32 << 20
_block_cache: dict[tuple[str, int, int], str] = {}
_block_cache_chars = 0
_block_cache_lock = threading.Lock()  # misses only: runs in a worker's threads share it


def _block(scope: str, block_size: int, hash_id: int) -> str:
    """The block text of (scope, hash id), from the cache when it was made before."""
    global _block_cache_chars
    key = (scope, block_size, hash_id)
    text = _block_cache.get(key)
    if text is None:
        text = _make_block(scope, block_size, hash_id)
        with _block_cache_lock:
            if key not in _block_cache:
                while _block_cache and _block_cache_chars + len(text) > _BLOCK_CACHE_CHARS:
                    _block_cache_chars -= len(_block_cache.pop(next(iter(_block_cache))))
                _block_cache[key] = text
                _block_cache_chars += len(text)
    return text


def _make_block(scope: str, block_size: int, hash_id: int) -> str:
    """The block text of (scope, hash id): two pool windows at independent seeded offsets.

    Two windows, not one, because a block must not repeat another hash id's text: with one
    offset, two of the tens of thousands of distinct ids in a Mooncake trace would share a
    window (and so a prefix on the server) about once per 65,536 pairs; with two, once per
    4 billion. About 2 µs a block where drawing words one by one took 50 µs, which set the
    schedule lag of bursts of long prompts.
    """
    seed = _seed("block", scope, hash_id)
    first = block_size // 2
    head = _pool_words(seed % _POOL_WORDS, first)
    tail = _pool_words((seed >> 20) % _POOL_WORDS, block_size - first)
    return f"{head} {tail}" if head else tail


def instance_marker(instance_id: object) -> str:
    """`[rid:<12 hex>]` for one replayed tree instance: one word, so one token."""
    digest = hashlib.blake2b(str(instance_id).encode(), digest_size=6).hexdigest()
    return f"[rid:{digest}]"


def synthesize_prompt(
    *,
    input_tokens: int,
    hash_ids: Sequence[int],
    block_size: int,
    scope: str,
    request_key: str,
    marker: str | None = None,
) -> str:
    """Prompt text of exactly `input_tokens` tokens.

    Each hash id is one block of `block_size` words fixed by (scope, hash id), so equal hash-id
    prefixes give equal text prefixes. When the blocks cover more than `input_tokens` the last
    one is cut (its first words); when they cover less, fresh words seeded by (scope,
    request_key) fill the tail. `marker` (one word, e.g. `instance_marker(...)`) replaces the
    first word so every tree instance has its own prefix; None shares text across instances.
    """
    if block_size <= 0:
        raise ValueError(f"block_size must be positive, got {block_size}")
    if input_tokens <= 0:
        return ""
    if marker is not None and (not marker or len(marker.split()) != 1 or marker != marker.strip()):
        raise ValueError(f"marker must be one word without whitespace, got {marker!r}")
    # Ids beyond the prompt's length name no tokens (a trace may over-declare them).
    usable = min(len(hash_ids), -(-input_tokens // block_size))
    full = min(usable, input_tokens // block_size)
    parts = [_block(scope, block_size, h) for h in hash_ids[:full]]
    if usable > full:
        block = _block(scope, block_size, hash_ids[full])
        rest = input_tokens - full * block_size
        parts.append(" ".join(block.split(" ", rest)[:rest]))
    tail = input_tokens - usable * block_size
    if tail > 0:
        parts.append(_fresh_words(tail, scope, request_key))
    if marker is not None:
        # Swap the first word in the first part: one small copy instead of the whole prompt.
        first = parts[0]
        cut = first.find(" ")
        parts[0] = marker if cut < 0 else marker + first[cut:]
    return " ".join(parts)


def synthesize_reply(*, session_id: str, turn_index: int, output_tokens: int) -> str:
    """The stand-in assistant reply of a turn: `output_tokens` words fixed by the turn.

    Used where a trace has no recorded reply but a FORK child or a later turn carries it in its
    history (token estimates at load time, histories rendered without a live server).
    """
    return _fresh_words(output_tokens, "reply", session_id, turn_index)


def _history(tree: Tree, session_id: str, upto: int) -> list[tuple[str, Turn]]:
    """(session id, turn) of every turn whose messages and reply precede turn `upto`'s."""
    chain: list[tuple[str, Turn]] = []
    current, stop = session_id, upto
    while True:
        session = tree.sessions[current]
        chain[:0] = [(current, t) for t in session.turns[:stop]]
        if session.mode is not BranchMode.FORK or session.parent_id is None:
            return chain
        parent = tree.sessions[session.parent_id]
        declaring = session.declaring_turn
        if declaring is None:  # a tree built by hand, not by a loader: look it up
            declaring = next(
                t.index for t in parent.turns for b in t.branches if current in b.children
            )
        current, stop = parent.id, declaring + 1


def render_messages(tree: Tree, session_id: str, turn_index: int) -> list[dict[str, Any]]:
    """The chat `messages` a literal-message turn sends: its whole accumulated history.

    A FORK child starts from its parent's history up to and including the declaring turn and
    its reply; a SPAWN child or root from nothing. Earlier turns contribute their messages and
    a synthesized assistant reply of `output_tokens` words (`synthesize_reply`), then the turn's
    own messages follow. For dag_jsonl trees the token count of the result equals the turn's
    `input_tokens`. Raises ValueError when a turn on the way carries no literal messages.
    """
    messages: list[dict[str, Any]] = []
    for sid, past in _history(tree, session_id, turn_index):
        messages.extend(_literal(sid, past))
        reply = synthesize_reply(
            session_id=sid, turn_index=past.index, output_tokens=past.output_tokens
        )
        messages.append({"role": "assistant", "content": reply})
    messages.extend(_literal(session_id, tree.sessions[session_id].turns[turn_index]))
    return messages


def _literal(session_id: str, turn: Turn) -> list[dict[str, Any]]:
    if turn.messages is None:
        raise ValueError(
            f"turn {turn.index} of session {session_id!r} has no literal messages; "
            "synthesize its prompt from hash ids instead"
        )
    return [dict(m) for m in turn.messages]
