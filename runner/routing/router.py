"""Client-side sticky router: which client worker (and so which session cache) sends a credit.

Owns the sticky entries (`key -> worker`, refcounted, with aliases for FORK descendants) and
per-worker load with the least-loaded tie-breaks of docs/product.md §4.4. A pure state machine fed
with credits and lifecycle calls; it never sends anything, never sleeps and never reads a clock
(recency is a logical send counter, so replays are deterministic).
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable
from dataclasses import dataclass

from runner.credit import Credit
from runner.errors import SpecError
from runner.trace.model import BranchMode

__all__ = ["Policy", "StickyRouter", "WorkerLoad"]


class Policy(enum.Enum):
    SPAWN_PIN = "spawn-pin"  # the fix: SPAWN children pin under their own id (default)
    LEGACY = "legacy"  # pre-fix: every child routes by its parent's id and never owns an entry
    LEAST_LOADED = "least-loaded"  # no stickiness at all: a baseline


# Enum member lookups cost several plain attribute loads: the hot path uses these aliases.
_FORK = BranchMode.FORK
# In-flight count parked on a lost worker so it never ties for least loaded.
_GONE = 1 << 62


@dataclass(frozen=True, slots=True)
class WorkerLoad:
    """One client worker's load as the router sees it (a snapshot; see StickyRouter.workers)."""

    worker_id: int
    in_flight: int
    active_sessions: int  # sticky entries counted against this worker
    virtual_sent: int  # sends, plus a joining worker's head start at the average
    last_sent: int  # logical send sequence number of the latest send (recency tie-break)
    total_sent: int
    completed: int
    alive: bool


class _Entry:
    """A sticky entry; a plain slotted class because one is built per session's first turn."""

    __slots__ = ("aliases", "owner_final_seen", "ref_count", "root_key", "worker")

    def __init__(self, worker: int, root_key: str, ref_count: int, owner_final_seen: bool) -> None:
        self.worker = worker
        self.root_key = root_key  # the key the entry was created under (its owner's id)
        self.ref_count = ref_count
        self.owner_final_seen = owner_final_seen
        self.aliases: list[str] | None = None  # FORK descendants' ids filed on this entry


class StickyRouter:
    """Routes credits to client workers; O(1) for a sticky hit and for the min-load lookup.

    Per-worker state lives in parallel lists indexed by worker id: at well under a
    microsecond a decision, list indexing is measurably cheaper than per-worker objects.
    Load: `_min_load` (the lowest in-flight count) and `_at_min` (how many live workers hold
    it) are kept exact on every send and return, so the lowest load is known in O(1); when
    the last worker leaves the lowest level, the new minimum is found by one C-level min()
    over the K loads. The candidates at the minimum are listed only on a miss (a credit with
    no sticky entry), never on the hot path.
    """

    def __init__(self, workers: int, *, policy: Policy = Policy.SPAWN_PIN) -> None:
        if workers < 1:
            raise SpecError("client workers must be at least 1 (use --client-workers K, K >= 1)")
        self.policy = policy
        self._entries: dict[str, _Entry] = {}
        # A lost worker's load is parked at _GONE so it never ties for least loaded.
        self._in_flight = [0] * workers
        self._active = [0] * workers  # sticky entries counted against each worker
        self._vsent = [0] * workers  # virtual sends (a joining worker starts at the average)
        self._last = [0] * workers  # send sequence number of each worker's latest send
        self._head_start = [0] * workers  # virtual sends a joining worker started with
        self._completed = [0] * workers
        self._alive = [True] * workers
        self._min_load = 0
        self._at_min = workers
        self._next_seq = itertools.count(1).__next__  # logical send clock (recency tie-break)
        # One routing function per policy, chosen once: no policy test per credit.
        self.route: Callable[[Credit], int] = {
            Policy.SPAWN_PIN: self._spawn_pin_router(),
            Policy.LEGACY: self._route_legacy,
            Policy.LEAST_LOADED: self._route_least_loaded,
        }[policy]

    # ----------------------------------------------------------------------------- routing

    def _spawn_pin_router(self) -> Callable[[Credit], int]:
        """The spawn-pin routing function, as a closure over the router's containers.

        The hot path (a sticky hit) is written inline and reads its containers from closure
        cells instead of `self.`: at a few hundred nanoseconds a decision every attribute
        lookup and call shows in the per-credit cost (bench router). The containers are only
        ever mutated in place, never replaced, so the cells stay valid.
        """
        entries_get = self._entries.get
        in_flight = self._in_flight
        vsent = self._vsent
        last = self._last
        next_seq = self._next_seq
        first_turn = self._first_turn
        fork_miss = self._fork_miss
        owner_final = self._owner_final
        adopt = self._hold
        state = self

        def route(credit: Credit) -> int:
            # Roots carry no branch mode, so one test separates FORK children from the rest.
            if credit.branch_mode is not _FORK:
                entry = entries_get(credit.session_id)
                if entry is None:
                    worker = first_turn(credit)
                else:
                    worker = entry.worker
                    if credit.turn_index == credit.num_turns - 1:
                        owner_final(credit, entry)
            else:
                # A registered FORK child is an alias of its parent's entry; an orphan that
                # pinned under its own id must stay there once its parent gets an entry.
                entry = entries_get(credit.session_id)
                if entry is None:
                    entry = entries_get(credit.parent_id)  # type: ignore[arg-type]
                    if entry is not None:
                        # Its registration went with a lost worker's entries and the parent
                        # pinned a new one: following it, the child must hold it too.
                        adopt(entry, credit.session_id)
                if entry is None:
                    worker = fork_miss(credit)
                else:
                    worker = entry.worker
                    if entry.root_key == credit.session_id and (
                        credit.turn_index == credit.num_turns - 1
                    ):
                        owner_final(credit, entry)
            # Count the send (_count_send, inlined).
            old = in_flight[worker]
            in_flight[worker] = old + 1
            if old == state._min_load:
                state._at_min -= 1
                if not state._at_min:
                    # The lowest level emptied: this worker, now one higher, is the minimum.
                    state._min_load = old + 1
                    state._at_min = in_flight.count(old + 1)
            vsent[worker] += 1
            last[worker] = next_seq()
            return worker

        return route

    def _route_least_loaded(self, credit: Credit) -> int:
        worker = self._least_loaded()
        self._count_send(worker)
        return worker

    def _first_turn(self, credit: Credit) -> int:
        """A root or SPAWN child with no entry yet (or whose worker was lost): a SPAWN child
        starts on its parent's worker when that entry is live, for locality."""
        # One in ten credits of an agentic stream comes here: the common steps are inlined.
        entries = self._entries
        parent = credit.parent_id
        parent_entry = entries.get(parent) if parent is not None else None
        if parent_entry is not None:
            worker = parent_entry.worker
        elif self._at_min == 1:
            worker = self._in_flight.index(self._min_load)
        else:
            worker = self._least_loaded()
        if credit.turn_index != credit.num_turns - 1:
            key = credit.session_id
            entries[key] = _Entry(worker, key, 1, False)
            self._active[worker] += 1
        elif credit.has_forks:
            self._create_entry(credit.session_id, worker, owner_final=True)
        return worker

    def _fork_miss(self, credit: Credit) -> int:
        """A FORK child whose parent never had an entry here (rootless lane, parent replayed
        from t*): it pins under its own id instead of bouncing."""
        worker = self._least_loaded()
        final = credit.turn_index == credit.num_turns - 1
        if not final or credit.has_forks:
            self._create_entry(credit.session_id, worker, owner_final=final)
        return worker

    def _route_legacy(self, credit: Credit) -> int:
        # Pre-fix behaviour, kept to reproduce the leak: every child routes by its parent's id
        # and never creates an entry, so with the parent's entry gone each turn goes
        # least-loaded and the session bounces between workers.
        parent = credit.parent_id
        key = parent if parent is not None else credit.session_id
        entry = self._entries.get(key)
        if entry is not None:
            worker = entry.worker
            if parent is None and credit.turn_index == credit.num_turns - 1:
                self._owner_final(credit, entry)
        else:
            worker = self._least_loaded()
            if parent is None and (not credit.is_final_turn or credit.has_forks):
                self._create_entry(key, worker, owner_final=credit.is_final_turn)
        self._count_send(worker)
        return worker

    def _owner_final(self, credit: Credit, entry: _Entry) -> None:
        """The entry's owner sends its final turn: it gives up the owner's reference."""
        if not entry.owner_final_seen:
            entry.owner_final_seen = True
            entry.ref_count -= 1
            # A final turn that declares FORK children keeps the entry for them to register.
            if entry.ref_count <= 0 and not credit.has_forks:
                self._pop(entry)

    def _create_entry(self, key: str, worker: int, *, owner_final: bool) -> None:
        # A single-turn owner with forks: its final turn is already seen, no owner reference.
        entry = _Entry(worker, key, 0 if owner_final else 1, owner_final)
        self._entries[key] = entry
        self._active[worker] += 1

    def _pop(self, entry: _Entry) -> None:
        entries = self._entries
        if entries.get(entry.root_key) is entry:
            del entries[entry.root_key]
        aliases = entry.aliases
        if aliases is not None:
            for key in aliases:
                if entries.get(key) is entry:
                    del entries[key]
            entry.aliases = None
        # Credit the session back to the worker it was counted against, not the worker the
        # last turn went to (they differ after a loss and rebind).
        worker = entry.worker
        if self._active[worker] > 0:
            self._active[worker] -= 1

    # ------------------------------------------------------------------- FORK bookkeeping

    def register_child(self, parent_id: str, child_id: str) -> bool:
        """A FORK child is about to start: hold the parent's entry and alias the child onto it.

        Returns False when the parent has no entry (the child then routes on its own).
        """
        if self.policy is Policy.LEAST_LOADED:
            return False
        entries = self._entries
        entry = entries.get(parent_id)
        if entry is None:
            return False
        held = entries.get(child_id)
        if held is not None:
            # Already holding this entry, or pinned under its own id (it routes there).
            return held is entry
        self._hold(entry, child_id)
        return True

    def _hold(self, entry: _Entry, child_id: str) -> None:
        """`child_id` takes a reference on `entry` and is filed as its alias."""
        entry.ref_count += 1
        self._entries[child_id] = entry
        if entry.aliases is None:
            entry.aliases = [child_id]
        else:
            entry.aliases.append(child_id)

    def release_child(self, parent_id: str, child_id: str | None = None) -> None:
        """A FORK child ended (final turn, error or cancel): drop its hold on the parent entry.

        With `child_id`, only a child filed on the parent's current entry holds a reference
        (one registered on an entry a lost worker took holds none); without it (aiperf's
        op stream in `bench router`), the caller vouches for the hold.
        """
        entries = self._entries
        entry = entries.get(parent_id)
        if entry is None or (child_id is not None and entries.get(child_id) is not entry):
            return
        entry.ref_count -= 1
        if entry.ref_count <= 0 and entry.owner_final_seen:
            self._pop(entry)

    def release_session(self, session_id: str) -> None:
        """A session ended without its final turn (error, cancel): give up its own entry."""
        entry = self._entries.get(session_id)
        if entry is not None and entry.root_key == session_id and not entry.owner_final_seen:
            entry.owner_final_seen = True
            entry.ref_count -= 1
            if entry.ref_count <= 0:
                self._pop(entry)

    # ------------------------------------------------------------------------------- load

    def _count_send(self, worker: int) -> None:
        """One more credit in flight on `worker` (the spawn-pin closure inlines this)."""
        in_flight = self._in_flight
        old = in_flight[worker]
        in_flight[worker] = old + 1
        if old == self._min_load:
            self._at_min -= 1
            if not self._at_min:
                # The lowest level emptied: this worker, now one higher, is the minimum.
                self._min_load = old + 1
                self._at_min = in_flight.count(old + 1)
        self._vsent[worker] += 1
        self._last[worker] = self._next_seq()

    def complete(self, worker: int) -> None:
        """A credit sent to `worker` came back (success, error or cancel)."""
        in_flight = self._in_flight
        old = in_flight[worker]
        if old == 0 or old >= _GONE:
            return  # a late return from a lost worker: its load is gone already
        new = in_flight[worker] = old - 1
        self._completed[worker] += 1
        if new < self._min_load:
            self._min_load = new
            self._at_min = 1
        elif new == self._min_load:
            self._at_min += 1

    def _rescan_min(self) -> None:
        in_flight = self._in_flight
        low = self._min_load = min(in_flight)
        self._at_min = in_flight.count(low)

    def _least_loaded(self) -> int:
        """Fewest in-flight; ties: fewest sticky sessions, fewest virtual sends, oldest send."""
        low = self._min_load
        if self._at_min == 1:
            return self._in_flight.index(low)
        in_flight = self._in_flight
        active = self._active
        vsent = self._vsent
        last = self._last
        # Comprehensions, not a generator: ties are where a miss spends its time.
        return min(
            [
                (active[w], vsent[w], last[w], w)
                for w in range(len(in_flight))
                if in_flight[w] == low
            ]
        )[3]

    # ------------------------------------------------------------------- workers come, go

    def add_worker(self) -> int:
        """A worker joins mid-run: it starts at the average virtual sends, so the least-loaded
        tie-break does not stampede every new session onto it."""
        alive = [w for w, ok in enumerate(self._alive) if ok]
        average = sum(self._vsent[w] for w in alive) // len(alive) if alive else 0
        worker = len(self._alive)
        self._in_flight.append(0)
        self._active.append(0)
        self._vsent.append(average)
        self._last.append(self._next_seq())
        self._head_start.append(average)
        self._completed.append(0)
        self._alive.append(True)
        self._rescan_min()
        return worker

    def remove_worker(self, worker: int) -> list[str]:
        """A worker is lost: drop it and every entry counted against it.

        Returns the owners' session ids of the dropped entries, so the caller can end or
        migrate those sessions. Raises SpecError when it was the last worker alive.
        """
        if not self._alive[worker]:
            return []
        if sum(self._alive) == 1:
            raise SpecError("cannot remove the last client worker")
        self._alive[worker] = False
        self._in_flight[worker] = _GONE
        self._rescan_min()
        dropped = {id(e): e for e in self._entries.values() if e.worker == worker}
        owners = [e.root_key for e in dropped.values()]
        for entry in dropped.values():
            self._pop(entry)
        self._active[worker] = 0
        return owners

    # ------------------------------------------------------------------------ inspection

    @property
    def workers(self) -> list[WorkerLoad]:
        """A snapshot of every worker's load (index = worker id)."""
        return [
            WorkerLoad(
                worker_id=w,
                in_flight=self._in_flight[w] if self._alive[w] else 0,
                active_sessions=self._active[w],
                virtual_sent=self._vsent[w],
                last_sent=self._last[w],
                total_sent=self._vsent[w] - self._head_start[w],
                completed=self._completed[w],
                alive=self._alive[w],
            )
            for w in range(len(self._alive))
        ]

    def worker_of(self, key: str) -> int | None:
        entry = self._entries.get(key)
        return entry.worker if entry is not None else None

    @property
    def entry_count(self) -> int:
        """Distinct live entries (aliases not counted)."""
        return len({id(e) for e in self._entries.values()})

    @property
    def key_count(self) -> int:
        """Keys filed, aliases included: bounded by live sessions when nothing leaks."""
        return len(self._entries)
