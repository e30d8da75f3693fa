"""The replay engine: one scheduler, router, session caches and affinity emitter, composed.

Both drivers use it unchanged — the virtual-time simulator and the wall-clock HTTP replay — so
routing, caching and affinity can never diverge between the two clocks. It decides where each
credit goes and what it carries; sending, timing and measuring belong to the driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from runner.affinity.emitters import AffinityConfig, AffinityDecision, AffinityEmitter
from runner.affinity.ledger import AffinityLedger
from runner.affinity.placement import PlacementBook
from runner.credit import Credit
from runner.replay.scheduler import ReplayConfig, ReplayScheduler
from runner.routing.router import Policy, StickyRouter
from runner.trace.model import Tree
from runner.workers.cache import SessionCaches

__all__ = ["Dispatch", "Engine", "EngineConfig"]

WORKER_LOST = "worker_lost"


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineConfig:
    policy: Policy = Policy.SPAWN_PIN
    client_workers: int = 8
    affinity: AffinityConfig = field(default_factory=AffinityConfig)
    # A lost client worker's sessions: "migrate" rebuilds their history from the trace on
    # another worker (a counted switch); "fail" ends them with a worker_lost error.
    on_worker_loss: Literal["migrate", "fail"] = "migrate"


class Dispatch(NamedTuple):
    """A credit ready to send: the client worker chosen and the affinity it carries.

    `error` is set when the credit must not be sent at all (its session was on a lost worker);
    the driver then completes it at once with that error.
    """

    credit: Credit
    worker: int
    affinity: AffinityDecision
    error: str | None = None


class Engine:
    def __init__(self, trees: Sequence[Tree], replay: ReplayConfig, config: EngineConfig) -> None:
        self.config = config
        self.scheduler = ReplayScheduler(trees, replay)
        self.router = StickyRouter(config.client_workers, policy=config.policy)
        self.caches = SessionCaches(config.client_workers)
        self.emitter = AffinityEmitter(config.affinity)
        self.ledger = AffinityLedger()
        self.placement = PlacementBook()
        # Live FORK child id -> parent id. Whether the child holds a reference on the parent's
        # sticky entry is the router's to know (it aliases the children it counts).
        self._fork_parents: dict[str, str] = {}
        # FORK children whose parent had no entry when they were spawned (a parent replayed
        # from t* has sent nothing yet): they try again just before their first send.
        self._unregistered_forks: dict[str, str] = {}
        self._served: set[str] = set()  # sessions that sent at least one turn
        self._lost_sessions: set[str] = set()

    # ---------------------------------------------------------------------------- driving

    def start(self, now_s: float) -> None:
        self.scheduler.start(now_s, self)

    def next_due(self) -> float | None:
        return self.scheduler.next_due()

    def dispatch_due(self, now_s: float) -> list[Dispatch]:
        """Issue the credits due by `now_s` and decide each one's worker and affinity."""
        router = self.router
        caches = self.caches
        emitter = self.emitter
        ledger = self.ledger
        out: list[Dispatch] = []
        for credit in self.scheduler.pop_due(now_s):
            if credit.session_id in self._lost_sessions:
                out.append(Dispatch(credit, -1, AffinityDecision(), WORKER_LOST))
                continue
            if self._unregistered_forks:
                self._register_late(credit.session_id)
            worker = router.route(credit)
            caches.serve(credit, worker)
            if credit.priming:
                self._pin_for_live_forks(credit.session_id)
            self._served.add(credit.session_id)
            decision = emitter.decide(credit, client_worker=worker)
            ledger.record(credit, decision)
            out.append(Dispatch(credit, worker, decision))
        return out

    def complete(
        self,
        dispatch: Dispatch,
        now_s: float,
        *,
        error: str | None = None,
        served_by: int | None = None,
    ) -> None:
        """The request of `dispatch` finished (or failed with an error category); `served_by`
        is the inference worker that answered, when the server says."""
        if served_by is not None and error is None and not dispatch.credit.priming:
            self.placement.served(dispatch.credit, served_by, key=dispatch.affinity.key)
        if dispatch.worker >= 0:
            self.router.complete(dispatch.worker)
        session_over = (error or dispatch.error) in (WORKER_LOST, "cancelled")
        if session_over:
            self._lost_sessions.discard(dispatch.credit.session_id)
        self.scheduler.on_return(dispatch.credit, now_s, session_over=session_over)

    def lose_worker(self, worker: int) -> None:
        """A client worker is gone: its entries and caches with it."""
        owners = self.router.remove_worker(worker)
        self.caches.drop_worker(worker)
        if self.config.on_worker_loss == "fail":
            self._lost_sessions.update(owners)

    def add_worker(self) -> int:
        worker = self.router.add_worker()
        self.caches.add_worker()
        return worker

    # ----------------------------------------------------------------- ReplayObserver hooks

    def fork_child_spawned(self, parent_id: str, child_id: str) -> None:
        self._fork_parents[child_id] = parent_id
        if not self.router.register_child(parent_id, child_id):
            self._unregistered_forks[child_id] = parent_id

    def _register_late(self, session_id: str) -> None:
        parent_id = self._unregistered_forks.pop(session_id, None)
        if parent_id is not None:
            self.router.register_child(parent_id, session_id)

    def _pin_for_live_forks(self, session_id: str) -> None:
        """A primed stream's copy is pinned for its FORK children live at t* that have not
        sent yet, and only those: children of the primed turn that finished before t* will
        never take a copy (pinning for them kept the parent's copy forever)."""
        children = [
            child
            for child, parent in self._fork_parents.items()
            if parent == session_id and child not in self._served
        ]
        if children:
            self.caches.expect_fork_children(session_id, children)

    def session_ended(self, session_id: str, *, parent_id: str | None, completed: bool) -> None:
        fork_parent = self._fork_parents.pop(session_id, None)
        self._unregistered_forks.pop(session_id, None)
        if fork_parent is not None:
            # A no-op unless the child holds a reference on its parent's entry right now.
            self.router.release_child(fork_parent, session_id)
        served = session_id in self._served
        self._served.discard(session_id)
        if not completed:
            self.router.release_session(session_id)
            self.caches.session_ended(session_id)
            self.ledger.session_ended(session_id)
            self.emitter.session_ended(session_id)
        self.placement.session_ended(session_id)
        if fork_parent is not None and not served:
            # A FORK child that never started will not take its parent's pinned copy.
            self.caches.fork_child_settled(fork_parent, session_id)

    def tree_ended(self, root_id: str, *, drained: bool) -> None:
        self.emitter.forget(root_id)
        self.ledger.forget(root_id)
        self.placement.tree_ended(root_id)

    # --------------------------------------------------------------------------- reporting

    def routing_summary(self) -> dict[str, Any]:
        scheduler = self.scheduler
        caches = self.caches
        ledger = self.ledger
        return {
            "sessions": scheduler.sessions_started,
            "trees": scheduler.trees_started,
            "trees_started": scheduler.trees_started,
            "trees_completed": scheduler.trees_completed,
            "trees_cut": scheduler.trees_cut,
            "trees_skipped": scheduler.trees_skipped,
            "sessions_multi_worker": caches.sessions_multi_worker,
            "worker_switches": caches.worker_switches,
            "orphaned_session_copies": caches.orphans,
            "peak_orphaned_session_copies": caches.peak_orphans,
            "session_copies": caches.copies,
            "peak_session_copies": caches.peak_copies,
            "context_rebuilds": caches.context_rebuilds,
            "affinity_binds": ledger.binds,
            "affinity_closes": ledger.closes,
            "early_closes": ledger.early_closes,
            "affinity_keys_bound_at_end": ledger.keys_bound,
            "placement": self.placement.figures(),
        }

    def state_sizes(self) -> dict[str, int]:
        """How much per-session and per-tree state the engine holds (flat when nothing leaks)."""
        return {
            "router_keys": self.router.key_count,
            "cached_sessions": self.caches.tracked_sessions,
            "session_copies": self.caches.copies,
            "live_trees": self.scheduler.live_trees,
            "affinity_keys": self.ledger.tracked_keys,
            "affinity_opened_keys": self.emitter.tracked_keys,
            "placement": self.placement.tracked,
            "pending_forks": len(self._fork_parents),
            "served_sessions": len(self._served),
        }

    def worker_snapshot(self) -> dict[str, list[int]]:
        """Per client worker, as compact arrays (index = worker id)."""
        loads = self.router.workers
        stats = self.caches.workers
        return {
            "in_flight": [w.in_flight for w in loads],
            "sticky_sessions": [w.active_sessions for w in loads],
            "sent": [w.total_sent for w in loads],
            "session_copies": [s.copies for s in stats],
            "session_bytes": [s.bytes for s in stats],
            "orphans": [s.orphans for s in stats],
        }
