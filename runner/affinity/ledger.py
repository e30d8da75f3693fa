"""Books of the affinity keys a run binds and closes, and of early closes.

An early close is a close sent for a key while another session bound under that key still has
requests to send (PRODUCT.md §4.7): under lineage it must never happen. Pure bookkeeping fed
with each request's decision; it does not decide anything.
"""

from __future__ import annotations

from runner.affinity.emitters import Action, AffinityDecision
from runner.credit import Credit

__all__ = ["AffinityLedger"]

_CLOSE, _FOLLOW = Action.CLOSE, Action.FOLLOW  # enum member lookups are slow on hot paths


class AffinityLedger:
    def __init__(self) -> None:
        self.binds = 0
        self.closes = 0
        self.early_closes = 0
        self.follows = 0
        # key -> sessions that sent a request under it and still have turns to send
        self._live: dict[str, set[str]] = {}
        self._bound: set[str] = set()

    def record(self, credit: Credit, decision: AffinityDecision) -> None:
        key = decision.key
        action = decision.action
        if key is None or action is None:
            return
        live = self._live.get(key)
        if action is _CLOSE:
            self.closes += 1
            if live is not None:
                live.discard(credit.session_id)
                if live:
                    self.early_closes += 1
                del self._live[key]
            self._bound.discard(key)
            return
        if action is _FOLLOW:
            self.follows += 1
        else:
            self.binds += 1
            self._bound.add(key)
        if live is None:
            live = self._live[key] = set()
        if credit.is_final_turn:
            live.discard(credit.session_id)
        else:
            live.add(credit.session_id)

    def session_ended(self, credit: Credit) -> None:
        """A session stopped before its final turn: it has nothing more to send."""
        for live in self._live.values():
            live.discard(credit.session_id)

    @property
    def keys_bound(self) -> int:
        """Keys bound and never closed (left to the server's TTL reaper)."""
        return len(self._bound)
