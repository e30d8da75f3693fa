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
        self._abandoned = 0  # keys whose users all ended without a close (left to the TTL)
        self._key_of: dict[str, str] = {}  # live session -> the key it sends under

    def record(self, credit: Credit, decision: AffinityDecision) -> None:
        key = decision.key
        action = decision.action
        if key is None or action is None:
            return
        live = self._live.get(key)
        if action is _CLOSE:
            self.closes += 1
            self._key_of.pop(credit.session_id, None)
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
            self._key_of.pop(credit.session_id, None)
        else:
            live.add(credit.session_id)
            self._key_of[credit.session_id] = key

    def session_ended(self, session_id: str) -> None:
        """A session stopped before its final turn: it has nothing more to send, so a later
        close under its key is not early on its account. A key that was its own (conversation
        scope) is left to the server's TTL."""
        key = self._key_of.pop(session_id, None)
        if key is None:
            return
        live = self._live.get(key)
        if live is not None:
            live.discard(session_id)
        if key == session_id and not live:
            self.forget(key)

    def forget(self, key: str) -> None:
        """Nothing more will be sent under `key` (its tree drained): drop its books, counting
        it as left bound if it was never closed."""
        self._live.pop(key, None)
        if key in self._bound:
            self._bound.discard(key)
            self._abandoned += 1

    @property
    def tracked_keys(self) -> int:
        """Keys the books hold state for (bounded by live trees when nothing leaks)."""
        return len(self._live) + len(self._bound)

    @property
    def keys_bound(self) -> int:
        """Keys bound and never closed (left to the server's TTL reaper)."""
        return len(self._bound) + self._abandoned
