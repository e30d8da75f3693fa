"""Where the server put each tree: the placement figures that show affinity working or not.

Fed with the inference worker that served each request (Dynamo's `nvext.worker_id`, the
mock's, or the simulated cluster's), it counts what lineage affinity promises and
conversation affinity does not: trees served whole by one worker, child requests landing on
the worker that served their root, and requests that left the worker their affinity key first
landed on (expected vs serving worker). Pure bookkeeping; state lives while a tree does.

Each snapshot's figures carry their percentages too (`*_pct`, one decimal, None while the
whole is 0): computed here once, so the run page, its live charts, the comparison and the CSV
read them instead of dividing again (`placement_pcts` gives them for a summary stored before).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from runner.credit import Credit

__all__ = ["PLACEMENT_PCTS", "PlacementBook", "PlacementFigures", "placement_pcts"]


class PlacementFigures(TypedDict):
    trees: int  # trees with at least one request whose serving worker is known
    trees_split: int  # ... served by more than one inference worker
    child_requests: int  # requests of subagents (depth >= 1) whose root's worker is known
    child_requests_on_root_worker: int  # ... served where their tree's root was first served
    keyed_requests: int  # requests carrying an affinity key
    key_misses: int  # ... served elsewhere than the worker their key first landed on
    trees_split_pct: float | None  # % of trees
    child_requests_on_root_worker_pct: float | None  # % of child requests
    key_misses_pct: float | None  # % of keyed requests


# percentage -> (part, whole) of the counts
PLACEMENT_PCTS: dict[str, tuple[str, str]] = {
    "trees_split_pct": ("trees_split", "trees"),
    "child_requests_on_root_worker_pct": ("child_requests_on_root_worker", "child_requests"),
    "key_misses_pct": ("key_misses", "keyed_requests"),
}


def _pct(part: object, whole: object) -> float | None:
    if not isinstance(part, int | float) or not isinstance(whole, int | float) or whole <= 0:
        return None
    return round(100.0 * part / whole, 1)


def placement_pcts(counts: Mapping[str, Any] | None) -> dict[str, float | None]:
    """The percentages of the counts (None where the whole is 0 or unknown); figures that
    carry them already (every snapshot since they were added) give theirs."""
    counts = counts or {}
    return {
        name: counts[name] if name in counts else _pct(counts.get(part), counts.get(whole))
        for name, (part, whole) in PLACEMENT_PCTS.items()
    }


class _Tree:
    __slots__ = ("root_worker", "workers")

    def __init__(self) -> None:
        self.root_worker: int | None = None
        self.workers: set[int] = set()


class PlacementBook:
    def __init__(self) -> None:
        self._trees: dict[str, _Tree] = {}
        self._key_worker: dict[str, int] = {}  # affinity key -> the worker it first landed on
        self.trees = 0
        self.trees_split = 0
        self.child_requests = 0
        self.child_requests_on_root_worker = 0
        self.keyed_requests = 0
        self.key_misses = 0

    def served(self, credit: Credit, worker: int, *, key: str | None) -> None:
        """`credit`'s request was served by inference worker `worker`."""
        tree = self._trees.get(credit.root_id)
        if tree is None:
            tree = self._trees[credit.root_id] = _Tree()
            self.trees += 1
        workers = tree.workers
        if worker not in workers:
            workers.add(worker)
            if len(workers) == 2:
                self.trees_split += 1
        if credit.parent_id is None:
            if tree.root_worker is None:
                tree.root_worker = worker
        elif tree.root_worker is not None:  # a rootless lane's children have no root to follow
            self.child_requests += 1
            if worker == tree.root_worker:
                self.child_requests_on_root_worker += 1
        if key is not None:
            self.keyed_requests += 1
            expected = self._key_worker.setdefault(key, worker)
            if worker != expected:
                self.key_misses += 1

    def session_ended(self, session_id: str) -> None:
        """A session's own key (conversation scope) is not sent under again."""
        self._key_worker.pop(session_id, None)

    def tree_ended(self, root_id: str) -> None:
        self._trees.pop(root_id, None)
        self._key_worker.pop(root_id, None)

    @property
    def tracked(self) -> int:
        """Trees and keys held (bounded by live trees and sessions when nothing leaks)."""
        return len(self._trees) + len(self._key_worker)

    def figures(self) -> PlacementFigures | None:
        """None until a serving worker was reported: placement is then unknown, not perfect."""
        if self.trees == 0:
            return None
        return {
            "trees": self.trees,
            "trees_split": self.trees_split,
            "child_requests": self.child_requests,
            "child_requests_on_root_worker": self.child_requests_on_root_worker,
            "keyed_requests": self.keyed_requests,
            "key_misses": self.key_misses,
            "trees_split_pct": _pct(self.trees_split, self.trees),
            "child_requests_on_root_worker_pct": _pct(
                self.child_requests_on_root_worker, self.child_requests
            ),
            "key_misses_pct": _pct(self.key_misses, self.keyed_requests),
        }
