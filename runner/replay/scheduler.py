"""Replay scheduling: when each agent tree starts and when each of its turns is due.

Owns the timing modes of docs/product.md §4.2 (lanes, rate, schedule, closed), tree instances,
per-session progress, strict-join gates, the replay start instant t*, stop conditions, and the
issue-time finality stamps. A clock-free core: the driver (virtual-time simulator or wall-clock
live replay) asks when the next credit is due, pops due credits, and reports returns. It never
routes, sends or sleeps.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, get_args

from runner.credit import Credit
from runner.ending import EndedBy, Ending, limit_words
from runner.errors import SpecError
from runner.limits import MAX_SESSIONS_AT_ONCE
from runner.metrics.histogram import LatencyHistogram
from runner.trace.limits import shown
from runner.trace.model import BranchMode, Session, Tree

__all__ = [
    "ARRIVALS",
    "MAX_WAITING_ARRIVALS",
    "MIN_BURSTINESS",
    "TIMINGS",
    "Arrival",
    "Joins",
    "ReplayConfig",
    "ReplayObserver",
    "ReplayScheduler",
    "Timing",
]

Joins = Literal["recorded", "strict"]
# lanes: N lanes each replay one tree at a time, recorded delays (the default).
# rate: trees arrive at `rate_per_s`; `concurrency` caps the trees active at once.
# schedule: every tree starts at its recorded start, every turn at its recorded offset.
# closed: N lanes, recorded delays ignored: each turn goes the moment the one before returns.
Timing = Literal["lanes", "rate", "schedule", "closed"]
Arrival = Literal["poisson", "constant", "gamma"]
TIMINGS: tuple[Timing, ...] = get_args(Timing)
ARRIVALS: tuple[Arrival, ...] = get_args(Arrival)
_FORK = BranchMode.FORK  # enum member lookups are slow on hot paths
# The smallest gamma shape: its scale 1 / (rate * shape) stays finite for every rate, and a
# coefficient of variation of 10 is burstier than any arrival trace we know. Below ~1e-308
# the scale overflows and the draws are NaN: a clock that never reaches the duration.
MIN_BURSTINESS = 0.01
# Rate timing: arrivals waiting for a slot under the concurrency cap. Past this many the run
# is hopelessly overloaded and each further arrival is counted unstarted at once, so memory
# stays bounded however long the run and however high the rate.
MAX_WAITING_ARRIVALS = 100_000


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayConfig:
    timing: Timing = "lanes"
    concurrency: int = 16  # lanes (lanes, closed) or the cap on active trees (rate)
    rate_per_s: float | None = None  # tree arrivals per second of run time (timing "rate")
    arrival: Arrival = "poisson"  # the inter-arrival distribution (timing "rate")
    # Gamma shape, as aiperf and vLLM's benchmark use it: 1 is Poisson-like, below 1 burstier,
    # above 1 more regular. Only read with arrival "gamma".
    burstiness: float = 1.0
    duration_s: float | None = None  # stop issuing at this run time
    max_requests: int | None = None  # stop issuing after this many credits
    max_trees: int | None = None  # stop starting trees after this many
    # Fractions of a tree's span where a lane's first tree may start (t*); (0, 0) replays from
    # the beginning. Later trees on a lane always replay from their first turn.
    start_window: tuple[float, float] = (0.0, 0.0)
    joins: Joins = "recorded"
    speedup: float = 1.0  # divides every recorded delay and timestamp (never the arrival rate)
    warmup_s: float = 0.0  # credits due before this run time are warmup (not measured)
    warmup_per_lane: int = 0  # each lane's first this many requests are warmup (not measured)
    # The longest idle gap replayed, in trace seconds (before speedup): a recorded pause
    # between a session's turns (a user away, a long tool call) or before a stream's first
    # turn after t* is cut to this. None: as recorded.
    max_idle_s: float | None = None
    # Replaying from t*: first send each live stream's last turn before t* (one-token answer,
    # not measured) so caches, bindings and sticky entries are warm when measurement starts.
    prime: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        lo, hi = self.start_window
        if self.timing not in TIMINGS:
            raise SpecError(f"timing must be one of {', '.join(TIMINGS)}, got {self.timing!r}")
        if self.concurrency < 1:
            raise SpecError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.rate_per_s is not None and not self.rate_per_s > 0:
            raise SpecError(f"rate must be > 0 trees/s, got {self.rate_per_s}")
        if self.timing == "rate" and self.rate_per_s is None:
            raise SpecError("timing 'rate' needs a rate (trees per second)")
        if self.arrival not in ARRIVALS:
            raise SpecError(f"arrival must be one of {', '.join(ARRIVALS)}, got {self.arrival!r}")
        if not MIN_BURSTINESS <= self.burstiness < math.inf:
            raise SpecError(f"burstiness must be >= {MIN_BURSTINESS}, got {self.burstiness}")
        if not 0.0 <= lo <= hi <= 1.0:
            raise SpecError(f"start window {lo}:{hi} is invalid: use LO:HI with 0 <= LO <= HI <= 1")
        if hi > 0 and self.timing in ("rate", "schedule"):
            raise SpecError(
                f"a start window applies to lanes and closed timing, not {self.timing!r}: "
                "arriving trees replay from their first turn"
            )
        if self.speedup <= 0:
            raise SpecError(f"speedup must be > 0, got {self.speedup}")
        if self.duration_s is not None and self.duration_s <= 0:
            raise SpecError(f"duration must be > 0 s, got {self.duration_s}")
        if self.max_requests is not None and self.max_requests < 1:
            raise SpecError(f"request count must be >= 1, got {self.max_requests}")
        if self.max_trees is not None and self.max_trees < 1:
            raise SpecError(f"tree count must be >= 1, got {self.max_trees}")
        if self.joins not in ("recorded", "strict"):
            raise SpecError(f"joins must be 'recorded' or 'strict', got {self.joins!r}")
        if self.warmup_per_lane < 0:
            raise SpecError(f"warmup per lane must be >= 0, got {self.warmup_per_lane}")
        if self.max_idle_s is not None and self.max_idle_s < 0:
            raise SpecError(f"the idle-gap cap must be >= 0 s, got {self.max_idle_s}")


def _check_sessions_at_once(trees: Sequence[Tree], config: ReplayConfig) -> None:
    """Refuse, before anything starts, a workload whose live sessions could pass
    MAX_SESSIONS_AT_ONCE: every lane may hold the largest tree whole (a fan-out starts all its
    children together). Arriving trees (rate, schedule) are judged one tree at a time, since
    how many overlap depends on the arrivals, which the request and duration limits bound."""
    largest = max(trees, key=lambda tree: len(tree.sessions))
    sessions = len(largest.sessions)
    lanes = config.concurrency if config.timing in ("lanes", "closed") else 1
    if sessions * lanes <= MAX_SESSIONS_AT_ONCE:
        return
    if lanes == 1:
        problem = f"tree {shown(largest.id)} has {sessions:,} sessions"
        fix = "split the tree"
    else:
        problem = (
            f"tree {shown(largest.id)} has {sessions:,} sessions: on {lanes:,} lanes that is "
            f"{sessions * lanes:,} at once"
        )
        fitting = MAX_SESSIONS_AT_ONCE // sessions
        fix = (
            f"use at most {fitting:,} lane{'s' if fitting > 1 else ''}, or split the tree"
            if fitting
            else "the tree alone is over it: split the tree"
        )
    raise SpecError(
        f"{problem}, over the limit of {MAX_SESSIONS_AT_ONCE:,} live sessions "
        f"({fix}, or raise AIPERF_MAX_SESSIONS_AT_ONCE)"
    )


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
    base_s: float  # run time the instance started
    origin_s: float  # the tree's recorded start (its first request), on its own clock
    root_pending: bool = True  # the root has not returned its final turn
    outstanding: int = 0  # descendants live or registered, at any depth
    # A session ended without its final turn, or a turn's children were never spawned because
    # the run stopped: the instance drains but is counted as cut, not completed.
    incomplete: bool = False
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


# Heap entries: (due, sequence, session, turn index, priming). A tree arrival (rate, schedule)
# rides in the same heap with no session and its arrival number in the turn-index slot, so
# the driver's one "next due" covers both.
_Entry = tuple[float, int, "_Live | None", int, bool]


class ReplayScheduler:
    """Issues the credits of a replay: trees started by the timing mode, turns when due."""

    def __init__(self, trees: Sequence[Tree], config: ReplayConfig) -> None:
        if not trees:
            raise SpecError("the trace has no trees to replay")
        _check_sessions_at_once(trees, config)
        self.config = config
        self._trees = tuple(trees)
        self._rng = random.Random(config.seed)
        # A stream of its own, so adding arrivals never moves the lanes' t* draws.
        self._arrival_rng = random.Random(f"arrivals/{config.seed}")
        self._observer: ReplayObserver | None = None
        self._heap: list[_Entry] = []
        self._seq = 0
        self._credit_id = 0
        self._tree_counter = 0
        self._runs: dict[str, _TreeRun] = {}  # root id -> live tree instance
        self._in_flight: dict[int, _Live] = {}
        self._lane_next = list(range(config.concurrency))
        self._lane_sent: dict[int, int] = {}  # lane -> requests issued (warmup_per_lane)
        self._extents: dict[int, tuple[float, float]] = {}  # by id() of a tree in _trees
        self._due: Callable[[_Live, int, float], float] = {
            "lanes": self._due_recorded,
            "rate": self._due_recorded,
            "closed": self._due_at_once,
            "schedule": self._due_stamped,
        }[config.timing]
        # Arrival modes: free lane numbers (smallest reused first), arrivals waiting for a
        # slot (rate), and the schedule of tree starts (schedule).
        self._free_lanes: list[int] = []
        self._lanes_used = 0
        self._waiting: deque[tuple[float, int]] = deque()  # (arrival time, arrival number)
        self._arrivals = 0
        self._starts: list[tuple[float, int]] = []  # (start offset, tree index), in order
        self._schedule_start_s = 0.0  # run time the schedule's offsets count from
        self.stopped = False
        self.stopped_at_s: float | None = None  # run time issuing stopped, when known
        # Which of its own limits stopped issuing or refused a tree or an arrival (`ending`).
        self._limit: EndedBy | None = None
        self.last_tree_start_s: float | None = None
        # Counters for the run summary.
        self.issued = 0
        self.sessions_started = 0
        self.trees_started = 0  # instances that replay at least one request
        self.trees_completed = 0  # drained with every session's final turn returned
        self.trees_skipped = 0  # nothing left after t*: never replayed
        self._trees_cut = 0  # drained but incomplete (see _TreeRun.incomplete)
        # Rate mode: how long arrivals waited for a slot (ms), how many waited, how many never
        # got one before the run stopped.
        self.arrival_waits = LatencyHistogram()
        self.arrivals_waited = 0
        self.arrivals_unstarted = 0

    # --------------------------------------------------------------------------- driving

    def start(self, now_s: float, observer: ReplayObserver) -> None:
        self._observer = observer
        timing = self.config.timing
        if timing == "rate":
            self._push_arrival(now_s, 0)
        elif timing == "schedule":
            self._plan_schedule(now_s)
        else:
            lo, hi = self.config.start_window
            for lane in range(self.config.concurrency):
                fraction = self._rng.uniform(lo, hi) if hi > 0 else 0.0
                self._start_tree(lane, now_s, fraction)

    def next_due(self) -> float | None:
        """Run time of the next credit (or tree arrival), None when nothing is scheduled.

        Never later than the duration's end while the run goes on: a driver waiting for a far
        credit must wake at the end to stop, not idle past it.
        """
        if self.stopped or not self._heap:
            return None
        due_s = self._heap[0][0]
        end_s = self.config.duration_s
        if end_s is not None and due_s > end_s:
            return end_s
        return due_s

    def pop_due(self, now_s: float) -> list[Credit]:
        """Issue every credit due at or before `now_s`, stamping finality at issue."""
        if self.stopped:
            return []
        config = self.config
        if config.duration_s is not None and now_s >= config.duration_s:
            self._stop(config.duration_s, EndedBy.DURATION)  # nothing issued at or after it
            return []
        heap = self._heap
        credits: list[Credit] = []
        while heap and heap[0][0] <= now_s and not self.stopped:
            due_s, _, live, turn_index, priming = heapq.heappop(heap)
            if live is None:
                self._arrive(turn_index, due_s)
                continue
            credits.append(self._issue(live, turn_index, due_s, now_s, priming))
            if not priming and live.template.turns[turn_index].spawns_on_issue:
                # aiperf's pre_session_spawns: these children start with the turn, not after.
                self._spawn_children(live, turn_index, now_s, on_issue=True)
            if config.max_requests is not None and self.issued >= config.max_requests:
                self._stop(now_s, EndedBy.MAX_REQUESTS)
        return credits

    def on_return(self, credit: Credit, now_s: float, *, session_over: bool = False) -> None:
        """A credit came back. `session_over`: the session cannot go on (worker lost, cancel)."""
        live = self._in_flight.pop(credit.id, None)
        if live is None:
            return
        end_s = self.config.duration_s
        if end_s is not None and now_s >= end_s and not self.stopped:
            self._stop(end_s, EndedBy.DURATION)  # a return after the end spawns nothing
        run = live.run
        if credit.priming and not session_over:
            # Its children were accounted when the tree was split at t*: just resume.
            self._schedule_or_gate(live, live.next_turn, max(now_s, live.resume_s))
            return
        turn = live.template.turns[credit.turn_index]
        # Children are registered before the spawning turn is accounted, so no request of the
        # tree can be stamped tree-final while they are about to start.
        if turn.spawns_on_return:
            if self.stopped:
                run.incomplete = True  # its children will never run
            else:
                self._spawn_children(live, credit.turn_index, now_s, on_issue=False)
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
        return not self._in_flight and (self.stopped or not (self._heap or self._waiting))

    def stop(self, now_s: float | None = None) -> None:
        """Stop issuing (Ctrl-C, cancel, a failure threshold); in-flight credits still return."""
        self._stop(now_s)

    @property
    def live_trees(self) -> int:
        """Tree instances started and not drained."""
        return len(self._runs)

    @property
    def trees_cut(self) -> int:
        """Trees a stop (or a lost session) kept from completing: drained with a session ended
        early or children never spawned, plus, once the run is over, every instance left."""
        return self._trees_cut + (len(self._runs) if self.finished else 0)

    def ending(self, now_s: float) -> Ending:
        """Why a run that nothing stopped from outside ended: the limit it reached, or the
        workload running out (before the limits it set: `early`)."""
        config = self.config
        by = self._limit
        if by is EndedBy.DURATION and config.duration_s is not None:
            return Ending(by, limit_words(by, config.duration_s))
        if by is EndedBy.MAX_REQUESTS and config.max_requests is not None:
            return Ending(by, limit_words(by, config.max_requests))
        if by is EndedBy.MAX_TREES and config.max_trees is not None:
            return Ending(by, limit_words(by, config.max_trees))
        short = []
        if config.duration_s is not None:
            short.append(f"its duration ({config.duration_s:g} s)")
        if config.max_requests is not None:
            short.append(f"its request count ({config.max_requests})")
        if config.max_trees is not None:
            short.append(f"its tree count ({config.max_trees})")
        if not short:
            return Ending(EndedBy.COMPLETED, "the workload ran to its end")
        return Ending(
            EndedBy.COMPLETED,
            f"the workload ran out at {now_s:.1f} s, {_count(self.issued, 'request')} and "
            f"{_count(self.trees_started, 'tree')} in, before {' or '.join(short)}",
            early=True,
        )

    def issuing_window_s(self) -> float | None:
        """Run time over which trees could start: up to the stop (None when the stop's
        instant is unknown: the caller uses the run's length), else up to the last tree start
        (the workload or the tree cap ran out first)."""
        if self.stopped:
            return self.stopped_at_s
        return self.last_tree_start_s

    # ------------------------------------------------------------------ timing of turns

    def _due_recorded(self, live: _Live, turn_index: int, now_s: float) -> float:
        """lanes, rate: the recorded end-to-start delay after `now_s` (the previous return)."""
        delay_s = live.template.turns[turn_index].delay_s
        cap = self.config.max_idle_s
        if cap is not None and delay_s > cap:
            delay_s = cap
        return now_s + delay_s / self.config.speedup

    def _due_at_once(self, live: _Live, turn_index: int, now_s: float) -> float:
        """closed: the moment the turn it follows has returned."""
        return now_s

    def _due_stamped(self, live: _Live, turn_index: int, now_s: float) -> float:
        """schedule: the recorded start offset from the tree's start, but never before the
        turn it follows has returned (its history does not exist before)."""
        run = live.run
        turn = live.template.turns[turn_index]
        due_s = run.base_s + (turn.t_s - run.origin_s) / self.config.speedup
        return due_s if due_s > now_s else now_s

    # ----------------------------------------------------------------- lanes, closed, t*

    def _start_tree(self, lane: int, now_s: float, fraction: float) -> None:
        config = self.config
        while not self._no_more_trees(now_s):
            # A tree with nothing left after t* is skipped: the lane takes the next one from
            # its beginning (a loop, not recursion: a skip cannot repeat at fraction 0).
            template = self._trees[self._lane_next[lane] % len(self._trees)]
            self._lane_next[lane] += config.concurrency  # lanes walk the trace interleaved
            run, root = self._begin(template, lane, now_s)
            if fraction <= 0.0:
                self._schedule(root, 0, now_s)
            else:
                origin_s, span_s = run.origin_s, self._extent(template)[1]
                self._start_mid_tree(run, root, origin_s + fraction * (span_s - origin_s), now_s)
                if not run.root_pending and run.outstanding == 0:
                    del self._runs[run.root_id]
                    self.trees_skipped += 1
                    fraction = 0.0
                    continue
            self._started(now_s)
            return

    def _no_more_trees(self, now_s: float) -> bool:
        """A stop condition forbids starting another tree."""
        config = self.config
        if self.stopped:
            return True
        if config.max_trees is not None and self.trees_started >= config.max_trees:
            self._limit = self._limit or EndedBy.MAX_TREES
            return True
        if config.duration_s is not None and now_s >= config.duration_s:
            self._limit = self._limit or EndedBy.DURATION
            return True
        return False

    def _begin(self, template: Tree, lane: int, now_s: float) -> tuple[_TreeRun, _Live]:
        self._tree_counter += 1
        prefix = f"t{self._tree_counter}:"
        root_id = prefix + template.root_id
        # A tree's own clock starts at its first request: arrival traces (Mooncake, Azure)
        # record turn 0 at its offset in the whole trace, and a lane must not idle for it.
        origin_s = self._extent(template)[0]
        run = _TreeRun(template, lane, root_id, prefix, now_s, origin_s)
        self._runs[root_id] = run
        return run, self._live(run, template.root, parent_id=None)

    def _started(self, now_s: float) -> None:
        self.trees_started += 1
        self.last_tree_start_s = now_s

    def _start_mid_tree(self, run: _TreeRun, root: _Live, t_star: float, now_s: float) -> None:
        """Split every stream of the tree at t*: what began before it is history, the rest
        resumes at its recorded offset from t* (at once under closed timing). A root with
        nothing left makes the lane rootless; under strict joins a root waiting on children at
        t* starts gated."""
        speedup = self.config.speedup
        at_once = self.config.timing == "closed"
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
            offset_s = 0.0 if at_once else max(0.0, live.template.turns[first].t_s - t_star)
            if self.config.max_idle_s is not None:
                offset_s = min(offset_s, self.config.max_idle_s)
            offset_s /= speedup
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

    # ----------------------------------------------------------------- rate, schedule

    def _plan_schedule(self, now_s: float) -> None:
        """Every tree starts at its recorded start relative to the workload's earliest tree
        (Mooncake and Azure arrival times; a Claude Code session starts at its file's 0)."""
        origins = [self._extent(tree)[0] for tree in self._trees]
        first_s = min(origins)
        speedup = self.config.speedup
        self._starts = sorted(((o - first_s) / speedup, i) for i, o in enumerate(origins))
        self._schedule_start_s = now_s
        self._push_arrival(now_s + self._starts[0][0], 0)

    def _push_arrival(self, at_s: float, number: int) -> None:
        config = self.config
        if not math.isfinite(at_s):
            # A clock that left the reals never comes back: no more arrivals (a NaN due time
            # would also poison the heap's order and every figure derived from it).
            return
        if config.max_trees is not None and number >= config.max_trees:
            self._limit = self._limit or EndedBy.MAX_TREES
            return
        if config.duration_s is not None and at_s >= config.duration_s:
            self._limit = self._limit or EndedBy.DURATION
            return
        self._seq += 1
        heapq.heappush(self._heap, (at_s, self._seq, None, number, False))

    def _arrive(self, number: int, at_s: float) -> None:
        """Arrival `number` is due at `at_s`: start its tree, or queue it for a free slot."""
        if self.config.timing == "schedule":
            if number + 1 < len(self._starts):
                self._push_arrival(self._schedule_start_s + self._starts[number + 1][0], number + 1)
            self._start_arrival(self._starts[number][1], at_s, at_s)  # never capped
            return
        self._push_arrival(at_s + self._interval_s(), number + 1)
        if not self._waiting and len(self._runs) < self.config.concurrency:
            self._start_arrival(number % len(self._trees), at_s, at_s)
        elif len(self._waiting) < MAX_WAITING_ARRIVALS:
            self._waiting.append((at_s, number))
        else:
            self.arrivals_unstarted += 1  # the queue of users is full: this one walks away

    def _interval_s(self) -> float:
        """The next inter-arrival gap: mean 1 / rate in every distribution."""
        config = self.config
        rate = config.rate_per_s
        assert rate is not None  # validated for timing "rate"
        if config.arrival == "constant":
            return 1.0 / rate
        if config.arrival == "gamma":
            # Shape k = burstiness and scale 1 / (rate k): the mean stays 1 / rate, the
            # coefficient of variation is 1 / sqrt(k) (vLLM benchmark_serving, aiperf).
            shape = config.burstiness
            return self._arrival_rng.gammavariate(shape, 1.0 / (rate * shape))
        return self._arrival_rng.expovariate(rate)

    def _start_arrival(self, tree_index: int, arrived_s: float, now_s: float) -> None:
        lane = heapq.heappop(self._free_lanes) if self._free_lanes else self._new_lane()
        _, root = self._begin(self._trees[tree_index], lane, now_s)
        if self.config.timing == "rate":
            wait_s = now_s - arrived_s
            self.arrival_waits.record(wait_s * 1000.0)
            if wait_s > 0:
                self.arrivals_waited += 1
        self._schedule(root, 0, now_s)  # the root's first turn is the tree's start
        self._started(now_s)

    def _new_lane(self) -> int:
        self._lanes_used += 1
        return self._lanes_used - 1

    # --------------------------------------------------------------------------- issuing

    def _issue(
        self, live: _Live, turn_index: int, due_s: float, now_s: float, priming: bool
    ) -> Credit:
        run = live.run
        template = live.template
        turn = template.turns[turn_index]
        num_turns = len(template.turns)
        is_final = turn_index == num_turns - 1
        is_root = live.parent_id is None
        # Issue-time finality (docs/product.md §4.2): only a final turn that declares no branches
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
        warmup = priming or due_s < self.config.warmup_s
        if self.config.warmup_per_lane and not priming:
            sent = self._lane_sent.get(run.lane, 0)
            self._lane_sent[run.lane] = sent + 1
            warmup = warmup or sent < self.config.warmup_per_lane
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
            issued_at_s=now_s,
            due_s=due_s,
            warmup=warmup,
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
        self._schedule_or_gate(live, turn_index, self._due(live, turn_index, now_s))

    # ------------------------------------------------------------------------- lifecycle

    def _spawn_children(
        self, parent: _Live, turn_index: int, now_s: float, *, on_issue: bool
    ) -> None:
        """Start the children of the turn's branches that fire at this moment: when the
        turn is issued (`on_issue`) or when it returns."""
        run = parent.run
        tree = run.tree
        strict = self.config.joins == "strict"
        observer = self._observer
        due = self._due
        for branch in parent.template.turns[turn_index].branches:
            if branch.on_issue is not on_issue:
                continue
            for child_id in branch.children:
                child = self._live(run, tree.sessions[child_id], parent_id=parent.sid)
                run.outstanding += 1
                if strict and branch.join_turn is not None:
                    child.join_key = (parent.sid, branch.join_turn)
                    run.gates[child.join_key] = run.gates.get(child.join_key, 0) + 1
                if branch.mode is _FORK and observer is not None:
                    observer.fork_child_spawned(parent.sid, child.sid)
                self._schedule(child, 0, due(child, 0, now_s))

    def _end_session(self, live: _Live, *, completed: bool, now_s: float) -> None:
        if live.done:
            return
        live.done = True
        run = live.run
        if not completed:
            run.incomplete = True
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
        if run.incomplete:
            self._trees_cut += 1
        else:
            self.trees_completed += 1
        if self._observer is not None:
            self._observer.tree_ended(run.root_id, drained=True)
        timing = self.config.timing
        if timing == "lanes" or timing == "closed":
            if not self.stopped:
                self._start_tree(run.lane, now_s, 0.0)
            return
        heapq.heappush(self._free_lanes, run.lane)
        # Rate: the oldest waiting arrival takes the freed slot (FIFO, like a queue of users).
        while self._waiting and not self.stopped and len(self._runs) < self.config.concurrency:
            arrived_s, number = self._waiting.popleft()
            self._start_arrival(number % len(self._trees), arrived_s, now_s)

    def _stop(self, at_s: float | None, limit: EndedBy | None = None) -> None:
        if self.stopped:
            return
        self.stopped = True
        self.stopped_at_s = at_s
        if limit is not None:
            self._limit = limit
        self._heap.clear()
        self.arrivals_unstarted += len(self._waiting)
        self._waiting.clear()


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"
