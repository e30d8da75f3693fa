"""Shared loader machinery: session drafts → validated trees, and located error messages.

Owns the structural rules every format obeys (unique session ids, known children, one parent
per session, no cycles, joins inside the parent, non-empty sessions), the depth of every
session, hash-id fitting, and turning pydantic errors into one-line `TraceError`s naming the
file, line and JSON path. It never reads files and knows no format's field names.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from runner.errors import TraceError
from runner.trace.model import BranchMode, Session, Tree, Turn

__all__ = [
    "SessionDraft",
    "Warnings",
    "assemble_trees",
    "content_scope",
    "fit_hash_ids",
    "iter_json_lines",
    "json_path",
    "trace_error_from_validation",
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


def iter_json_lines(text: str, *, source: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line of a JSON-lines text."""
    lines = text.split("\n")
    last = max((i for i, raw in enumerate(lines) if raw.strip()), default=-1)
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            cut = i == last and not text.endswith("\n") and exc.pos >= len(raw.rstrip()) - 1
            raise TraceError(
                f"not valid JSON: {exc.msg} at column {exc.colno}"
                + (" (the line ends early: is the file truncated?)" if cut else ""),
                source=source,
                line=i + 1,
                fix="each line must be one complete JSON object",
            ) from None
        if not isinstance(obj, dict):
            raise TraceError(
                f"expected a JSON object, got {type(obj).__name__}",
                source=source,
                line=i + 1,
                fix="each line must be one JSON object",
            )
        yield i + 1, obj


def json_path(loc: Sequence[int | str]) -> str:
    """('turns', 0, 'max_tokens') → 'turns[0].max_tokens'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
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
    path = json_path(loc)
    if prefix:
        path = f"{prefix}.{path}" if path else prefix
    if kind == "extra_forbidden":
        problem = f"unknown key {loc[-1]!r}" if loc else "unknown key"
        fix = fix or "remove it or check its spelling"
        path = path.rsplit(".", 1)[0] if "." in path else (prefix or "")
    elif kind == "missing":
        problem = f"missing required key {loc[-1]!r}" if loc else "missing required key"
        path = path.rsplit(".", 1)[0] if "." in path else (prefix or "")
    else:
        shown = repr(err.get("input"))
        if len(shown) > 40:
            shown = shown[:37] + "..."
        problem = f"{err['msg'][0].lower()}{err['msg'][1:]} (got {shown})"
    return TraceError(problem, source=source, line=line, path=path or None, fix=fix)


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
    is the number of branch hops from the root.
    """
    by_id: dict[str, SessionDraft] = {}
    for draft in drafts:
        first = by_id.get(draft.id)
        if first is not None:
            where = f" (first defined on line {first.line})" if first.line else ""
            raise TraceError(
                f"duplicate session id {draft.id!r}{where}",
                source=source,
                line=draft.line,
                path=draft.where("id") if draft.path else None,
                fix="give every session a unique id",
            )
        if not draft.turns:
            raise TraceError(
                f"session {draft.id!r} has no turns",
                source=source,
                line=draft.line,
                path=draft.where("turns"),
                fix="give every session at least one turn or remove it",
            )
        by_id[draft.id] = draft

    # child id → (parent id, mode, declaring turn)
    parent_of: dict[str, tuple[str, BranchMode, int]] = {}
    for draft in drafts:
        n = len(draft.turns)
        for turn in draft.turns:
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
                        f"and before the end of session {draft.id!r} ({n} turns)",
                        source=source,
                        line=draft.line,
                        path=draft.where(f"turns[{turn.index}]"),
                        fix="join on a later turn of the same session, or not at all",
                    )
                for c, child in enumerate(branch.children):
                    where = draft.child_path(turn.index, b, c)
                    if child not in by_id:
                        raise TraceError(
                            f"unknown child session {child!r}",
                            source=source,
                            line=draft.line,
                            path=where,
                            fix="define that session or remove the reference",
                        )
                    if child == draft.id:
                        raise TraceError(
                            f"session {child!r} names itself as its child (a cycle)",
                            source=source,
                            line=draft.line,
                            path=where,
                            fix="a session cannot branch into itself",
                        )
                    previous = parent_of.get(child)
                    if previous is not None:
                        other, other_mode, _ = previous
                        if BranchMode.FORK in (other_mode, branch.mode):
                            problem = (
                                f"session {child!r} is the FORK target of two parents "
                                f"({other!r} and {draft.id!r})"
                            )
                        else:
                            problem = (
                                f"session {child!r} has two parents ({other!r} and {draft.id!r})"
                            )
                        raise TraceError(
                            problem,
                            source=source,
                            line=draft.line,
                            path=where,
                            fix="give each parent its own copy of the child under a distinct id",
                        )
                    parent_of[child] = (draft.id, branch.mode, turn.index)

    if root_ids is None:
        roots = [d.id for d in drafts if d.id not in parent_of]
    else:
        roots = list(root_ids)
        for root in roots:
            if root in parent_of:
                parent = parent_of[root][0]
                raise TraceError(
                    f"root session {root!r} is named as a child of {parent!r} (a cycle)",
                    source=source,
                    line=by_id[root].line,
                    path=by_id[root].where("id") if by_id[root].path else None,
                    fix="the root must not be a child of any session",
                )

    depth: dict[str, int] = {}
    trees: list[Tree] = []
    for root in roots:
        order = [root]
        depth[root] = 0
        for sid in order:  # grows while iterating: breadth-first
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
            )
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

    stray = [d for d in drafts if d.id not in depth]
    if stray:
        # Walk up from a stray session: either to a parentless session that is not a root,
        # or round a cycle (every session has at most one parent).
        cycle = [stray[0].id]
        current = stray[0].id
        while current in parent_of:
            current = parent_of[current][0]
            if current in cycle:
                break
            cycle.append(current)
        else:
            draft = by_id[current]
            raise TraceError(
                f"session {draft.id!r} is not reachable from the root {roots[0]!r}",
                source=source,
                line=draft.line,
                path=draft.where("id") if draft.path else None,
                fix="name it as a child in some branch, or move it to its own tree",
            )
        cycle = cycle[cycle.index(current) :]
        loop = " → ".join(reversed([*cycle, current]))
        raise TraceError(
            f"sessions form a cycle: {loop}",
            source=source,
            line=by_id[current].line,
            path=by_id[current].where("id") if by_id[current].path else None,
            fix="break the cycle: a session cannot descend from itself",
        )
    return trees
