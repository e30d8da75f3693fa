"""Small builders for engine tests: credits and trees written inline, readable at a glance."""

from __future__ import annotations

import itertools
from typing import Any

from runner.credit import Credit
from runner.trace.model import Branch, BranchMode, Session, Tree, Turn

_ids = itertools.count(1)


def credit(
    session: str,
    turn: int = 0,
    of: int = 1,
    *,
    parent: str | None = None,
    root: str | None = None,
    mode: BranchMode | None = None,
    forks: bool = False,
    tree_final: bool = False,
    depth: int | None = None,
) -> Credit:
    """`credit("a", 0, of=3)`: turn 0 of a 3-turn session `a`."""
    if parent is not None and mode is None:
        mode = BranchMode.FORK
    return Credit(
        id=next(_ids),
        session_id=session,
        root_id=root or (session if parent is None else parent),
        turn_index=turn,
        num_turns=of,
        parent_id=parent,
        branch_mode=mode,
        depth=depth if depth is not None else (0 if parent is None else 1),
        has_forks=forks,
        has_branches=forks,
        is_tree_final=tree_final,
    )


def spawn(session: str, turn: int = 0, of: int = 1, *, parent: str, **kw: Any) -> Credit:
    return credit(session, turn, of, parent=parent, mode=BranchMode.SPAWN, **kw)


def fork(session: str, turn: int = 0, of: int = 1, *, parent: str, **kw: Any) -> Credit:
    return credit(session, turn, of, parent=parent, mode=BranchMode.FORK, **kw)


def turns(n: int, *, tokens: int = 100, delay_s: float = 1.0, start_s: float = 0.0) -> list[Turn]:
    """n plain turns, `delay_s` apart end-to-start, each nominally 1 s long."""
    out = []
    t = start_s
    for i in range(n):
        out.append(
            Turn(
                index=i,
                input_tokens=tokens,
                output_tokens=10,
                delay_s=0.0 if i == 0 else delay_s,
                t_s=t,
                duration_s=1.0,
            )
        )
        t += 1.0 + delay_s
    return out


def with_branches(turn: Turn, *branches: Branch) -> Turn:
    return Turn(
        index=turn.index,
        input_tokens=turn.input_tokens,
        output_tokens=turn.output_tokens,
        hash_ids=turn.hash_ids,
        delay_s=turn.delay_s,
        t_s=turn.t_s,
        duration_s=turn.duration_s,
        branches=tuple(branches),
    )


def tree(root: Session, *others: Session, tree_id: str = "T") -> Tree:
    sessions = {s.id: s for s in (root, *others)}
    return Tree(id=tree_id, root_id=root.id, sessions=sessions, timestamped=True)
