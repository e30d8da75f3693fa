"""Client workers' session caches and the accounting of copies, orphans and migrations.

Each client worker caches the history of every session it served (with its size in bytes),
as a real load generator does. This module only keeps the books — who holds which copy, which
copies are orphaned, how often sessions switched worker — it sends nothing and never decides
routing (the sticky router does).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runner.credit import Credit
from runner.trace.model import BranchMode

__all__ = ["BYTES_PER_TOKEN", "ServeOutcome", "SessionCaches", "WorkerCacheStats"]

_FORK = BranchMode.FORK  # enum member lookups are slow on hot paths

# A cached history holds the prompt text and replies; synthesized text averages about four
# bytes per token (one short word plus a space), the usual rule of thumb for English text.
BYTES_PER_TOKEN = 4


@dataclass(slots=True)
class WorkerCacheStats:
    copies: int = 0
    bytes: int = 0
    orphans: int = 0


@dataclass(slots=True, frozen=True)
class ServeOutcome:
    hit: bool  # the worker already held this session's history
    switched: bool  # the previous turn of this session was served by another worker
    rebuilt: bool  # a FORK child's inherited context was not on this worker


@dataclass(slots=True, eq=False)
class _Session:
    last_worker: int = -1
    holders: dict[int, int] = field(default_factory=dict)  # worker -> bytes of its copy
    multi_worker: bool = False
    ended: bool = False
    # FORK parents keep their copy pinned until their FORK children have taken theirs.
    fork_children_expected: int = 0
    fork_children_started: int = 0


class SessionCaches:
    """Session copies on K client workers, with run-level and per-worker accounting.

    Orphaned copy: a copy on a worker that will not serve the session again — the session has
    ended, or its latest turn was served by another worker.
    """

    def __init__(self, workers: int, *, max_copies_per_worker: int = 100_000) -> None:
        self.workers = [WorkerCacheStats() for _ in range(workers)]
        self.max_copies_per_worker = max_copies_per_worker
        self._sessions: dict[str, _Session] = {}
        self.sessions_multi_worker = 0
        self.worker_switches = 0
        self.context_rebuilds = 0
        self.copies = 0
        self.orphans = 0
        self.peak_copies = 0
        self.peak_orphans = 0
        self.capacity_evictions = 0
        # Migrations by (from worker, to worker): the live from->to matrix.
        self.migrations: dict[tuple[int, int], int] = {}

    def add_worker(self) -> int:
        self.workers.append(WorkerCacheStats())
        return len(self.workers) - 1

    # ------------------------------------------------------------------------------ serve

    def serve(self, credit: Credit, worker: int) -> ServeOutcome:
        """Worker `worker` sends `credit`: find or build the session's history there."""
        sessions = self._sessions
        sid = credit.session_id
        state = sessions.get(sid)
        if state is None:
            state = sessions[sid] = _Session()
        stats = self.workers[worker]
        previous = state.last_worker
        switched = previous >= 0 and previous != worker
        hit = worker in state.holders
        rebuilt = False
        if switched:
            self.worker_switches += 1
            pair = (previous, worker)
            self.migrations[pair] = self.migrations.get(pair, 0) + 1
            if not state.multi_worker:
                state.multi_worker = True
                self.sessions_multi_worker += 1
            if previous in state.holders:
                self._mark_orphan(previous, +1)  # the copy left behind will not serve again
            if hit:
                self._mark_orphan(worker, -1)  # an old copy here is current again
        if not hit and previous < 0 and credit.is_fork_child and credit.turn_index == 0:
            rebuilt = not self._inherit_from_parent(credit, worker)
        state.last_worker = worker
        size = self._history_bytes(credit)
        old_size = state.holders.get(worker)
        state.holders[worker] = size
        if old_size is None:
            stats.copies += 1
            self.copies += 1
            if self.copies > self.peak_copies:
                self.peak_copies = self.copies
            stats.bytes += size
            if stats.copies > self.max_copies_per_worker:
                self._evict_oldest(worker)
        else:
            stats.bytes += size - old_size
        if rebuilt:
            self.context_rebuilds += 1
        turn = credit.turn
        if turn is not None and turn.branches:
            for branch in turn.branches:
                if branch.mode is _FORK:
                    state.fork_children_expected += len(branch.children)
        if credit.is_final_turn:
            self._end(sid, state)
        return ServeOutcome(hit=hit, switched=switched, rebuilt=rebuilt)

    def expect_fork_children(self, parent_id: str, count: int) -> None:
        """The parent's turn declared `count` FORK children: pin its copy until they start."""
        state = self._sessions.get(parent_id)
        if state is not None:
            state.fork_children_expected += count

    def fork_child_settled(self, parent_id: str) -> None:
        """A FORK child took its inherited copy (or failed before starting)."""
        state = self._sessions.get(parent_id)
        if state is None:
            return
        state.fork_children_started += 1
        if state.ended:
            self._release_if_unpinned(parent_id, state)

    def session_ended(self, session_id: str) -> None:
        """The session ended before its final turn (error, cancel, worker lost, run cut)."""
        state = self._sessions.get(session_id)
        if state is not None and not state.ended:
            self._end(session_id, state)

    def drop_worker(self, worker: int) -> None:
        """A lost worker's caches are gone with it."""
        for sid, state in list(self._sessions.items()):
            size = state.holders.pop(worker, None)
            if size is None:
                continue
            # Copies elsewhere than the latest worker are orphans; the latest one is current
            # (or pinned for FORK children). The session's next turn will count a switch.
            self._count_removed(worker, size, orphan=state.last_worker != worker)
            self._forget_if_done(sid, state)

    # --------------------------------------------------------------------------- internals

    def _inherit_from_parent(self, credit: Credit, worker: int) -> bool:
        parent_id = credit.parent_id
        parent = self._sessions.get(parent_id) if parent_id is not None else None
        found = parent is not None and worker in parent.holders
        if parent is not None and parent_id is not None:
            self.fork_child_settled(parent_id)
        return found

    def _end(self, sid: str, state: _Session) -> None:
        state.ended = True
        self._release_if_unpinned(sid, state)

    def _release_if_unpinned(self, sid: str, state: _Session) -> None:
        # A FORK parent's current copy is not an orphan while its children may still copy it.
        if state.fork_children_started < state.fork_children_expected:
            return
        # Evict the copy on the worker that served the final turn; copies elsewhere are the
        # leak this product measures: nothing will ever evict them but the capacity cap.
        last = state.last_worker
        size = state.holders.pop(last, None)
        if size is not None:
            self._count_removed(last, size, orphan=False)
        self._forget_if_done(sid, state)

    def _forget_if_done(self, sid: str, state: _Session) -> None:
        if state.ended and not state.holders:
            del self._sessions[sid]

    def _evict_oldest(self, worker: int) -> None:
        # Capacity cap, like a load generator's LRU session cache: the oldest copy goes.
        for sid, state in self._sessions.items():
            if worker in state.holders and state.last_worker != worker:
                size = state.holders.pop(worker)
                self._count_removed(worker, size, orphan=True)
                self.capacity_evictions += 1
                self._forget_if_done(sid, state)
                return

    def _count_removed(self, worker: int, size: int, orphan: bool) -> None:
        stats = self.workers[worker]
        stats.copies -= 1
        stats.bytes -= size
        self.copies -= 1
        if orphan:
            self._mark_orphan(worker, -1)

    def _mark_orphan(self, worker: int, delta: int) -> None:
        self.workers[worker].orphans += delta
        self.orphans += delta
        if self.orphans > self.peak_orphans:
            self.peak_orphans = self.orphans

    @staticmethod
    def _history_bytes(credit: Credit) -> int:
        turn = credit.turn
        if turn is None:
            return 0
        return (turn.input_tokens + turn.output_tokens) * BYTES_PER_TOKEN

    # ------------------------------------------------------------------------- inspection

    @property
    def tracked_sessions(self) -> int:
        return len(self._sessions)

    def holders_of(self, session_id: str) -> tuple[int, ...]:
        state = self._sessions.get(session_id)
        return tuple(sorted(state.holders)) if state is not None else ()
