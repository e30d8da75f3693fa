"""Agentic replay scheduling: lanes that replay agent trees and issue credits when they are due.

Owns lanes, tree instances, per-session progress, strict-join gates, the replay start instant
t*, stop conditions, and the issue-time finality stamps of PRODUCT.md §4.2. A clock-free core:
the driver (virtual-time simulator or wall-clock live replay) asks when the next credit is due,
pops due credits, and reports returns. It never routes, sends or sleeps.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from runner.credit import Credit
from runner.errors import SpecError
from runner.trace.model import BranchMode, Session, Tree

__all__ = ["ReplayConfig", "ReplayObserver", "ReplayScheduler"]

Joins = Literal["recorded", "strict"]
_FORK = BranchMode.FORK  # enum member lookups are slow on hot paths


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayConfig:
    concurrency: int = 16  # lanes, each replaying one tree at a time
    duration_s: float | None = None  # stop issuing at this run time
    max_requests: int | None = None  # stop issuing after this many credits
    max_trees: int | None = None  # stop starting trees after this many
    # Fractions of a tree's span where a lane's first tree may start (t*); (0, 0) replays from
    # the beginning. Later trees on a lane always replay from their first turn.
    start_window: tuple[float, float] = (0.0, 0.0)
    joins: Joins = "recorded"
    speedup: float = 1.0  # divides every recorded delay
    warmup_s: float = 0.0  # credits issued before this run time are warmup (not measured)
    # Replaying from t*: first send each live stream's last turn before t* (one-token answer,
    # not measured) so caches, bindings and sticky entries are warm when measurement starts.
    prime: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        lo, hi = self.start_window
        if self.concurrency < 1:
            raise SpecError(f"concurrency must be >= 1, got {self.concurrency}")
        if not 0.0 <= lo <= hi <= 1.0:
            raise SpecError(f"start window {lo}:{hi} is invalid: use LO:HI with 0 <= LO <= HI <= 1")
        if self.speedup <= 0:
            raise SpecError(f"speedup must be > 0, got {self.speedup}")
        if self.duration_s is not None and self.duration_s <= 0:
            raise SpecError(f"duration must be > 0 s, got {self.duration_s}")
        if self.max_requests is not None and self.max_requests < 1:
            raise SpecError(f"request count must be >= 1, got {self.max_requests}")
        if self.joins not in ("recorded", "strict"):
            raise SpecError(f"joins must be 'recorded' or 'strict', got {self.joins!r}")


class ReplayObserver(Protocol):
    """Lifecycle hooks the engine wires to the router, session caches and affinity books."""

    def fork_child_spawned(self, parent_id: str, child_id: str) -> None: ...

    def session_ended(self, session_id: str, *, parent_id: str | None, completed: bool) -> None:
        """`completed`: its final turn returned; otherwise it stopped early or was cut."""

    def tree_ended(self, root_id: str, *, drained: bool) -> None: ...


@dataclass(slots=True, eq=False)
class _TreeRun:
    tree: Tree
    lane: int
    root_id: str
    prefix: str
    root_pending: bool = True  # the root has not returned its final turn
    outstanding: int = 0  # descendants live or registered, at any depth
    sessions: dict[str, _Live] = field(default_factory=dict)
    # Strict joins: (parent instance id, gated turn index) -> children still running.
    gates: dict[tuple[str, int], int] = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class _Live:
    sid: str
    template: Session
    run: _TreeRun
    parent_id: str | None
    next_turn: int = 0
    started: bool = False
    waiting_gate: int | None = None  # a turn index held back by a strict join
    resume_s: float = 0.0  # when a primed stream's first turn after t* is due
    join_key: tuple[str, int] | None = None  # the gate this child releases when it ends
    done: bool = False


class ReplayScheduler:
    """Issues credits for `concurrency` lanes replaying the trees of a trace."""

    def __init__(self, trees: Sequence[Tree], config: ReplayConfig) -> None:
        if not trees:
            raise SpecError("the trace has no trees to replay")
        self.config = config
        self._trees = tuple(trees)
        self._rng = random.Random(config.seed)
        self._observer: ReplayObserver | None = None
        # (due, sequence, session, turn index, priming)
        self._heap: list[tuple[float, int, _Live, int, bool]] = []
        self._seq = 0
        self._credit_id = 0
        self._tree_counter = 0
        self._runs: dict[str, _TreeRun] = {}  # root id -> live tree instance
        self._in_flight: dict[int, _Live] = {}
        self._lane_next = list(range(config.concurrency))
        self._extents: dict[int, tuple[float, float]] = {}  # by id() of a tree in _trees
        self.stopped = False
        # Counters for the run summary.
        self.issued = 0
        self.sessions_started = 0
        self.trees_started = 0
        self.trees_completed = 0

    # --------------------------------------------------------------------------- driving

    def start(self, now_s: float, observer: ReplayObserver) -> None:
        self._observer = observer
        lo, hi = self.config.start_window
        for lane in range(self.config.concurrency):
            fraction = self._rng.uniform(lo, hi) if hi > 0 else 0.0
            self._start_tree(lane, now_s, fraction)

    def next_due(self) -> float | None:
        """Run time of the next credit to issue, None when nothing is scheduled."""
        if self.stopped or not self._heap:
            return None
        return self._heap[0][0]

    def pop_due(self, now_s: float) -> list[Credit]:
        """Issue every credit due at or before `now_s`, stamping finality at issue."""
        config = self.config
        heap = self._heap
        credits: list[Credit] = []
        while heap and heap[0][0] <= now_s and not self.stopped:
            due_s, _, live, turn_index, priming = heapq.heappop(heap)
            if config.duration_s is not None and due_s >= config.duration_s:
                self._stop()
                break
            credits.append(self._issue(live, turn_index, due_s, priming))
            if config.max_requests is not None and self.issued >= config.max_requests:
                self._stop()
        return credits

    def on_return(self, credit: Credit, now_s: float, *, session_over: bool = False) -> None:
        """A credit came back. `session_over`: the session cannot go on (worker lost, cancel)."""
        live = self._in_flight.pop(credit.id, None)
        if live is None:
            return
        run = live.run
        if credit.priming and not session_over:
            # Its children were accounted when the tree was split at t*: just resume.
            self._schedule_or_gate(live, live.next_turn, max(now_s, live.resume_s))
            return
        turn = live.template.turns[credit.turn_index]
        # Children are registered before the spawning turn is accounted, so no request of the
        # tree can be stamped tree-final while they are about to start.
        if turn.branches and not self.stopped:
            self._spawn_children(live, credit.turn_index, now_s)
        if credit.is_final_turn or session_over:
            self._end_session(
                live, completed=credit.is_final_turn and not session_over, now_s=now_s
            )
        else:
            self._schedule_turn(live, credit.turn_index + 1, now_s)
        self._maybe_drain(run, now_s)

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    @property
    def finished(self) -> bool:
        """Nothing in flight and nothing more will be issued."""
        return not self._in_flight and (self.stopped or not self._heap)

    def stop(self) -> None:
        """Stop issuing (Ctrl-C, cancel, a failure threshold); in-flight credits still return."""
        self._stop()

    def cut_trees(self) -> int:
        """Trees started but not drained: their remaining requests were never sent."""
        return len(self._runs)

    # -------------------------------------------------------------------------- lanes, t*

    def _start_tree(self, lane: int, now_s: float, fraction: float) -> None:
        config = self.config
        if config.max_trees is not None and self.trees_started >= config.max_trees:
            return
        if config.duration_s is not None and now_s >= config.duration_s:
            return
        template = self._trees[self._lane_next[lane] % len(self._trees)]
        self._lane_next[lane] += config.concurrency  # lanes walk the trace interleaved
        self._tree_counter += 1
        prefix = f"t{self._tree_counter}:"
        root_id = prefix + template.root_id
        run = _TreeRun(template, lane, root_id, prefix)
        self._runs[root_id] = run
        self.trees_started += 1
        root = self._live(run, template.root, parent_id=None)
        # A tree's own clock starts at its first request: arrival traces (Mooncake, Azure)
        # record turn 0 at its offset in the whole trace, and a lane must not idle for it.
        origin_s, span_s = self._extent(template)
        if fraction <= 0.0:
            self._schedule(root, 0, now_s)
        else:
            self._start_mid_tree(run, root, origin_s + fraction * (span_s - origin_s), now_s)
        self._maybe_drain(run, now_s)

    def _start_mid_tree(self, run: _TreeRun, root: _Live, t_star: float, now_s: float) -> None:
        """Split every stream of the tree at t*: what began before it is history, the rest
        resumes at its recorded offset from t*. A root with nothing left makes the lane
        rootless; under strict joins a root waiting on children at t* starts gated."""
        speedup = self.config.speedup
        tree = run.tree
        resumes: list[tuple[_Live, int]] = []
        pending: list[_Live] = [root]
        while pending:
            live = pending.pop()
            turns = live.template.turns
            first = next((i for i, t in enumerate(turns) if t.t_s >= t_star), len(turns))
            # Children declared on turns that already happened were spawned before t*.
            for turn in turns[:first]:
                for branch in turn.branches:
                    for child_id in branch.children:
                        child = self._live(run, tree.sessions[child_id], parent_id=live.sid)
                        pending.append(child)
                        if self.config.joins == "strict" and branch.join_turn is not None:
                            child.join_key = (live.sid, branch.join_turn)
            if first == len(turns):
                if live.parent_id is None:
                    run.root_pending = False  # rootless lane: only descendants remain
                    live.done = True
                else:
                    del run.sessions[live.sid]  # finished before t*: not part of the replay
                continue
            if live.parent_id is not None:
                run.outstanding += 1
                if live.template.mode is _FORK and self._observer is not None:
                    # Spawned before t*: announce it so it can register before it sends.
                    self._observer.fork_child_spawned(live.parent_id, live.sid)
            resumes.append((live, first))
        for live in run.sessions.values():
            if live.join_key is not None and not live.done:
                run.gates[live.join_key] = run.gates.get(live.join_key, 0) + 1
        for live, first in resumes:
            live.next_turn = first
            offset_s = max(0.0, live.template.turns[first].t_s - t_star) / speedup
            if self.config.prime and first > 0:
                live.resume_s = now_s + offset_s
                self._schedule(live, first - 1, now_s, priming=True)
            else:
                self._schedule_or_gate(live, first, now_s + offset_s)

    def _extent(self, tree: Tree) -> tuple[float, float]:
        """(first request start, last request end) on the tree's recorded clock."""
        extent = self._extents.get(id(tree))
        if extent is None:
            origin_s = min(t.t_s for s in tree.sessions.values() for t in s.turns)
            extent = self._extents[id(tree)] = (origin_s, tree.span_s)
        return extent

    def _live(self, run: _TreeRun, template: Session, *, parent_id: str | None) -> _Live:
        sid = run.prefix + template.id
        live = _Live(sid, template, run, parent_id)
        run.sessions[sid] = live
        return live

    # --------------------------------------------------------------------------- issuing

    def _issue(self, live: _Live, turn_index: int, due_s: float, priming: bool) -> Credit:
        run = live.run
        template = live.template
        turn = template.turns[turn_index]
        num_turns = len(template.turns)
        is_final = turn_index == num_turns - 1
        is_root = live.parent_id is None
        # Issue-time finality (PRODUCT.md §4.2): only a final turn that declares no branches
        # can be last; a root's iff no descendant is outstanding; a descendant's iff the root
        # has finished and it is the only outstanding descendant.
        if not is_final or turn.branches:
            tree_final = False
        elif is_root:
            tree_final = run.outstanding == 0
        else:
            tree_final = not run.root_pending and run.outstanding == 1
        parent_final: bool | None = None
        if live.parent_id is not None and live.parent_id == run.root_id:
            parent_final = not run.root_pending
        if not live.started:
            live.started = True
            self.sessions_started += 1
        self._credit_id += 1
        self.issued += 1
        credit = Credit(
            id=self._credit_id,
            session_id=live.sid,
            root_id=run.root_id,
            turn_index=turn_index,
            num_turns=num_turns,
            parent_id=live.parent_id,
            branch_mode=template.mode,
            depth=template.depth,
            has_forks=turn.has_forks,
            has_branches=bool(turn.branches),
            is_parent_final=parent_final,
            is_tree_final=tree_final,
            issued_at_s=due_s,
            warmup=priming or due_s < self.config.warmup_s,
            priming=priming,
            lane=run.lane,
            template_id=template.id,
            turn=turn,
            tree=run.tree,
        )
        self._in_flight[credit.id] = live
        return credit

    def _schedule(
        self, live: _Live, turn_index: int, due_s: float, *, priming: bool = False
    ) -> None:
        if self.stopped:
            return
        self._seq += 1
        heapq.heappush(self._heap, (due_s, self._seq, live, turn_index, priming))

    def _schedule_or_gate(self, live: _Live, turn_index: int, due_s: float) -> None:
        if self.config.joins == "strict" and live.run.gates.get((live.sid, turn_index)):
            live.waiting_gate = turn_index
            return
        self._schedule(live, turn_index, due_s)

    def _schedule_turn(self, live: _Live, turn_index: int, now_s: float) -> None:
        live.next_turn = turn_index
        delay_s = live.template.turns[turn_index].delay_s / self.config.speedup
        self._schedule_or_gate(live, turn_index, now_s + delay_s)

    # ------------------------------------------------------------------------- lifecycle

    def _spawn_children(self, parent: _Live, turn_index: int, now_s: float) -> None:
        run = parent.run
        tree = run.tree
        strict = self.config.joins == "strict"
        observer = self._observer
        for branch in parent.template.turns[turn_index].branches:
            for child_id in branch.children:
                child = self._live(run, tree.sessions[child_id], parent_id=parent.sid)
                run.outstanding += 1
                if strict and branch.join_turn is not None:
                    child.join_key = (parent.sid, branch.join_turn)
                    run.gates[child.join_key] = run.gates.get(child.join_key, 0) + 1
                if branch.mode is _FORK and observer is not None:
                    observer.fork_child_spawned(parent.sid, child.sid)
                delay_s = child.template.turns[0].delay_s / self.config.speedup
                self._schedule(child, 0, now_s + delay_s)

    def _end_session(self, live: _Live, *, completed: bool, now_s: float) -> None:
        if live.done:
            return
        live.done = True
        run = live.run
        if live.parent_id is None:
            run.root_pending = False
        else:
            run.outstanding -= 1
        if self._observer is not None:
            self._observer.session_ended(live.sid, parent_id=live.parent_id, completed=completed)
        key = live.join_key
        if key is not None:
            remaining = run.gates.get(key, 0) - 1
            if remaining > 0:
                run.gates[key] = remaining
            else:
                run.gates.pop(key, None)
                parent = run.sessions.get(key[0])
                if parent is not None and parent.waiting_gate == key[1] and not self.stopped:
                    parent.waiting_gate = None
                    self._schedule_turn(parent, key[1], now_s)
        # A parent that stops early never reaches its gated turns: release nothing, but its
        # children go on (they were already started).

    def _maybe_drain(self, run: _TreeRun, now_s: float) -> None:
        if run.root_pending or run.outstanding > 0:
            return
        if self._runs.pop(run.root_id, None) is None:
            return
        self.trees_completed += 1
        if self._observer is not None:
            self._observer.tree_ended(run.root_id, drained=True)
        if not self.stopped:
            self._start_tree(run.lane, now_s, 0.0)

    def _stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        self._heap.clear()
