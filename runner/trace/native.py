"""The native trace format: one agent tree per JSON line, everything the model holds.

Owns the pydantic schema of a native line (published as docs/native-trace.schema.json), its
loader and its writer (`dump_native` round-trips any Trace). A line is a tree; its first
session is the root; parents and depths follow from the branches that name children. Times
are given on every turn or on none (then laid out nominally). It never guesses formats.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

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
from runner.trace.jsontext import iter_json_lines
from runner.trace.limits import MAX_BLOCK_SIZE, MAX_SECONDS, MAX_TOKENS, shown
from runner.trace.model import Branch, BranchMode, Trace, TraceFormat, Tree, Turn
from runner.trace.timing import with_nominal_times
from runner.trace.tokens import message_problem

__all__ = ["NativeTree", "dump_native", "load_native", "native_json_schema"]

_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


class NativeBranch(BaseModel):
    """Children started when the declaring turn completes."""

    model_config = _STRICT

    mode: Literal["fork", "spawn"] = Field(
        description="fork: the child inherits this session's context; spawn: fresh context"
    )
    children: list[TraceId] = Field(min_length=1, description="ids of child sessions in this line")
    join_turn: int | None = Field(
        default=None,
        ge=1,
        description="index of this session's turn that waits for the children (strict joins); "
        "null: nobody waits",
    )
    on_issue: bool = Field(
        default=False,
        description="the children start when the declaring turn is issued, alongside it, "
        "instead of when it completes (aiperf's pre_session_spawns)",
    )


class NativeTurn(BaseModel):
    """One request. Token counts cover the whole prompt, history included."""

    model_config = _STRICT

    input_tokens: int = Field(ge=1, le=MAX_TOKENS, description="prompt tokens of the whole request")
    output_tokens: int = Field(ge=1, le=MAX_TOKENS, description="tokens to generate (max_tokens)")
    hash_ids: list[int] = Field(
        default_factory=list,
        description="ids of the prompt's blocks of block_size tokens, from the start; equal ids "
        "at equal positions are equal prefixes",
    )
    delay_s: float = Field(
        default=0.0,
        ge=0,
        le=MAX_SECONDS,
        description="end-to-start gap before this turn (turn 0 of a child: after the parent's "
        "declaring turn ends; turn 0 of the root: offset from the tree's start)",
    )
    t_s: float | None = Field(
        default=None,
        ge=0,
        le=MAX_SECONDS,
        description="recorded start offset from the tree's start",
    )
    duration_s: float | None = Field(
        default=None, ge=0, le=MAX_SECONDS, description="recorded request duration"
    )
    branches: list[NativeBranch] = Field(default_factory=list)
    messages: list[dict[str, Any]] | None = Field(
        default=None, description="literal chat messages this turn adds (deltas)"
    )
    extra_body: dict[str, Any] | None = Field(
        default=None, description="extra request-body keys, merged at the top level"
    )
    model: str | None = None

    @field_validator("messages")
    @classmethod
    def _chat_messages(cls, messages: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        # What the mock (and vLLM) would refuse is refused here, not mid-replay.
        for i, message in enumerate(messages or ()):
            problem = message_problem(message)
            if problem is not None:
                raise ValueError(f"message {i}{problem}")
        return messages


class NativeSession(BaseModel):
    model_config = _STRICT

    id: TraceId
    subagent_type: str | None = None
    turns: list[NativeTurn] = Field(min_length=1)


class NativeTree(BaseModel):
    """One line of a native trace: an agent tree whose first session is the root."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        allow_inf_nan=False,
        title="aiperf-web native trace line",
        json_schema_extra={
            "description": "One JSON object per line. Each line is one agent tree; its first "
            "session is the root and every other session is named as a child by exactly one "
            "branch. t_s/duration_s are given on every turn or on none."
        },
    )

    version: Literal[1] = 1
    tree_id: TraceId
    block_size: int = Field(
        default=64, gt=0, le=MAX_BLOCK_SIZE, description="tokens per hash-id block"
    )
    timestamped: bool = Field(
        default=False, description="t_s/duration_s were recorded, not estimated"
    )
    sessions: list[NativeSession] = Field(min_length=1)


def native_json_schema() -> dict[str, Any]:
    """The JSON Schema of one native line (docs/native-trace.schema.json)."""
    schema = NativeTree.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://aiperf-web/schemas/native-trace.schema.json"
    return schema


def load_native(text: str, *, source: str) -> Trace:
    warnings = Warnings()
    trees: list[Tree] = []
    seen: dict[str, int] = {}
    for line, obj in iter_json_lines(text, source=source):
        try:
            doc = NativeTree.model_validate(obj)
        except ValidationError as exc:
            raise trace_error_from_validation(exc, source=source, line=line) from None
        if doc.tree_id in seen:
            raise TraceError(
                f"duplicate tree id {shown(doc.tree_id)} (first on line {seen[doc.tree_id]})",
                source=source,
                line=line,
                path="tree_id",
                fix="give every tree a unique id",
            )
        seen[doc.tree_id] = line
        trees.append(_tree_from_line(doc, source=source, line=line, warnings=warnings))
    if not trees:
        raise TraceError("the file holds no trees", source=source, fix="one JSON tree per line")
    return Trace(
        format=TraceFormat.NATIVE,
        source=source,
        trees=tuple(trees),
        meta={"hash_scope": content_scope(text), **warnings.meta()},
    )


def _tree_from_line(doc: NativeTree, *, source: str, line: int, warnings: Warnings) -> Tree:
    timed = [t.t_s is not None and t.duration_s is not None for s in doc.sessions for t in s.turns]
    if any(timed) and not all(timed):
        si, ti = next(
            (si, ti)
            for si, s in enumerate(doc.sessions)
            for ti, t in enumerate(s.turns)
            if t.t_s is None or t.duration_s is None
        )
        raise TraceError(
            "some turns have t_s and duration_s and this one lacks them",
            source=source,
            line=line,
            path=f"sessions[{si}].turns[{ti}]",
            fix="give t_s and duration_s on every turn of the tree, or on none",
        )
    if doc.timestamped and not all(timed):
        raise TraceError(
            "timestamped is true but the turns carry no t_s/duration_s",
            source=source,
            line=line,
            path="timestamped",
            fix="add t_s and duration_s to every turn, or set timestamped to false",
        )
    drafts: list[SessionDraft] = []
    for si, s in enumerate(doc.sessions):
        turns: list[Turn] = []
        for ti, t in enumerate(s.turns):
            hash_ids, cut = fit_hash_ids(t.hash_ids, t.input_tokens, doc.block_size)
            if cut:
                warnings.add(
                    f"line {line} sessions[{si}].turns[{ti}]: more hash ids than "
                    f"{t.input_tokens} tokens fill; extra ids dropped"
                )
            turns.append(
                Turn(
                    index=ti,
                    input_tokens=t.input_tokens,
                    output_tokens=t.output_tokens,
                    hash_ids=hash_ids,
                    delay_s=t.delay_s,
                    t_s=t.t_s or 0.0,
                    duration_s=t.duration_s or 0.0,
                    branches=tuple(
                        Branch(
                            mode=BranchMode(b.mode),
                            children=tuple(b.children),
                            join_turn=b.join_turn,
                            on_issue=b.on_issue,
                        )
                        for b in t.branches
                    ),
                    messages=tuple(t.messages) if t.messages is not None else None,
                    extra_body=t.extra_body,
                    model=t.model,
                )
            )
        drafts.append(
            SessionDraft(
                id=s.id,
                turns=turns,
                subagent_type=s.subagent_type,
                line=line,
                path=f"sessions[{si}]",
            )
        )
    (tree,) = assemble_trees(
        drafts,
        source=source,
        block_size=doc.block_size,
        timestamped=doc.timestamped,
        root_ids=[doc.sessions[0].id],
        tree_ids={doc.sessions[0].id: doc.tree_id},
    )
    if not all(timed):
        tree = with_nominal_times(tree)
    return tree


def _turn_json(turn: Turn) -> dict[str, Any]:
    out: dict[str, Any] = {
        "input_tokens": turn.input_tokens,
        "output_tokens": turn.output_tokens,
    }
    if turn.hash_ids:
        out["hash_ids"] = list(turn.hash_ids)
    if turn.delay_s:
        out["delay_s"] = turn.delay_s
    out["t_s"] = turn.t_s
    out["duration_s"] = turn.duration_s
    if turn.branches:
        out["branches"] = [
            {"mode": b.mode.value, "children": list(b.children)}
            | ({"join_turn": b.join_turn} if b.join_turn is not None else {})
            | ({"on_issue": True} if b.on_issue else {})
            for b in turn.branches
        ]
    if turn.messages is not None:
        out["messages"] = [dict(m) for m in turn.messages]
    if turn.extra_body is not None:
        out["extra_body"] = dict(turn.extra_body)
    if turn.model is not None:
        out["model"] = turn.model
    return out


def dump_native(trace: Trace) -> str:
    """The trace as native JSON lines (times always written, so loading keeps them)."""
    lines = []
    for tree in trace.trees:
        sessions = [tree.root, *(s for s in tree.sessions.values() if s.id != tree.root_id)]
        doc = {
            "version": 1,
            "tree_id": tree.id,
            "block_size": tree.block_size,
            "timestamped": tree.timestamped,
            "sessions": [
                {"id": s.id}
                | ({"subagent_type": s.subagent_type} if s.subagent_type else {})
                | {"turns": [_turn_json(t) for t in s.turns]}
                for s in sessions
            ],
        }
        lines.append(json.dumps(doc, separators=(",", ":")))
    return "\n".join(lines) + "\n"
