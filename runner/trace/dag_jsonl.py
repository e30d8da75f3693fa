"""Importer for aiperf's `dag_jsonl`: one conversation per line, forks and spawns by id.

Owns the mapping of aiperf's DAG rules onto the tree model (bare spawn ⇒ join on the next
turn, `join_at`, background forks, bare forks only on a final turn, `system` only where a
context starts, `pre_session_spawns` issued alongside turn 0) and the token accounting of
literal message deltas: prompt tokens are counted over the accumulated conversation with a
stand-in reply of `max_tokens` words per earlier turn, and hash ids name full blocks of that
word stream, so a FORK child shares its parent's prefix blocks. Replies are only built when a
later turn needs them, within MAX_DAG_TOTAL_TOKENS. Orchestrator conversations are not
supported.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from runner.errors import TraceError
from runner.trace.build import (
    SessionDraft,
    TraceId,
    assemble_trees,
    content_scope,
    trace_error_from_validation,
)
from runner.trace.jsontext import iter_json_lines
from runner.trace.limits import MAX_DAG_TOTAL_TOKENS, MAX_SECONDS, MAX_TOKENS, shown
from runner.trace.model import Branch, BranchMode, Session, Trace, TraceFormat, Tree, Turn
from runner.trace.prompts import synthesize_reply
from runner.trace.timing import with_nominal_times
from runner.trace.tokens import message_problem, message_words

__all__ = ["DAG_BLOCK_SIZE", "DAG_DEFAULT_OUTPUT_TOKENS", "load_dag_jsonl"]

# Hash-id block size of imported DAG trees (the simulated cluster's default block).
DAG_BLOCK_SIZE = 64
# Output tokens of a turn without `max_tokens` (the server would choose; we must assume).
DAG_DEFAULT_OUTPUT_TOKENS = 128

_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)

# aiperf keys this importer knows but does not replay: named in the error instead of "unknown".
_ORCHESTRATOR_KEYS = (
    "orchestrator",
    "spawns",
    "rounds",
    "think_time_ms",
    "think_time_sigma",
    "think_time_min_ms",
    "think_time_max_ms",
)


class DagFork(BaseModel):
    model_config = _STRICT
    child: TraceId
    background: bool = False


class DagSpawn(BaseModel):
    model_config = _STRICT
    children: list[TraceId] = Field(min_length=1)
    join_at: int | None = Field(default=None, ge=1)


class DagTurn(BaseModel):
    model_config = _STRICT
    messages: list[dict[str, Any]] = Field(min_length=1)
    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS)
    tools: list[Any] | None = None
    extra: dict[str, Any] | None = None
    forks: list[DagFork] = Field(default_factory=list)
    spawns: list[DagSpawn] = Field(default_factory=list)
    delay: float | None = Field(
        default=None, ge=0, le=MAX_SECONDS * 1000, description="ms before this turn"
    )

    @field_validator("messages")
    @classmethod
    def _messages_are_chat_messages(cls, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # What the mock (and vLLM) would refuse is refused here, not mid-replay.
        for i, message in enumerate(messages):
            problem = message_problem(message)
            if problem is not None:
                raise ValueError(f"message {i}{problem}")
        return messages

    @field_validator("forks", mode="before")
    @classmethod
    def _bare_fork(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"child": v} if isinstance(v, str) else v for v in value]
        return value

    @field_validator("spawns", mode="before")
    @classmethod
    def _bare_spawn(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"children": [v]} if isinstance(v, str) else v for v in value]
        return value


class DagConversation(BaseModel):
    model_config = _STRICT
    session_id: TraceId
    turns: list[DagTurn] = Field(min_length=1)
    pre_session_spawns: list[TraceId] = Field(default_factory=list)
    context_mode: Literal["deltas_without_responses"] | None = None


def load_dag_jsonl(text: str, *, source: str) -> Trace:
    drafts: list[SessionDraft] = []
    for line, obj in iter_json_lines(text, source=source):
        unsupported = [k for k in _ORCHESTRATOR_KEYS if k in obj]
        if unsupported:
            raise TraceError(
                f"orchestrator conversations are not supported (key {shown(unsupported[0])})",
                source=source,
                line=line,
                path=unsupported[0],
                fix="declare forks and spawns on turns instead",
            )
        try:
            conv = DagConversation.model_validate(obj)
        except ValidationError as exc:
            raise trace_error_from_validation(exc, source=source, line=line) from None
        drafts.append(_draft(conv, line=line, source=source))
    if not drafts:
        raise TraceError(
            "the file holds no conversations", source=source, fix="one conversation per line"
        )
    lines = {d.id: d.line for d in drafts}
    trees = assemble_trees(drafts, source=source, block_size=DAG_BLOCK_SIZE, timestamped=False)
    counter = _TokenCounter(source=source, lines=lines)
    out = []
    for tree in trees:
        _check_system_messages(tree, source=source, lines=lines)
        out.append(with_nominal_times(counter.with_token_counts(tree)))
    return Trace(
        format=TraceFormat.DAG_JSONL,
        source=source,
        trees=tuple(out),
        meta={"hash_scope": content_scope(text)},
    )


def _draft(conv: DagConversation, *, line: int, source: str) -> SessionDraft:
    n = len(conv.turns)
    turns: list[Turn] = []
    child_paths: dict[tuple[int, int, int], str] = {}
    for ti, t in enumerate(conv.turns):
        branches: list[Branch] = []
        if ti == 0 and conv.pre_session_spawns:
            # aiperf fires these background SPAWN children before turn 0 is sent: a branch
            # started when turn 0 is issued, never joined.
            for c in range(len(conv.pre_session_spawns)):
                child_paths[(ti, len(branches), c)] = f"pre_session_spawns[{c}]"
            branches.append(
                Branch(
                    mode=BranchMode.SPAWN,
                    children=tuple(conv.pre_session_spawns),
                    on_issue=True,
                )
            )
        if t.forks:
            for fi, fork in enumerate(t.forks):
                if not fork.background and ti != n - 1:
                    raise TraceError(
                        f"fork of {shown(fork.child)} is not background, so it ends the parent, "
                        f"but turn {ti} is not the final turn",
                        source=source,
                        line=line,
                        path=f"turns[{ti}].forks[{fi}]",
                        fix='move it to the last turn or set "background": true',
                    )
                child_paths[(ti, len(branches), fi)] = f"turns[{ti}].forks[{fi}]"
            branches.append(Branch(mode=BranchMode.FORK, children=tuple(f.child for f in t.forks)))
        for si, spawn in enumerate(t.spawns):
            if spawn.join_at is not None:
                join: int | None = spawn.join_at
            else:
                join = ti + 1 if ti + 1 < n else None  # bare spawn: the next turn waits
            for c in range(len(spawn.children)):
                child_paths[(ti, len(branches), c)] = f"turns[{ti}].spawns[{si}].children[{c}]"
            branches.append(
                Branch(mode=BranchMode.SPAWN, children=tuple(spawn.children), join_turn=join)
            )
        extra_body: dict[str, Any] | None = None
        if t.tools is not None or t.extra is not None:
            extra_body = ({"tools": t.tools} if t.tools is not None else {}) | (t.extra or {})
        turns.append(
            Turn(
                index=ti,
                input_tokens=0,  # counted over the accumulated history once the tree is known
                output_tokens=t.max_tokens or DAG_DEFAULT_OUTPUT_TOKENS,
                delay_s=(t.delay or 0.0) / 1000.0,
                branches=tuple(branches),
                messages=tuple(t.messages),
                extra_body=extra_body,
                model=t.model,
            )
        )
    return SessionDraft(id=conv.session_id, turns=turns, line=line, child_paths=child_paths)


def _check_system_messages(tree: Tree, *, source: str, lines: dict[str, int | None]) -> None:
    """aiperf's rule: `system` only where a context starts (root or SPAWN child, turn 0)."""
    for session in tree.sessions.values():
        fresh = session.is_root or session.mode is BranchMode.SPAWN
        for turn in session.turns:
            for mi, message in enumerate(turn.messages or ()):
                if message.get("role") == "system" and not (fresh and turn.index == 0):
                    raise TraceError(
                        "a system message is only allowed on turn 0 of a root or SPAWN child",
                        source=source,
                        line=lines[session.id],
                        path=f"turns[{turn.index}].messages[{mi}]",
                        fix="fold it into a user message, or make the session a SPAWN child",
                    )


class _Chain:
    """The accumulated word stream of a conversation, hashed block by block as it grows.

    The stand-in reply of the latest turn is owed, not built: only a later turn (or a FORK
    child) that carries it in its context pays for its words.
    """

    __slots__ = ("digest", "ids", "owed", "pending", "tokens")

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.pending: list[str] = []
        self.digest = b""
        self.tokens = 0
        self.owed: tuple[str, int, int] | None = None  # (session, turn, words) of a reply

    def copy(self) -> _Chain:
        other = _Chain()
        other.ids = list(self.ids)
        other.pending = list(self.pending)
        other.digest = self.digest
        other.tokens = self.tokens
        other.owed = self.owed
        return other

    @property
    def owed_tokens(self) -> int:
        return self.owed[2] if self.owed is not None else 0

    def settle(self, interner: dict[bytes, int]) -> None:
        """Hash the owed reply into the stream."""
        if self.owed is not None:
            session_id, turn_index, words = self.owed
            self.owed = None
            reply = synthesize_reply(
                session_id=session_id, turn_index=turn_index, output_tokens=words
            )
            self.extend(reply.split(), interner)

    def extend(self, words: list[str], interner: dict[bytes, int]) -> None:
        self.tokens += len(words)
        buf = self.pending + words
        start = 0
        while len(buf) - start >= DAG_BLOCK_SIZE:
            block = " ".join(buf[start : start + DAG_BLOCK_SIZE]).encode()
            # Chained: a block's id names it and everything before it, like a prefix cache.
            self.digest = hashlib.blake2b(self.digest + block, digest_size=16).digest()
            self.ids.append(interner.setdefault(self.digest, len(interner) + 1))
            start += DAG_BLOCK_SIZE
        self.pending = buf[start:]


class _TokenCounter:
    """Input tokens and hash ids of every turn of a file's trees, within the limits.

    Each turn's context may hold MAX_TOKENS; all contexts of the file together
    MAX_DAG_TOTAL_TOKENS. Both are checked before a reply is built, so the work stays linear
    in the file and the limits.
    """

    def __init__(self, *, source: str, lines: dict[str, int | None]) -> None:
        self.source = source
        self.lines = lines
        self.interner: dict[bytes, int] = {}  # block digest -> hash id, numbered per file
        self.total_tokens = 0

    def _check(self, session_id: str, turn_index: int, tokens: int) -> None:
        if tokens > MAX_TOKENS:
            problem = (
                f"the context of turn {turn_index} of session {shown(session_id)} reaches "
                f"{tokens:,} tokens, over the {MAX_TOKENS:,} limit"
            )
        elif self.total_tokens + tokens > MAX_DAG_TOTAL_TOKENS:
            problem = (
                f"the accumulated contexts of the file's turns pass {MAX_DAG_TOTAL_TOKENS:,} "
                f"tokens (the limit) at turn {turn_index} of session {shown(session_id)}"
            )
        else:
            return
        raise TraceError(
            problem,
            source=self.source,
            line=self.lines.get(session_id),
            path=f"turns[{turn_index}]",
            fix="lower max_tokens or split the conversations",
        )

    def with_token_counts(self, tree: Tree) -> Tree:
        interner = self.interner
        fork_points: dict[tuple[str, int], _Chain] = {}
        sessions: dict[str, Session] = {}
        for sid, session in tree.sessions.items():  # breadth-first: parents before children
            if session.mode is BranchMode.FORK and session.declaring_turn is not None:
                assert session.parent_id is not None
                chain = fork_points[(session.parent_id, session.declaring_turn)].copy()
            else:
                chain = _Chain()
            turns = []
            for turn in session.turns:
                words = [w for message in turn.messages or () for w in message_words(message)]
                tokens = chain.tokens + chain.owed_tokens + len(words)
                self._check(sid, turn.index, tokens)
                chain.settle(interner)
                chain.extend(words, interner)
                self.total_tokens += chain.tokens
                turns.append(_counted(turn, chain.tokens, tuple(chain.ids)))
                chain.owed = (sid, turn.index, turn.output_tokens)
                if turn.has_forks:
                    # Every FORK child carries this reply: build it once, here.
                    self._check(sid, turn.index, chain.tokens + chain.owed_tokens)
                    chain.settle(interner)
                    fork_points[(sid, turn.index)] = chain.copy()
            sessions[sid] = Session(
                id=session.id,
                turns=tuple(turns),
                parent_id=session.parent_id,
                mode=session.mode,
                depth=session.depth,
                subagent_type=session.subagent_type,
                declaring_turn=session.declaring_turn,
            )
        return Tree(
            id=tree.id,
            root_id=tree.root_id,
            sessions=sessions,
            block_size=tree.block_size,
            timestamped=tree.timestamped,
        )


def _counted(turn: Turn, input_tokens: int, hash_ids: tuple[int, ...]) -> Turn:
    return Turn(
        index=turn.index,
        input_tokens=input_tokens,
        output_tokens=turn.output_tokens,
        hash_ids=hash_ids,
        delay_s=turn.delay_s,
        t_s=turn.t_s,
        duration_s=turn.duration_s,
        branches=turn.branches,
        messages=turn.messages,
        extra_body=turn.extra_body,
        model=turn.model,
    )
