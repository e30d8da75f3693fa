"""Books of the affinity keys a run binds and closes, and of early closes.

An early close is a close after which the tree still issues a request under that key: a session
bound under it still had requests to send when it was closed (docs/product.md §4.7), or a session
that had not sent yet (a child spawned and waiting on its delay) sends under it later. Under
lineage it must never happen. Pure bookkeeping fed with each request's decision; it does not
decide anything.
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
        # key -> sessions that sent a request under it and still have turns to send
        self._live: dict[str, set[str]] = {}
        # Tree keys closed while no session known here had turns left: a request under one of
        # them later makes that close early after all. Forgotten when the tree drains.
        self._closed: set[str] = set()
        self._bound: set[str] = set()
        self._abandoned = 0  # keys whose users all ended without a close (left to the TTL)
        self._key_of: dict[str, str] = {}  # live session -> the key it sends under

    def record(self, credit: Credit, decision: AffinityDecision) -> None:
        key = decision.key
        action = decision.action
        if key is None or action is None:
            return
        closed = self._closed
        if closed and key in closed:
            closed.discard(key)
            self.early_closes += 1  # the tree still sends under a key it closed
        live = self._live.get(key)
        if action is _CLOSE:
            self.closes += 1
            self._key_of.pop(credit.session_id, None)
            early = False
            if live is not None:
                live.discard(credit.session_id)
                early = bool(live)
                del self._live[key]
            if early:
                self.early_closes += 1
            elif key == credit.root_id:
                # Only the root's id can be sent under again by another session of the tree
                # (the lineage key); a child's own key never is, so it is not remembered.
                closed.add(key)
            self._bound.discard(key)
            return
        if action is not _FOLLOW:
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
        self._closed.discard(key)
        if key in self._bound:
            self._bound.discard(key)
            self._abandoned += 1

    @property
    def tracked_keys(self) -> int:
        """Keys the books hold state for (bounded by live trees when nothing leaks)."""
        return len(self._live) + len(self._bound) + len(self._closed)

    @property
    def keys_bound(self) -> int:
        """Keys bound and never closed (left to the server's TTL reaper)."""
        return len(self._bound) + self._abandoned
