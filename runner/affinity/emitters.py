"""Server-side session affinity: what each request carries so the inference router keeps a
session (or a whole agent tree) on one worker.

Owns the exact wire shapes of docs/product.md §4.5 for the three Dynamo generations — the bind-era
`nvext.session_control` bind/close (development builds), 1.2.x `open`/`close`, and the
`X-Dynamo-Session-*` headers of the releases from 1.3 on — plus plain affinity headers, and the
memory the `open` contract needs. `scope` means the same everywhere: `conversation` keys a
request on its own session id, `lineage` on the tree root's id, and only the request stamped
tree-final carries the close (`close` action, or `X-Dynamo-Session-Final: true`).
Pure: it decides body keys and headers from a credit; it never sends a request.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from runner.credit import Credit
from runner.dynamo import (
    PARENT_SESSION_HEADER,
    SESSION_FINAL_HEADER,
    SESSION_HEADER,
    NvextActions,
)
from runner.errors import SpecError

__all__ = [
    "Action",
    "AffinityConfig",
    "AffinityDecision",
    "AffinityEmitter",
    "AffinityKind",
    "KeyScope",
    "merge_nvext",
]

Scope = Literal["conversation", "lineage"]
HeaderSource = Literal["own", "parent", "root"]
# What one affinity key covers, whatever mode sends it: a whole agent tree (lineage), one
# session or its parent's children (conversation), or nothing (no key is sent).
KeyScope = Literal["lineage", "conversation", "none"]


class AffinityKind(enum.Enum):
    NONE = "none"
    DYNAMO_NVEXT = "dynamo-nvext"
    DYNAMO_HEADERS = "dynamo-headers"
    HEADER = "header"


class Action(enum.Enum):
    BIND = "bind"
    OPEN = "open"
    FOLLOW = "follow"  # bare {"session_id"}: follow and refresh an existing binding
    CLOSE = "close"


@dataclass(frozen=True, slots=True, kw_only=True)
class AffinityConfig:
    kind: AffinityKind = AffinityKind.NONE
    scope: Scope = "conversation"
    timeout_s: int = 300  # Dynamo's SessionControl default (serde default, nvext.rs)
    # dynamo-nvext's opening action: "bind" for the development builds (the only ones that
    # know it), "open" for 1.2.x, which rejects bind with HTTP 400. Releases from 1.3 on have
    # no session_control at all (runner.dynamo.Generation).
    actions: NvextActions = "bind"
    # Lineage close discipline: "tree-final" (ours, never early) or "root-final" (the first
    # draft of the lineage change, kept to show the sibling-teardown hazard in comparisons).
    close_on: Literal["tree-final", "root-final"] = "tree-final"
    header_name: str = "X-Session-ID"
    header_source: HeaderSource = "own"
    # dynamo-headers: also send X-Dynamo-Parent-Session-ID. Dynamo 1.6 then keys a child on a
    # sibling group derived from its parent (siblings together, apart from the parent), so it
    # is conversation-only: lineage sends the root's id alone to keep the tree whole.
    parent_header: bool = False

    @property
    def key_scope(self) -> KeyScope:
        """What one key covers, the one answer for the emitter, the books and the run page:
        the Dynamo modes key by `scope`; a plain header carrying the tree root's id keys a
        tree (its own or its parent's id, a session or a sibling group)."""
        kind = self.kind
        if kind is AffinityKind.NONE:
            return "none"
        if kind is AffinityKind.HEADER:
            return "lineage" if self.header_source == "root" else "conversation"
        return self.scope

    def __post_init__(self) -> None:
        if self.timeout_s < 1:
            raise SpecError(f"affinity timeout must be >= 1 s, got {self.timeout_s}")
        if self.parent_header and self.scope == "lineage":
            raise SpecError(
                "parent_header sends X-Dynamo-Parent-Session-ID, which makes Dynamo 1.6 key "
                "children on their parent's sibling group and split the tree: lineage sends "
                "the root's id alone (turn parent_header off, or use scope conversation)"
            )
        if self.kind is AffinityKind.HEADER and not _is_token(self.header_name):
            raise SpecError(
                f"affinity header name {self.header_name!r} is not a valid HTTP header name"
            )


@dataclass(frozen=True, slots=True)
class AffinityDecision:
    """What one request carries: an `nvext.session_control` object and/or headers."""

    key: str | None = None
    action: Action | None = None
    session_control: Mapping[str, Any] | None = None
    headers: tuple[tuple[str, str], ...] = ()


_NO_AFFINITY = AffinityDecision()
# Enum member lookups cost several plain attribute loads: the per-request path uses aliases.
_NONE, _NVEXT, _HEADERS = AffinityKind.NONE, AffinityKind.DYNAMO_NVEXT, AffinityKind.DYNAMO_HEADERS
_BIND, _OPEN, _FOLLOW, _CLOSE = Action.BIND, Action.OPEN, Action.FOLLOW, Action.CLOSE


class AffinityEmitter:
    """Turns a credit into its affinity decision; one per run, shared by all client workers."""

    def __init__(self, config: AffinityConfig) -> None:
        self.config = config
        self._lineage = config.key_scope == "lineage"
        # Dynamo 1.2.x `open` is not idempotent, so each client worker opens a key once and
        # sends bare follows after: key -> the client workers that opened it (a tree, or a
        # bounced session, spans workers). A close forgets the key for every worker, as the
        # server unbinds it for all.
        self._opened: dict[str, set[int]] = {}

    def decide(self, credit: Credit, *, client_worker: int) -> AffinityDecision:
        config = self.config
        kind = config.kind
        if kind is _NONE:
            return _NO_AFFINITY
        if kind is _NVEXT:
            return self._nvext(credit, client_worker)
        if kind is _HEADERS:
            return self._dynamo_headers(credit)
        value = _source(credit, config.header_source)
        if value is None:
            return _NO_AFFINITY  # a root has no parent: nothing to carry
        return AffinityDecision(key=value, headers=((config.header_name, value),))

    def _key(self, credit: Credit) -> tuple[str, bool]:
        """The key a request binds under and whether it carries the close, by scope."""
        config = self.config
        if self._lineage:
            if config.close_on == "tree-final":
                return credit.root_id, credit.is_tree_final
            return credit.root_id, credit.is_final_turn and credit.parent_id is None
        return credit.session_id, credit.is_final_turn

    def _dynamo_headers(self, credit: Credit) -> AffinityDecision:
        """Released Dynamo (1.3 on): the server binds a key on its first dispatched request and
        follows it after, so the first request under a key counts as the bind. Dynamo has no
        unbind: the final header is sent (and counted as the close) for servers that use it."""
        key, closing = self._key(credit)
        headers = [(SESSION_HEADER, key)]
        if self.config.parent_header and credit.parent_id is not None:
            headers.append((PARENT_SESSION_HEADER, credit.parent_id))
        if closing:
            self._opened.pop(key, None)
            headers.append((SESSION_FINAL_HEADER, "true"))
            return AffinityDecision(key, _CLOSE, headers=tuple(headers))
        if key in self._opened:
            return AffinityDecision(key, _FOLLOW, headers=tuple(headers))
        self._opened[key] = set()
        return AffinityDecision(key, _BIND, headers=tuple(headers))

    def _nvext(self, credit: Credit, client_worker: int) -> AffinityDecision:
        config = self.config
        key, closing = self._key(credit)
        if closing:
            self._opened.pop(key, None)
            return AffinityDecision(key, _CLOSE, {"session_id": key, "action": "close"})
        if config.actions == "bind":
            # Every bind refreshes the server's TTL, so long think times never expire it.
            control = {"session_id": key, "action": "bind", "timeout": config.timeout_s}
            return AffinityDecision(key, _BIND, control)
        opened = self._opened.get(key)
        if opened is None:
            self._opened[key] = {client_worker}
        elif client_worker in opened:
            return AffinityDecision(key, _FOLLOW, {"session_id": key})
        else:
            opened.add(client_worker)
        control = {"session_id": key, "action": "open", "timeout": config.timeout_s}
        return AffinityDecision(key, _OPEN, control)

    def forget(self, key: str) -> None:
        """Nothing more is sent under `key` (its tree drained) and it was not closed."""
        self._opened.pop(key, None)

    def session_ended(self, session_id: str) -> None:
        """A session ended without its final turn: under conversation scope its own key is
        done (under lineage the tree's key lives on until the tree drains)."""
        if self.config.key_scope == "conversation":
            self._opened.pop(session_id, None)

    @property
    def tracked_keys(self) -> int:
        """Keys remembered as opened (bounded by live sessions when nothing leaks)."""
        return len(self._opened)


def merge_nvext(body: Mapping[str, Any] | None, decision: AffinityDecision) -> dict[str, Any]:
    """Copy-on-write merge of the decision into a request body that may carry its own `nvext`.

    Other `nvext` keys are kept; an existing `session_control` dict is merged under ours (our
    keys win, extra keys stay); a non-dict `nvext` is replaced. The input is never mutated.
    """
    merged: dict[str, Any] = dict(body) if body else {}
    control = decision.session_control
    if control is None:
        return merged
    nvext = merged.get("nvext")
    new_nvext: dict[str, Any] = dict(nvext) if isinstance(nvext, Mapping) else {}
    existing = new_nvext.get("session_control")
    if isinstance(existing, Mapping):
        new_nvext["session_control"] = {**existing, **control}
    else:
        new_nvext["session_control"] = dict(control)
    merged["nvext"] = new_nvext
    return merged


def _source(credit: Credit, source: HeaderSource) -> str | None:
    if source == "own":
        return credit.session_id
    if source == "parent":
        return credit.parent_id
    return credit.root_id


_TOKEN_CHARS = frozenset(
    "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)


def _is_token(name: str) -> bool:
    """RFC 9110 token: what a header name may be made of."""
    return bool(name) and all(ch in _TOKEN_CHARS for ch in name)
