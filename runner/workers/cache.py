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
    # A FORK parent keeps its copy pinned until these FORK children (instance ids) have taken
    # theirs or settled otherwise. Named, not counted: a child that was never expected (its
    # declaring turn was not served, as before t*) must not release a pin held for another.
    pinned_for: set[str] | None = None


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
        if previous < 0 and credit.branch_mode is _FORK and credit.parent_id is not None:
            # A FORK child's first request: it inherits its parent's history here (turn 0), or
            # it resumes mid-stream from t* with its own; either way it no longer needs the
            # parent's pinned copy.
            parent = sessions.get(credit.parent_id)
            if credit.turn_index == 0:
                rebuilt = parent is None or worker not in parent.holders
            if parent is not None and parent.pinned_for:
                self._settle(credit.parent_id, parent, sid)
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
        # A priming request's declared children were spawned before t*: the engine pins for
        # the ones still live (expect_fork_children), as only it knows which they are.
        if turn is not None and turn.branches and not credit.priming:
            for branch in turn.branches:
                if branch.mode is _FORK:
                    self._pin(state, credit, branch.children)
        if credit.is_final_turn:
            self._end(sid, state)
        return ServeOutcome(hit=hit, switched=switched, rebuilt=rebuilt)

    def expect_fork_children(self, parent_id: str, child_ids: list[str]) -> None:
        """Pin the parent's copy until these FORK children (instance ids) take theirs."""
        state = self._sessions.get(parent_id)
        if state is None:
            return
        if state.pinned_for is None:
            state.pinned_for = set(child_ids)
        else:
            state.pinned_for.update(child_ids)

    def fork_child_settled(self, parent_id: str, child_id: str) -> None:
        """A FORK child will not take its parent's copy (it ended before its first request)."""
        state = self._sessions.get(parent_id)
        if state is not None and state.pinned_for:
            self._settle(parent_id, state, child_id)

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

    @staticmethod
    def _pin(state: _Session, credit: Credit, children: tuple[str, ...]) -> None:
        # Children's instance ids share the declaring session's instance prefix
        # (`t<k>:` + template id); credits built without a template carry bare ids.
        sid = credit.session_id
        template_id = credit.template_id
        prefix = sid[: len(sid) - len(template_id)] if template_id else ""
        if state.pinned_for is None:
            state.pinned_for = set()
        state.pinned_for.update(prefix + child for child in children)

    def _settle(self, parent_id: str, parent: _Session, child_id: str) -> None:
        pins = parent.pinned_for
        if pins is None or child_id not in pins:
            return
        pins.discard(child_id)
        if not pins:
            parent.pinned_for = None
            if parent.ended:
                self._release_if_unpinned(parent_id, parent)

    def _end(self, sid: str, state: _Session) -> None:
        state.ended = True
        self._release_if_unpinned(sid, state)

    def _release_if_unpinned(self, sid: str, state: _Session) -> None:
        # A FORK parent's current copy is not an orphan while its children may still copy it.
        if state.pinned_for:
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
