"""Chained block identities for the simulated prefix cache.

Owns `chain_block_keys`: block i's key names block i *and every block before it*, like the
engines' chained block hashes (Dynamo's KV events, vLLM's prefix cache). It must stay
deterministic across processes and fast (it runs once per prompt block); it knows nothing of
workers or caches.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

__all__ = ["BlockPart", "chain_block_keys"]

# What one block may be named by: a trace hash id (int), a block of token ids (tuple of
# ints), or text / bytes. Python's hash() of ints and of tuples of ints is the same in every
# process (only str/bytes hashing is salted by PYTHONHASHSEED), so those go straight into
# hash(); text and bytes are first turned into an int with blake2b.
# Caveat: CPython maps hash(-1) to -2, so the parts -1 and -2 collide; ids and token ids are
# non-negative in practice.
BlockPart = int | tuple[int, ...] | str | bytes


def chain_block_keys(parts: Iterable[BlockPart], *, seed: int = 0) -> tuple[int, ...]:
    """Keys k_i = hash((k_{i-1}, part_i)) with k_{-1} = seed, one per full block.

    Equal keys at one position mean equal prompts up to and including that block. To extend
    a prompt already keyed (the next turn of a conversation), pass its last key as `seed` and
    only the new parts: `old + chain_block_keys(new_parts, seed=old[-1])` equals keying the
    whole prompt at once, at the cost of the new blocks only.
    """
    if not isinstance(parts, (list, tuple)):
        parts = list(parts)
    # One call names its blocks one way (text, or ints / int tuples): the first part tells.
    if parts and isinstance(parts[0], (str, bytes)):
        parts = [_stable_int(p) if isinstance(p, (str, bytes)) else p for p in parts]
    key = seed
    # A comprehension with the running key in a walrus: the simulator keys ~60 new blocks
    # per request, and this is half the bytecode of an explicit loop with append.
    return tuple([(key := hash((key, part))) for part in parts])


def _stable_int(part: str | bytes) -> int:
    data = part.encode() if isinstance(part, str) else part
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")
