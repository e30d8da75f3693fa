"""Shared loader machinery: session drafts → validated trees, and located error messages.

Owns the structural rules every format obeys (unique session ids, known children, one parent
per session, no cycles, joins inside the parent, non-empty sessions), the depth of every
session, hash-id fitting, and turning pydantic errors into one-line `TraceError`s naming the
file, line and JSON path. It never reads files and knows no format's field names.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import AfterValidator, StringConstraints, ValidationError

from runner.errors import TraceError
from runner.trace.limits import MAX_ID_BYTES, one_line, shown
from runner.trace.model import BranchMode, Session, Tree, Turn

__all__ = [
    "SessionDraft",
    "TraceId",
    "Warnings",
    "assemble_trees",
    "content_scope",
    "fit_hash_ids",
    "json_path",
    "trace_error_from_validation",
]


def _id_within_bytes(value: str) -> str:
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_ID_BYTES:
        raise ValueError(f"an id may hold at most {MAX_ID_BYTES} bytes (UTF-8), this one {size:,}")
    return value


# A session, agent or tree id as a file spells it: 1..MAX_ID_BYTES bytes. The length in
# characters is checked first (in pydantic's core, before any copy), then the UTF-8 bytes.
TraceId = Annotated[
    str,
    StringConstraints(min_length=1, max_length=MAX_ID_BYTES),
    AfterValidator(_id_within_bytes),
]


@dataclass(slots=True)
class SessionDraft:
    """A session as a loader read it, before parents and depths are known."""

    id: str
    turns: list[Turn]
    subagent_type: str | None = None
    line: int | None = None
    path: str = ""  # JSON path of the session within its line or file, for error messages
    # (turn, branch, child) → JSON path of that child reference as the file spells it.
    child_paths: dict[tuple[int, int, int], str] = field(default_factory=dict)

    def where(self, suffix: str) -> str:
        return f"{self.path}.{suffix}" if self.path else suffix

    def child_path(self, turn: int, branch: int, child: int) -> str:
        return self.child_paths.get(
            (turn, branch, child),
            self.where(f"turns[{turn}].branches[{branch}].children[{child}]"),
        )


class Warnings:
    """Tolerated oddities of a loaded file, kept in `Trace.meta["warnings"]` (first 20)."""

    LIMIT = 20

    def __init__(self) -> None:
        self.items: list[str] = []
        self.count = 0

    def add(self, message: str) -> None:
        self.count += 1
        if len(self.items) < self.LIMIT:
            self.items.append(message)

    def meta(self) -> dict[str, Any]:
        if not self.count:
            return {}
        return {"warnings": list(self.items), "warning_count": self.count}


def content_scope(text: str) -> str:
    """`Trace.meta["hash_scope"]` of a file: a digest of its content, not its path.

    Hash ids are scoped to their file; naming the scope by content means every process that
    loads the same trace, from whatever path, synthesizes the same text for the same ids.
    """
    return "sha:" + hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def json_path(loc: Sequence[int | str]) -> str:
    """('turns', 0, 'max_tokens') → 'turns[0].max_tokens'; a key that is not a plain name
    (a file's own keys can hold anything) is shown quoted and shortened."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            name = part if part.isidentifier() and len(part) <= 40 else f"[{shown(part)}]"
            out += f".{name}" if out and not name.startswith("[") else name
    return out


def trace_error_from_validation(
    exc: ValidationError,
    *,
    source: str,
    line: int | None,
    prefix: str = "",
    fix: str | None = None,
    union_tags: frozenset[str] = frozenset(),
) -> TraceError:
    """The first pydantic error as a TraceError with its JSON path.

    `union_tags`: discriminator values pydantic inserts into the location after a list index
    (`requests[0].n.in`); they are not keys of the file, so they are left out.
    """
    err = exc.errors()[0]
    loc: list[int | str] = []
    for part in err["loc"]:
        if isinstance(part, str) and part in union_tags and loc and isinstance(loc[-1], int):
            continue
        loc.append(part)
    kind = err["type"]
    if kind in ("extra_forbidden", "missing") and loc:
        # Located at the object that has (or lacks) the key.
        name = shown(loc[-1])
        problem = (
            f"unknown key {name}" if kind == "extra_forbidden" else f"missing required key {name}"
        )
        if kind == "extra_forbidden":
            fix = fix or "remove it or check its spelling"
        loc = loc[:-1]
    else:
        # pydantic's message may quote the input raw (a tag holding a newline): one line it is.
        msg = one_line(err["msg"], limit=160)
        problem = f"{msg[0].lower()}{msg[1:]} (got {shown(err.get('input'))})"
    path = json_path(loc)
    if prefix:
        path = f"{prefix}.{path}" if path else prefix
    return TraceError(
        problem, source=source, line=line, path=one_line(path) if path else None, fix=fix
    )


def fit_hash_ids(
    hash_ids: Sequence[int], input_tokens: int, block_size: int
) -> tuple[tuple[int, ...], bool]:
    """Hash ids cut to the blocks the prompt can hold: at most ceil(input/block_size).

    A block must hold at least one token; surplus ids (seen in aiperf's own templates) name
    nothing, so they are dropped and the caller records a warning. Returns (ids, was_cut).
    """
    limit = -(-input_tokens // block_size)
    if len(hash_ids) <= limit:
        return tuple(hash_ids), False
    return tuple(hash_ids[:limit]), True


def assemble_trees(
    drafts: Sequence[SessionDraft],
    *,
    source: str,
    block_size: int,
    timestamped: bool,
    root_ids: Sequence[str] | None = None,
    tree_ids: Mapping[str, str] | None = None,
) -> list[Tree]:
    """Validate the drafts' structure and build one Tree per root.

    Roots are `root_ids` when given (every other session must hang below one of them), else
    every session no branch names, in file order. Children inherit their branch's mode; depth
    is the number of branch hops from the root. Linear in sessions plus branches.
    """
    by_id = _index_drafts(drafts, source=source)
    parent_of = _link_children(drafts, by_id, source=source)
    roots = _roots(drafts, by_id, parent_of, root_ids, source=source)
    trees: list[Tree] = []
    reached = 0
    for root in roots:
        sessions = _tree_sessions(root, by_id, parent_of)
        reached += len(sessions)
        tree_id = tree_ids.get(root, root) if tree_ids else root
        trees.append(
            Tree(
                id=tree_id,
                root_id=root,
                sessions=sessions,
                block_size=block_size,
                timestamped=timestamped,
            )
        )
    if reached < len(drafts):
        seen = {sid for tree in trees for sid in tree.sessions}
        stray = next(d for d in drafts if d.id not in seen)
        raise _unreachable_error(stray, by_id, parent_of, roots, source=source)
    return trees


# child id → (parent id, mode, declaring turn)
_ParentOf = dict[str, tuple[str, BranchMode, int]]


def _index_drafts(drafts: Sequence[SessionDraft], *, source: str) -> dict[str, SessionDraft]:
    """Drafts by id; duplicate ids and sessions without turns are errors."""
    by_id: dict[str, SessionDraft] = {}
    for draft in drafts:
        first = by_id.get(draft.id)
        if first is not None:
            where = f" (first defined on line {first.line})" if first.line else ""
            raise TraceError(
                f"duplicate session id {shown(draft.id)}{where}",
                source=source,
                line=draft.line,
                path=draft.where("id") if draft.path else None,
                fix="give every session a unique id",
            )
        if not draft.turns:
            raise TraceError(
                f"session {shown(draft.id)} has no turns",
                source=source,
                line=draft.line,
                path=draft.where("turns"),
                fix="give every session at least one turn or remove it",
            )
        by_id[draft.id] = draft
    return by_id


def _link_children(
    drafts: Sequence[SessionDraft], by_id: Mapping[str, SessionDraft], *, source: str
) -> _ParentOf:
    """Every child's parent, checking delays, join turns, each child reference and the
    timeline: turns start in order, a child no earlier than its declaring turn (untimed
    drafts hold 0 everywhere and pass)."""
    parent_of: _ParentOf = {}
    for draft in drafts:
        n = len(draft.turns)
        for turn in draft.turns:
            if turn.index and turn.t_s < draft.turns[turn.index - 1].t_s:
                raise TraceError(
                    f"turn {turn.index} starts at {turn.t_s:g} s, before turn "
                    f"{turn.index - 1} ({draft.turns[turn.index - 1].t_s:g} s)",
                    source=source,
                    line=draft.line,
                    path=draft.where(f"turns[{turn.index}].t_s"),
                    fix="a session's turns run one after another: list them in time order",
                )
            if turn.delay_s < 0:
                raise TraceError(
                    f"negative delay {turn.delay_s} s",
                    source=source,
                    line=draft.line,
                    path=draft.where(f"turns[{turn.index}]"),
                    fix="delays are end-to-start gaps and must be >= 0",
                )
            for b, branch in enumerate(turn.branches):
                join = branch.join_turn
                if join is not None and not turn.index < join < n:
                    raise TraceError(
                        f"join turn {join} must come after the declaring turn {turn.index} "
                        f"and before the end of session {shown(draft.id)} ({n} turns)",
                        source=source,
                        line=draft.line,
                        path=draft.where(f"turns[{turn.index}]"),
                        fix="join on a later turn of the same session, or not at all",
                    )
                for c, child in enumerate(branch.children):
                    _check_child(
                        draft,
                        child,
                        branch.mode,
                        by_id,
                        parent_of,
                        source=source,
                        where=draft.child_path(turn.index, b, c),
                    )
                    parent_of[child] = (draft.id, branch.mode, turn.index)
                    _check_child_start(draft, turn, by_id[child], source=source)
    return parent_of


def _check_child_start(
    draft: SessionDraft, turn: Turn, child: SessionDraft, *, source: str
) -> None:
    first = child.turns[0]
    if first.t_s < turn.t_s:
        raise TraceError(
            f"session {shown(child.id)} starts at {first.t_s:g} s, before its declaring turn "
            f"{turn.index} of {shown(draft.id)} ({turn.t_s:g} s)",
            source=source,
            line=child.line,
            path=child.where("turns[0].t_s"),
            fix="a child starts when or after the turn that declares it",
        )


def _check_child(
    draft: SessionDraft,
    child: str,
    mode: BranchMode,
    by_id: Mapping[str, SessionDraft],
    parent_of: _ParentOf,
    *,
    source: str,
    where: str,
) -> None:
    if child not in by_id:
        raise TraceError(
            f"unknown child session {shown(child)}",
            source=source,
            line=draft.line,
            path=where,
            fix="define that session or remove the reference",
        )
    if child == draft.id:
        raise TraceError(
            f"session {shown(child)} names itself as its child (a cycle)",
            source=source,
            line=draft.line,
            path=where,
            fix="a session cannot branch into itself",
        )
    previous = parent_of.get(child)
    if previous is not None:
        other, other_mode, _ = previous
        parents = f"({shown(other)} and {shown(draft.id)})"
        if BranchMode.FORK in (other_mode, mode):
            problem = f"session {shown(child)} is the FORK target of two parents {parents}"
        else:
            problem = f"session {shown(child)} has two parents {parents}"
        raise TraceError(
            problem,
            source=source,
            line=draft.line,
            path=where,
            fix="give each parent its own copy of the child under a distinct id",
        )


def _roots(
    drafts: Sequence[SessionDraft],
    by_id: Mapping[str, SessionDraft],
    parent_of: _ParentOf,
    root_ids: Sequence[str] | None,
    *,
    source: str,
) -> list[str]:
    if root_ids is None:
        return [d.id for d in drafts if d.id not in parent_of]
    for root in root_ids:
        if root in parent_of:
            draft = by_id[root]
            raise TraceError(
                f"root session {shown(root)} is named as a child of "
                f"{shown(parent_of[root][0])} (a cycle)",
                source=source,
                line=draft.line,
                path=draft.where("id") if draft.path else None,
                fix="the root must not be a child of any session",
            )
    return list(root_ids)


def _tree_sessions(
    root: str, by_id: Mapping[str, SessionDraft], parent_of: _ParentOf
) -> dict[str, Session]:
    """The sessions below `root`, breadth-first (parents before children), with depths."""
    depth = {root: 0}
    order = [root]
    for sid in order:  # grows while iterating
        for turn in by_id[sid].turns:
            for branch in turn.branches:
                for child in branch.children:
                    depth[child] = depth[sid] + 1
                    order.append(child)
    sessions: dict[str, Session] = {}
    for sid in order:
        draft = by_id[sid]
        link = parent_of.get(sid)
        sessions[sid] = Session(
            id=sid,
            turns=tuple(draft.turns),
            parent_id=link[0] if link else None,
            mode=link[1] if link else None,
            depth=depth[sid],
            subagent_type=draft.subagent_type,
            declaring_turn=link[2] if link else None,
        )
    return sessions


def _unreachable_error(
    stray: SessionDraft,
    by_id: Mapping[str, SessionDraft],
    parent_of: _ParentOf,
    roots: Sequence[str],
    *,
    source: str,
) -> TraceError:
    """Walk up from a session no root reaches: either to a parentless session that is not a
    root, or round a cycle (every session has at most one parent)."""
    chain = [stray.id]
    on_chain = {stray.id}
    current = stray.id
    while current in parent_of:
        current = parent_of[current][0]
        if current in on_chain:
            break
        chain.append(current)
        on_chain.add(current)
    else:
        draft = by_id[current]
        root = shown(roots[0]) if roots else "(none)"
        return TraceError(
            f"session {shown(draft.id)} is not reachable from the root {root}",
            source=source,
            line=draft.line,
            path=draft.where("id") if draft.path else None,
            fix="name it as a child in some branch, or move it to its own tree",
        )
    cycle = chain[chain.index(current) :]
    names = [shown(sid) for sid in reversed([*cycle, current])]
    if len(names) > 8:
        names = [*names[:4], "...", *names[-3:]]
    draft = by_id[current]
    return TraceError(
        f"sessions form a cycle: {' → '.join(names)}",
        source=source,
        line=draft.line,
        path=draft.where("id") if draft.path else None,
        fix="break the cycle: a session cannot descend from itself",
    )
