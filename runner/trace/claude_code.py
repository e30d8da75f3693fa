"""Importer for Claude Code session traces (kv-cache-tester / WEKA `trace_*.json`).

Owns the reading of one recorded session file into one tree: the main chain of model calls
is the root; each `subagent` entry becomes a SPAWN child declared on the last parent request
that started at or before it, with end-to-start delays, recorded start times, and a join on
the first parent request that starts after the subagent ends (None if it outlives the
parent). Nested subagents follow the same rules one level down. It never invents timing.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.errors import TraceError
from runner.trace.build import (
    SessionDraft,
    TraceId,
    Warnings,
    assemble_trees,
    content_scope,
    fit_hash_ids,
    trace_error_from_validation,
)
from runner.trace.jsontext import parse_json
from runner.trace.limits import MAX_BLOCK_SIZE, MAX_SECONDS, MAX_TOKENS, shown
from runner.trace.model import Branch, BranchMode, Trace, TraceFormat, Turn

__all__ = ["load_claude_code"]

# The files come from another project: unknown keys are tolerated (ignored), types are not.
_LENIENT = ConfigDict(extra="ignore", strict=True, frozen=True, allow_inf_nan=False)


class ModelCall(BaseModel):
    model_config = _LENIENT
    t: float = Field(ge=0, le=MAX_SECONDS, description="s since the (sub)session start")
    type: Literal["n", "s"]
    model: str | None = None
    in_tokens: int = Field(alias="in", ge=0, le=MAX_TOKENS)
    out_tokens: int = Field(alias="out", ge=0, le=MAX_TOKENS)
    hash_ids: list[int] = Field(default_factory=list)
    api_time: float = Field(ge=0, le=MAX_SECONDS)


class Subagent(BaseModel):
    model_config = _LENIENT
    t: float = Field(ge=0, le=MAX_SECONDS)
    type: Literal["subagent"]
    agent_id: TraceId
    subagent_type: str | None = None
    duration_ms: float | None = Field(default=None, ge=0, le=MAX_SECONDS * 1000)
    requests: list[Annotated[ModelCall | Subagent, Field(discriminator="type")]]


class ClaudeCodeTrace(BaseModel):
    model_config = _LENIENT
    id: TraceId
    block_size: int = Field(gt=0, le=MAX_BLOCK_SIZE)
    hash_id_scope: str = "local"
    requests: list[Annotated[ModelCall | Subagent, Field(discriminator="type")]]


def load_claude_code(text: str, *, source: str) -> Trace:
    raw: Any = parse_json(text, source=source)
    try:
        doc = ClaudeCodeTrace.model_validate(raw, by_alias=True)
    except ValidationError as exc:
        raise trace_error_from_validation(
            exc, source=source, line=None, union_tags=frozenset({"n", "s", "subagent"})
        ) from None
    if doc.hash_id_scope != "local":
        raise TraceError(
            f"hash_id_scope {shown(doc.hash_id_scope)} is not supported",
            source=source,
            path="hash_id_scope",
            fix='only "local" (ids scoped to this file) is understood',
        )
    warnings = Warnings()
    drafts: list[SessionDraft] = []
    _chain(
        session_id=doc.id,
        requests=doc.requests,
        offset_s=0.0,
        path="",
        subagent_type=None,
        block_size=doc.block_size,
        drafts=drafts,
        ids=set(),
        warnings=warnings,
        source=source,
    )
    (tree,) = assemble_trees(
        drafts, source=source, block_size=doc.block_size, timestamped=True, root_ids=[doc.id]
    )
    return Trace(
        format=TraceFormat.CLAUDE_CODE,
        source=source,
        trees=(tree,),
        meta={"hash_scope": content_scope(text), "trace_id": doc.id, **warnings.meta()},
    )


def _chain(
    *,
    session_id: str,
    requests: list[ModelCall | Subagent],
    offset_s: float,
    path: str,
    subagent_type: str | None,
    block_size: int,
    drafts: list[SessionDraft],
    ids: set[str],
    warnings: Warnings,
    source: str,
) -> SessionDraft:
    """Append the drafts of one chain and its subagents; return the chain's own draft.

    Turn 0's delay is its start offset (right for a root); a parent overwrites it for a child.
    `ids` holds every session id drafted so far. Recursion follows subagent nesting, which the
    JSON depth limit keeps to a few dozen levels.
    """
    reqs = f"{path}.requests" if path else "requests"
    calls = [(i, r) for i, r in enumerate(requests) if isinstance(r, ModelCall)]
    if not calls:
        raise TraceError(
            f"session {shown(session_id)} has no model requests",
            source=source,
            path=reqs,
            fix="a session needs at least one request of type n or s",
        )
    # Recorded order is start order: a request listed before an earlier one is an impossible
    # timeline (one agent waits for each reply), refused rather than reordered.
    for (_, before), (i, call) in itertools.pairwise(calls):
        if call.t < before.t:
            raise TraceError(
                f"request starts at t={call.t:g} s, before the previous request (t={before.t:g} s)",
                source=source,
                path=f"{reqs}[{i}].t",
                fix="list a session's requests in the order they started",
            )
    starts = [offset_s + r.t for _, r in calls]
    ends = [s + r.api_time for s, (_, r) in zip(starts, calls, strict=True)]
    if session_id in ids:
        raise TraceError(
            f"duplicate session id {shown(session_id)}",
            source=source,
            path=f"{path}.agent_id" if path else "id",
            fix="every subagent needs its own agent_id",
        )
    ids.add(session_id)
    draft = SessionDraft(id=session_id, turns=[], subagent_type=subagent_type, path=path)
    drafts.append(draft)

    # declaring turn → [(child id, join turn)]
    branches: dict[int, list[tuple[str, int | None]]] = {}
    for i, sub in enumerate(requests):
        if not isinstance(sub, Subagent):
            continue
        sub_path = f"{reqs}[{i}]"
        inner = [r for r in sub.requests if isinstance(r, ModelCall)]
        if not inner:
            warnings.add(f"{sub_path}: subagent {shown(sub.agent_id)} has no requests; skipped")
            continue
        sub_start = offset_s + sub.t
        if sub_start < starts[0]:
            raise TraceError(
                f"subagent {shown(sub.agent_id)} starts at t={sub.t:g} s, before the first "
                f"request of its parent (t={calls[0][1].t:g} s) that could declare it",
                source=source,
                path=f"{sub_path}.t",
                fix="a subagent starts during or after the request that launched it",
            )
        # Inner times are relative to the subagent's start; a file whose inner times are
        # already absolute (first inner t at or after the spawn) is read as such.
        relative = min(r.t for r in inner) < sub.t or sub.t == 0
        child = _chain(
            session_id=sub.agent_id,
            requests=sub.requests,
            offset_s=sub_start if relative else offset_s,
            path=sub_path,
            subagent_type=sub.subagent_type,
            block_size=block_size,
            drafts=drafts,
            ids=ids,
            warnings=warnings,
            source=source,
        )
        # Starts are sorted: the last request starting at or before the subagent declares it.
        declaring = max(0, bisect.bisect_right(starts, sub_start) - 1)
        if sub.duration_ms is not None:
            sub_end = sub_start + sub.duration_ms / 1000.0
        else:
            sub_end = max(t.t_s + t.duration_s for t in child.turns)
        # The first later request starting at or after the subagent's end waits for it.
        k = bisect.bisect_left(starts, sub_end, lo=declaring + 1)
        join = k if k < len(starts) else None
        branches.setdefault(declaring, []).append((sub.agent_id, join))
        # The child's first request waits this long after the declaring request ends.
        first = child.turns[0]
        child.turns[0] = dataclasses.replace(first, delay_s=max(0.0, first.t_s - ends[declaring]))

    for k, (i, call) in enumerate(calls):
        hash_ids, cut = fit_hash_ids(call.hash_ids, call.in_tokens, block_size)
        if cut:
            warnings.add(f"{reqs}[{i}]: more hash ids than {call.in_tokens} tokens fill")
        in_tokens, out_tokens = call.in_tokens, call.out_tokens
        if in_tokens < 1 or out_tokens < 1:
            warnings.add(f"{reqs}[{i}]: a zero token count, replayed as 1")
            in_tokens, out_tokens = max(in_tokens, 1), max(out_tokens, 1)
        # End-to-start gap: the agent's think and tool time after the previous reply.
        delay = starts[0] if k == 0 else round(max(0.0, starts[k] - ends[k - 1]), 6)
        grouped: dict[int | None, list[str]] = {}
        for child_id, join in branches.get(k, []):
            grouped.setdefault(join, []).append(child_id)
        draft.turns.append(
            Turn(
                index=k,
                input_tokens=in_tokens,
                output_tokens=out_tokens,
                hash_ids=hash_ids,
                delay_s=delay,
                t_s=starts[k],
                duration_s=call.api_time,
                branches=tuple(
                    Branch(mode=BranchMode.SPAWN, children=tuple(children), join_turn=join)
                    for join, children in grouped.items()
                ),
                model=call.model,
            )
        )
    return draft
