"""Importer for Mooncake JSONL (`{timestamp, input_length, output_length, hash_ids}` per line).

Owns the derivation of sessions from shared hash prefixes (the file has no session ids) and
their placement on the file's clock: every session becomes its own single-session tree whose
turns keep their recorded arrival `t_s` (seconds since the trace start, which is also every
tree's start). Durations are not recorded, so they are nominal and only shape the
end-to-start delays. It never merges sessions into forks.

Session rule. Requests are taken in timestamp order (stable). A session's *key* is the
full-block prefix of its latest request: its first ⌊input_length / block_size⌋ hash ids (the
partial last block is re-hashed once the conversation grows past it, so it never recurs). A
request R continues session S when S's key is a proper prefix of R's hash ids and at least
`MIN_SHARED_BLOCKS` long; among several, R joins the one with the longest key, then the most
recently active. Otherwise R starts a new session. One-block keys are too weak to tell a
conversation from a shared system prompt, hence the minimum of two.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.errors import TraceError
from runner.trace.build import (
    Warnings,
    content_scope,
    fit_hash_ids,
    trace_error_from_validation,
)
from runner.trace.jsontext import iter_json_lines
from runner.trace.limits import MAX_SECONDS, MAX_TOKENS
from runner.trace.model import Session, Trace, TraceFormat, Tree, Turn
from runner.trace.timing import nominal_duration_s

__all__ = ["MIN_SHARED_BLOCKS", "MOONCAKE_BLOCK_SIZE", "load_mooncake"]

MOONCAKE_BLOCK_SIZE = 512  # tokens per hash id in Mooncake's release traces
MIN_SHARED_BLOCKS = 2


class MooncakeRow(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)
    timestamp: float = Field(ge=0, le=MAX_SECONDS * 1000, description="ms since the trace start")
    input_length: int = Field(ge=1, le=MAX_TOKENS)
    output_length: int = Field(ge=0, le=MAX_TOKENS)
    hash_ids: list[int] = Field(default_factory=list)


def load_mooncake(text: str, *, source: str, block_size: int = MOONCAKE_BLOCK_SIZE) -> Trace:
    warnings = Warnings()
    rows: list[tuple[int, MooncakeRow]] = []
    for line, obj in iter_json_lines(text, source=source):
        try:
            rows.append((line, MooncakeRow.model_validate(obj)))
        except ValidationError as exc:
            raise trace_error_from_validation(
                exc, source=source, line=line, fix="see the Mooncake format in docs/traces.md"
            ) from None
    if not rows:
        raise TraceError("the file holds no requests", source=source, fix="one request per line")
    rows.sort(key=lambda lr: lr[1].timestamp)

    sessions = _derive_sessions(rows, block_size=block_size)
    trees = tuple(
        _tree(f"mooncake-{n}", rows_, block_size=block_size, warnings=warnings)
        for n, rows_ in enumerate(sessions)
    )
    return Trace(
        format=TraceFormat.MOONCAKE,
        source=source,
        trees=trees,
        meta={"hash_scope": content_scope(text), **warnings.meta()},
    )


def _derive_sessions(
    rows: list[tuple[int, MooncakeRow]], *, block_size: int
) -> list[list[tuple[int, MooncakeRow]]]:
    """The session rule of the module docstring, in time linear in the rows' hash ids."""
    sessions: list[list[tuple[int, MooncakeRow]]] = []
    key_of: list[tuple[int, ...]] = []  # per session: its latest request's full-block prefix
    key_hash_of: list[int] = []  # per session: the rolling hash of that key
    # (key length, rolling hash of the key) → sessions whose latest request has that key, in
    # the order they became active (a dict as an ordered set: O(1) removal, newest last).
    # Rolling hashes make each lookup O(1) instead of slicing and hashing every prefix.
    open_keys: dict[tuple[int, int], dict[int, None]] = {}
    for line, row in rows:
        ids = tuple(row.hash_ids)
        prefix = _prefix_hashes(ids)
        chosen: int | None = None
        # Longest key first; a key must be a proper prefix, so at most len(ids) - 1 long.
        for k in range(len(ids) - 1, MIN_SHARED_BLOCKS - 1, -1):
            candidates = open_keys.get((k, prefix[k]))
            if candidates:
                # Most recently active first; the comparison guards against hash collisions.
                chosen = next((s for s in reversed(candidates) if key_of[s] == ids[:k]), None)
                if chosen is not None:
                    break
        if chosen is None:
            chosen = len(sessions)
            sessions.append([])
            key_of.append(())
            key_hash_of.append(0)
        else:
            old = (len(key_of[chosen]), key_hash_of[chosen])
            del open_keys[old][chosen]
            if not open_keys[old]:
                del open_keys[old]
        sessions[chosen].append((line, row))
        full = min(len(ids), row.input_length // block_size)
        key_of[chosen] = ids[:full]
        key_hash_of[chosen] = prefix[full]
        if full >= MIN_SHARED_BLOCKS:
            open_keys.setdefault((full, prefix[full]), {})[chosen] = None
    return sessions


def _prefix_hashes(ids: tuple[int, ...]) -> list[int]:
    """Rolling hashes of every prefix of `ids`: [h(()), h(ids[:1]), ..., h(ids)]."""
    h = 0
    return [0, *[(h := hash((h, x))) for x in ids]]


def _tree(
    session_id: str, rows: list[tuple[int, MooncakeRow]], *, block_size: int, warnings: Warnings
) -> Tree:
    turns: list[Turn] = []
    prev_end = 0.0
    for index, (line, row) in enumerate(rows):
        hash_ids, cut = fit_hash_ids(row.hash_ids, row.input_length, block_size)
        if cut:
            warnings.add(f"line {line}: more hash ids than {row.input_length} tokens fill")
        output = row.output_length
        if output < 1:
            warnings.add(f"line {line}: output_length 0, replayed as 1")
            output = 1
        t_s = row.timestamp / 1000.0
        duration = nominal_duration_s(row.input_length, output)
        # Turn 0: its arrival offset from the trace start (every tree starts there).
        delay = t_s if index == 0 else round(max(0.0, t_s - prev_end), 6)
        turns.append(
            Turn(
                index=index,
                input_tokens=row.input_length,
                output_tokens=output,
                hash_ids=hash_ids,
                delay_s=delay,
                t_s=t_s,
                duration_s=duration,
            )
        )
        prev_end = t_s + duration
    session = Session(id=session_id, turns=tuple(turns))
    return Tree(
        id=session_id,
        root_id=session_id,
        sessions={session_id: session},
        block_size=block_size,
        timestamped=True,
    )
