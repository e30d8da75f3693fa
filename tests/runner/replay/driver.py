"""A minimal deterministic driver for scheduler tests: every request takes `latency_s`."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from runner.credit import Credit
from runner.replay.scheduler import ReplayConfig, ReplayScheduler
from runner.trace.model import Tree


@dataclass
class Recorder:
    forks: list[tuple[str, str]] = field(default_factory=list)
    ended: list[tuple[str, bool]] = field(default_factory=list)
    trees: list[str] = field(default_factory=list)

    def fork_child_spawned(self, parent_id: str, child_id: str) -> None:
        self.forks.append((parent_id, child_id))

    def session_ended(self, session_id: str, *, parent_id: str | None, completed: bool) -> None:
        self.ended.append((session_id, completed))

    def tree_ended(self, root_id: str, *, drained: bool) -> None:
        self.trees.append(root_id)


def run(
    trees: list[Tree],
    config: ReplayConfig,
    *,
    latency_s: float = 1.0,
    latency_of: dict[str, float] | None = None,
) -> tuple[list[Credit], ReplayScheduler, Recorder]:
    """Replay to the end; returns every credit in issue order."""
    scheduler = ReplayScheduler(trees, config)
    recorder = Recorder()
    scheduler.start(0.0, recorder)
    issued: list[Credit] = []
    done: list[tuple[float, int, Credit]] = []
    while True:
        due = scheduler.next_due()
        end = done[0][0] if done else None
        if due is None and end is None:
            break
        if end is None or (due is not None and due < end):
            assert due is not None
            for credit in scheduler.pop_due(due):
                issued.append(credit)
                lat = latency_s
                if latency_of is not None:
                    lat = latency_of.get(credit.template_id, latency_s)
                heapq.heappush(done, (due + lat, credit.id, credit))
        else:
            now, _, credit = heapq.heappop(done)
            scheduler.on_return(credit, now)
    return issued, scheduler, recorder
