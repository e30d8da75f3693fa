"""The agent-tree model every trace format is loaded into.

Owns the immutable shape of a trace: trees of sessions, sessions of turns, the FORK/SPAWN
branches a turn declares and the joins that may gate a later turn. Loaders build it once and
validate it; the replay scheduler only reads it. Nothing here knows about clocks, workers or
HTTP.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Branch",
    "BranchMode",
    "Session",
    "Trace",
    "TraceFormat",
    "Tree",
    "Turn",
]


class BranchMode(enum.Enum):
    """How a child session relates to its parent's context."""

    FORK = "fork"  # inherits the parent's accumulated context (shares its prompt prefix)
    SPAWN = "spawn"  # starts with a fresh context of its own


class TraceFormat(enum.Enum):
    NATIVE = "native"
    DAG_JSONL = "dag_jsonl"
    CLAUDE_CODE = "claude_code"
    MOONCAKE = "mooncake"
    AZURE_CSV = "azure_csv"
    SYNTHETIC = "synthetic"


# Enum member lookups cost several plain attribute loads; hot paths use these aliases.
_FORK = BranchMode.FORK


@dataclass(frozen=True, slots=True)
class Branch:
    """Children started when the declaring turn completes (or, `on_issue`, when it is sent).

    `join_turn` is the parent's turn index that waits for every child of this branch under
    strict joins (None: background, nobody waits). Under recorded joins it is ignored and the
    parent keeps its own clock. `on_issue`: the children start when the declaring turn is
    issued, alongside it, instead of when it completes (aiperf's `pre_session_spawns`, which
    fire before a session's turn 0); their turn-0 delay then runs from that issue.
    """

    mode: BranchMode
    children: tuple[str, ...]
    join_turn: int | None = None
    on_issue: bool = False


@dataclass(frozen=True, slots=True)
class Turn:
    """One request of a session.

    Token counts are of the *whole* prompt this request sends (history included), and
    `hash_ids` name its prompt blocks of `Tree.block_size` tokens from the start: equal ids at
    equal positions are equal prefixes. A prompt longer than the blocks cover has an unhashed
    tail; a shorter one ends in a partial last block.

    Timing: `delay_s` is the end-to-start gap before this turn (for turn 0 of a child, the gap
    after the parent's declaring turn ends; for turn 0 of a root, the offset from the tree's
    start). `t_s` is the recorded (or, without timestamps, nominal) start offset from the tree's
    start and `duration_s` the recorded (or nominal) request duration; both only place a replay
    start instant t* inside the tree.
    """

    index: int
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()
    delay_s: float = 0.0
    t_s: float = 0.0
    duration_s: float = 0.0
    branches: tuple[Branch, ...] = ()
    # Literal chat messages added by this turn (dag_jsonl / native); None: synthesize from hash_ids.
    messages: tuple[Mapping[str, Any], ...] | None = None
    # Extra request-body keys the trace carries (e.g. an `nvext` to merge into).
    extra_body: Mapping[str, Any] | None = None
    model: str | None = None

    @property
    def spawns_on_issue(self) -> bool:
        """Some branch starts its children when this turn is sent."""
        for branch in self.branches:  # noqa: SIM110 (a loop, not any(): no generator on a hot path)
            if branch.on_issue:
                return True
        return False

    @property
    def spawns_on_return(self) -> bool:
        """Some branch starts its children when this turn returns (the usual case)."""
        for branch in self.branches:  # noqa: SIM110
            if not branch.on_issue:
                return True
        return False

    @property
    def has_forks(self) -> bool:
        for branch in self.branches:  # noqa: SIM110 (a loop, not any(): no generator on a hot path)
            if branch.mode is _FORK:
                return True
        return False

    @property
    def has_branches(self) -> bool:
        return bool(self.branches)


@dataclass(frozen=True, slots=True)
class Session:
    """One conversation template: a root (no parent) or a FORK/SPAWN child."""

    id: str
    turns: tuple[Turn, ...]
    parent_id: str | None = None
    mode: BranchMode | None = None  # None for the root
    depth: int = 0
    subagent_type: str | None = None
    # The parent's turn whose branch names this session (None for the root): found in O(1)
    # where a history is rebuilt per request, even under a branch of thousands of children.
    declaring_turn: int | None = None

    @property
    def is_root(self) -> bool:
        return self.parent_id is None


@dataclass(frozen=True, slots=True)
class Tree:
    """A root session and all its descendants, with the block size of its hash ids."""

    id: str
    root_id: str
    sessions: Mapping[str, Session]
    block_size: int = 64
    timestamped: bool = False  # t_s / duration_s were recorded, not estimated

    @property
    def root(self) -> Session:
        return self.sessions[self.root_id]

    @property
    def span_s(self) -> float:
        """Recorded (or nominal) time from the tree's start to the end of its last request."""
        return max(
            (t.t_s + t.duration_s for s in self.sessions.values() for t in s.turns),
            default=0.0,
        )

    @property
    def requests(self) -> int:
        return sum(len(s.turns) for s in self.sessions.values())

    def children_of(self, session_id: str) -> Iterator[tuple[Turn, Branch, str]]:
        for turn in self.sessions[session_id].turns:
            for branch in turn.branches:
                for child in branch.children:
                    yield turn, branch, child


@dataclass(frozen=True, slots=True)
class Trace:
    """A loaded trace: its format, where it came from, and its trees."""

    format: TraceFormat
    source: str
    trees: tuple[Tree, ...]
    meta: Mapping[str, Any] = field(default_factory=dict)
