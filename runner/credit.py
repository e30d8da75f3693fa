"""The credit: permission to send one turn, carrying the identity every core routes on.

The replay scheduler issues credits; the sticky router, client workers, affinity emitters and
metrics read them. Issue-time finality stamps are decided once by the scheduler and never
recomputed downstream.
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.trace.model import BranchMode, Tree, Turn

__all__ = ["Credit"]

_FORK = BranchMode.FORK  # enum member lookups are slow on hot paths


@dataclass(frozen=True, slots=True)
class Credit:
    id: int
    session_id: str  # x_correlation_id: unique per replayed session instance
    root_id: str  # the tree instance's root session id (own id for a root)
    turn_index: int
    num_turns: int
    parent_id: str | None = None  # immediate parent's session id; None for roots
    branch_mode: BranchMode | None = None  # None for roots
    depth: int = 0
    has_forks: bool = False  # the turn declares >= 1 FORK branch
    has_branches: bool = False  # the turn declares any branch, FORK or SPAWN
    is_parent_final: bool | None = None  # parent already issued its final turn (parent = root only)
    is_tree_final: bool = False  # provably the last request of its whole tree
    # Run time the scheduler issued it at, and the instant it was due (by the replay's timing
    # mode). Drivers measure the schedule lag as their actual send time minus `due_s`.
    issued_at_s: float = 0.0
    due_s: float = 0.0
    warmup: bool = False
    # A priming request (replay from t*): the stream's last turn before t*, sent once with a
    # one-token answer to warm caches, affinity and sticky entries; never measured.
    priming: bool = False
    lane: int = 0
    template_id: str = ""  # the trace session this instance replays
    turn: Turn | None = None
    tree: Tree | None = None  # the trace tree this instance replays (literal-message prompts)

    @property
    def is_final_turn(self) -> bool:
        return self.turn_index == self.num_turns - 1

    @property
    def is_fork_child(self) -> bool:
        return self.parent_id is not None and self.branch_mode is _FORK
