"""Client-side sticky router: which client worker (and so which session cache) sends a credit.

Owns the sticky entries (`key -> worker`, refcounted, with aliases for FORK descendants) and
per-worker load with the least-loaded tie-breaks of PRODUCT.md §4.4. A pure state machine fed
with credits and lifecycle calls; it never sends anything, never sleeps and never reads a clock
(recency is a logical send counter, so replays are deterministic).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from runner.credit import Credit
from runner.errors import SpecError
from runner.trace.model import BranchMode

__all__ = ["Policy", "StickyRouter", "WorkerLoad"]


class Policy(enum.Enum):
    SPAWN_PIN = "spawn-pin"  # the fix: SPAWN children pin under their own id (default)
    LEGACY = "legacy"  # pre-fix: every child routes by its parent's id and never owns an entry
    LEAST_LOADED = "least-loaded"  # no stickiness at all: a baseline


@dataclass(slots=True)
class WorkerLoad:
    """Load of one client worker as the router sees it."""

    worker_id: int
    in_flight: int = 0
    active_sessions: int = 0  # sticky entries counted against this worker
    virtual_sent: int = 0  # sends, plus a joining worker's head start at the average
    last_sent: int = 0  # logical send sequence number of the latest send (recency tie-break)
    total_sent: int = 0
    completed: int = 0
    alive: bool = True


@dataclass(slots=True, eq=False)
class _Entry:
    worker: int
    root_key: str  # the key the entry was created under (its owner's session id)
    ref_count: int = 1
    owner_final_seen: bool = False
    aliases: list[str] = field(default_factory=list)


class StickyRouter:
    """Routes credits to client workers; O(1) for a sticky hit and for the min-load lookup."""

    def __init__(self, workers: int, *, policy: Policy = Policy.SPAWN_PIN) -> None:
        if workers < 1:
            raise SpecError("client workers must be at least 1 (use --client-workers K, K >= 1)")
        self.policy = policy
        self.workers: list[WorkerLoad] = [WorkerLoad(i) for i in range(workers)]
        self._entries: dict[str, _Entry] = {}
        # Load buckets: in-flight count -> workers at that load. `_min_load` is the lowest
        # non-empty bucket, kept exact on every move so least-loaded never scans all workers.
        self._by_load: dict[int, set[int]] = {0: set(range(workers))}
        self._min_load = 0
        self._seq = 0

    # ----------------------------------------------------------------------------- routing

    def route(self, credit: Credit) -> int:
        """Choose the worker for `credit`, update sticky entries, and count the send."""
        policy = self.policy
        if policy is Policy.LEAST_LOADED:
            worker = self._least_loaded()
        elif policy is Policy.SPAWN_PIN:
            worker = self._route_spawn_pin(credit)
        else:
            worker = self._route_legacy(credit)
        self._on_send(worker)
        return worker

    def _route_spawn_pin(self, credit: Credit) -> int:
        entries = self._entries
        own = credit.session_id
        parent = credit.parent_id
        if parent is not None and credit.branch_mode is BranchMode.FORK:
            # A FORK child shares its parent's history: route by the parent's entry (aliases
            # make grandchildren resolve at any depth). One whose parent never had an entry
            # here (rootless lane, parent before t*) pins under its own id instead of bouncing.
            entry = entries.get(parent) or entries.get(own)
            if entry is not None:
                if entry.root_key == own:
                    self._owner_turn(credit, entry)
                return entry.worker
            worker = self._least_loaded()
        else:
            entry = entries.get(own)
            if entry is not None:
                self._owner_turn(credit, entry)
                return entry.worker
            # First turn of a root or SPAWN child (or a session whose worker was lost): a SPAWN
            # child starts on its parent's worker when that entry is live, for locality.
            parent_entry = entries.get(parent) if parent is not None else None
            worker = parent_entry.worker if parent_entry is not None else self._least_loaded()
        if not credit.is_final_turn or credit.has_forks:
            self._create_entry(own, worker, owner_final=credit.is_final_turn)
        return worker

    def _route_legacy(self, credit: Credit) -> int:
        # Pre-fix behaviour, kept to reproduce the leak: every child routes by its parent's id
        # and never creates an entry, so with the parent's entry gone each turn goes
        # least-loaded and the session bounces between workers.
        parent = credit.parent_id
        key = parent if parent is not None else credit.session_id
        entry = self._entries.get(key)
        if entry is not None:
            if parent is None:
                self._owner_turn(credit, entry)
            return entry.worker
        worker = self._least_loaded()
        if parent is None and (not credit.is_final_turn or credit.has_forks):
            self._create_entry(key, worker, owner_final=credit.is_final_turn)
        return worker

    def _owner_turn(self, credit: Credit, entry: _Entry) -> None:
        """The entry's owner sends a turn: its final turn gives up the owner's reference."""
        if credit.is_final_turn and not entry.owner_final_seen:
            entry.owner_final_seen = True
            entry.ref_count -= 1
            # A final turn that declares FORK children keeps the entry for them to register.
            if entry.ref_count <= 0 and not credit.has_forks:
                self._pop(entry)

    def _create_entry(self, key: str, worker: int, *, owner_final: bool) -> None:
        # A single-turn owner with forks: its final turn is already seen, no owner reference.
        entry = _Entry(worker, key, 0 if owner_final else 1, owner_final)
        self._entries[key] = entry
        self.workers[worker].active_sessions += 1

    def _pop(self, entry: _Entry) -> None:
        entries = self._entries
        for key in (entry.root_key, *entry.aliases):
            if entries.get(key) is entry:
                del entries[key]
        entry.aliases.clear()
        # Credit the session back to the worker it was counted against, not the worker the
        # last turn went to (they differ after a loss and rebind).
        load = self.workers[entry.worker]
        if load.active_sessions > 0:
            load.active_sessions -= 1

    # ------------------------------------------------------------------- FORK bookkeeping

    def register_child(self, parent_id: str, child_id: str) -> bool:
        """A FORK child is about to start: hold the parent's entry and alias the child onto it.

        Returns False when the parent has no entry (the child then routes on its own).
        """
        if self.policy is Policy.LEAST_LOADED:
            return False
        entry = self._entries.get(parent_id)
        if entry is None:
            return False
        entry.ref_count += 1
        if child_id not in self._entries:
            self._entries[child_id] = entry
            entry.aliases.append(child_id)
        return True

    def release_child(self, parent_id: str) -> None:
        """A FORK child ended (final turn, error or cancel): drop its hold on the parent entry."""
        entry = self._entries.get(parent_id)
        if entry is None:
            return
        entry.ref_count -= 1
        if entry.ref_count <= 0 and entry.owner_final_seen:
            self._pop(entry)

    def evict_unclaimed(self, parent_id: str) -> None:
        """The parent's final turn declared forks but no child ever registered."""
        entry = self._entries.get(parent_id)
        if entry is not None and entry.owner_final_seen and entry.ref_count <= 0:
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

    def complete(self, worker: int) -> None:
        """A credit sent to `worker` came back (success, error or cancel)."""
        load = self.workers[worker]
        if not load.alive:
            return
        old = load.in_flight
        buckets = self._by_load
        bucket = buckets[old]
        bucket.discard(worker)
        if not bucket:
            del buckets[old]
        new = old - 1
        load.in_flight = new
        load.completed += 1
        target = buckets.get(new)
        if target is None:
            buckets[new] = {worker}
        else:
            target.add(worker)
        if new < self._min_load:
            self._min_load = new

    def _on_send(self, worker: int) -> None:
        load = self.workers[worker]
        old = load.in_flight
        buckets = self._by_load
        bucket = buckets[old]
        bucket.discard(worker)
        if not bucket:
            del buckets[old]
            if old == self._min_load:
                self._min_load = old + 1  # this worker now holds the lowest load
        new = old + 1
        target = buckets.get(new)
        if target is None:
            buckets[new] = {worker}
        else:
            target.add(worker)
        load.in_flight = new
        load.total_sent += 1
        load.virtual_sent += 1
        self._seq += 1
        load.last_sent = self._seq

    def _least_loaded(self) -> int:
        """Fewest in-flight; ties: fewest sticky sessions, fewest virtual sends, oldest send."""
        candidates = self._by_load[self._min_load]
        if len(candidates) == 1:
            for worker in candidates:
                return worker
        workers = self.workers
        best = -1
        best_key = (0, 0, 0)
        for worker in candidates:
            load = workers[worker]
            key = (load.active_sessions, load.virtual_sent, load.last_sent)
            if best < 0 or key < best_key:
                best, best_key = worker, key
        return best

    # ------------------------------------------------------------------- workers come, go

    def add_worker(self) -> int:
        """A worker joins mid-run: it starts at the average virtual sends, so the least-loaded
        tie-break does not stampede every new session onto it."""
        alive = [w for w in self.workers if w.alive]
        average = sum(w.virtual_sent for w in alive) // len(alive) if alive else 0
        self._seq += 1
        worker = WorkerLoad(len(self.workers), virtual_sent=average, last_sent=self._seq)
        self.workers.append(worker)
        self._by_load.setdefault(0, set()).add(worker.worker_id)
        self._min_load = 0
        return worker.worker_id

    def remove_worker(self, worker: int) -> list[str]:
        """A worker is lost: drop it and every entry counted against it.

        Returns the owners' session ids of the dropped entries, so the caller can end or
        migrate those sessions. Raises SpecError when it was the last worker alive.
        """
        load = self.workers[worker]
        if not load.alive:
            return []
        if sum(1 for w in self.workers if w.alive) == 1:
            raise SpecError("cannot remove the last client worker")
        load.alive = False
        bucket = self._by_load[load.in_flight]
        bucket.discard(worker)
        if not bucket:
            del self._by_load[load.in_flight]
        self._min_load = min(self._by_load)
        dropped = {id(e): e for e in self._entries.values() if e.worker == worker}
        owners = [e.root_key for e in dropped.values()]
        for entry in dropped.values():
            self._pop(entry)
        load.in_flight = 0
        load.active_sessions = 0
        return owners

    # ------------------------------------------------------------------------ inspection

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
