"""Dynamo's server-side session affinity: `nvext.session_control` parsing and binding stores.

Owns the request-body rules of Dynamo's nvext.rs (the serde-style HTTP 400 texts, the
action sets of 1.2 and of the bind-era builds, 1.3-1.6's refusal of the whole field, the 300 s
default timeout) and a key → engine store with idle TTLs, lazy expiry at access and a periodic
sweep. It does not route: the cluster decides when to peek, bind, refresh or unbind.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Literal, NamedTuple, cast

from runner.dynamo import Generation

__all__ = [
    "NVEXT_FIELDS_16",
    "SESSION_CONTROL_REFUSED_16",
    "BindingStore",
    "SessionAction",
    "SessionControl",
    "parse_session_control",
    "unknown_nvext_field_16",
]

SessionAction = Literal["open", "bind", "close"]

DEFAULT_TIMEOUT_S = 300  # SessionControl.timeout's serde default (nvext.rs, §1.2)

# axum's Json extractor prefixes every body error with this (§1.2, the 1.2 bind rejection).
_BODY_ERROR = "Failed to deserialize the JSON body into the target type: "
_PATH = "nvext.session_control"


def _expected(actions: tuple[str, ...]) -> str:
    """serde's list of the variants it knows: "expected `a` or `b`", "expected one of ..."."""
    quoted = [f"`{action}`" for action in actions]
    if len(quoted) == 2:
        return f"expected {quoted[0]} or {quoted[1]}"
    return f"expected one of {', '.join(quoted)}"


# Each generation's actions (runner.dynamo.Generation) as serde's error text lists them.
_ACTIONS: dict[Generation, frozenset[str]] = {
    g: frozenset(g.session_actions) for g in Generation if g.session_control
}
_EXPECTED_ACTIONS: dict[Generation, str] = {
    g: _expected(g.session_actions) for g in Generation if g.session_control
}
# Released 1.3 to 1.6.x: NvExt has no `session_control` and refuses unknown keys (serde
# deny_unknown_fields). The keys and the wording are real 1.6.1's (docs/dynamo-observed.md §a);
# over HTTP the text ends with the body position, " at line L column C", which only a server
# holding the body can add (the mock does).
NVEXT_FIELDS_16: tuple[str, ...] = (
    "greed_sampling",
    "use_raw_prompt",
    "annotations",
    "backend_instance_id",
    "token_data",
    "max_thinking_tokens",
    "cache_salt",
    "extra_fields",
    "metadata_upload",
    "prefill_worker_id",
    "decode_worker_id",
    "dp_rank",
    "prefill_dp_rank",
    "agent_hints",
    "request_timestamp_ms",
    "routing_constraints",
    "router",
)
_NVEXT_EXPECTED_16 = ", ".join(f"`{name}`" for name in NVEXT_FIELDS_16)


def unknown_nvext_field_16(name: str) -> str:
    """Dynamo 1.6.1's 400 text for an `nvext` key it does not know, without the position."""
    return f"{_BODY_ERROR}unknown field `{name}`, expected one of {_NVEXT_EXPECTED_16}"


SESSION_CONTROL_REFUSED_16 = unknown_nvext_field_16("session_control")


class SessionControlError(ValueError):
    """A `session_control` value Dynamo would reject with HTTP 400; str() is the body text."""


class SessionControl(NamedTuple):  # immutable; cheaper to build than a frozen dataclass
    session_id: str
    action: SessionAction | None  # None: continue an existing binding, create none
    timeout_s: int  # the binding's idle TTL; ignored by close


def parse_session_control(raw: object, *, version: Generation) -> SessionControl:
    """Validate `nvext.session_control` as sent, the way the chosen Dynamo version does.

    Raises SessionControlError carrying the 400 text. The 1.2 `bind` rejection is 1.2.x's
    verbatim (as aiperf's DynamoSessionControlDetector tests quote it); the other texts
    follow serde's wording (1.6.1's: docs/dynamo-observed.md §a). A generation without
    session_control refuses the field whatever it holds.
    """
    if not version.session_control:
        raise SessionControlError(SESSION_CONTROL_REFUSED_16)
    if not isinstance(raw, Mapping):
        raise _error(_PATH, f"invalid type: {_serde_kind(raw)}, expected struct SessionControl")
    if "session_id" not in raw:
        raise _error(_PATH, "missing field `session_id`")
    session_id = raw["session_id"]
    if not isinstance(session_id, str):
        raise _error(
            f"{_PATH}.session_id", f"invalid type: {_serde_kind(session_id)}, expected a string"
        )
    action = raw.get("action")
    if action is not None:
        if not isinstance(action, str):
            raise _error(
                f"{_PATH}.action",
                f"invalid type: {_serde_kind(action)}, expected variant identifier",
            )
        if action not in _ACTIONS[version]:
            raise _error(
                f"{_PATH}.action", f"unknown variant `{action}`, {_EXPECTED_ACTIONS[version]}"
            )
    timeout = raw.get("timeout", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int):
        raise _error(f"{_PATH}.timeout", f"invalid type: {_serde_kind(timeout)}, expected u64")
    if timeout < 0:
        raise _error(f"{_PATH}.timeout", f"invalid value: integer `{timeout}`, expected u64")
    # The membership test above narrowed `action` to one of the Literal's values.
    return SessionControl(
        session_id=session_id, action=cast("SessionAction | None", action), timeout_s=timeout
    )


def _error(path: str, problem: str) -> SessionControlError:
    return SessionControlError(f"{_BODY_ERROR}{path}: {problem}")


def _serde_kind(value: object) -> str:
    """How serde names an unexpected JSON value in its error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{'true' if value else 'false'}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value}`"
    if isinstance(value, str):
        return f"string {json.dumps(value)}"
    if isinstance(value, Mapping):
        return "map"
    if isinstance(value, list | tuple):
        return "sequence"
    return type(value).__name__


class _Binding:
    __slots__ = ("engine", "expires_s", "ttl_s")

    def __init__(self, engine: int, expires_s: float, ttl_s: float) -> None:
        self.engine = engine
        self.expires_s = expires_s
        self.ttl_s = ttl_s


class BindingStore:
    """Session key → engine with an idle TTL, plus per-engine counters of what happened.

    A binding is expired from its `expires_s` on (exact at access: `peek` drops it); `sweep`
    reaps the ones nobody asks about, as Dynamo's 30 s reaper does. Every removal by expiry
    is counted, whichever of the two finds it. The caller counts follows and fallbacks (it
    knows where the request went); the store keeps the lists.
    """

    __slots__ = ("_by_key", "binds", "closes", "dropped", "expiries", "fallbacks", "follows")

    def __init__(self, engines: int) -> None:
        self._by_key: dict[str, _Binding] = {}
        self.binds = [0] * engines
        self.closes = [0] * engines
        self.expiries = [0] * engines
        self.dropped = [0] * engines  # removed because the engine's worker went down
        self.follows = [0] * engines  # requests sent to the engine by a live binding
        self.fallbacks = [0] * engines  # soft affinity: bound here, sent elsewhere

    def __len__(self) -> int:
        """Entries held, expired ones not yet found by a peek or a sweep included."""
        return len(self._by_key)

    def peek(self, key: str, now_s: float) -> int | None:
        """The engine `key` is bound to, or None (an expired binding is removed here)."""
        binding = self._by_key.get(key)
        if binding is None:
            return None
        if now_s >= binding.expires_s:
            del self._by_key[key]
            self.expiries[binding.engine] += 1
            return None
        return binding.engine

    def bind(self, key: str, engine: int, *, expires_s: float, ttl_s: float) -> None:
        """Store or overwrite the binding (bind/open overwrite and refresh, §1.2)."""
        self._by_key[key] = _Binding(engine, expires_s, ttl_s)
        self.binds[engine] += 1

    def slide(self, key: str, now_s: float) -> None:
        """Sliding-TTL refresh of a live binding: expires `ttl` after `now_s`."""
        binding = self._by_key[key]
        binding.expires_s = now_s + binding.ttl_s

    def hold_until(self, key: str, expires_s: float) -> None:
        """Keep a live binding at least until `expires_s` (header affinity's lease + idle TTL)."""
        binding = self._by_key[key]
        if expires_s > binding.expires_s:
            binding.expires_s = expires_s

    def unbind(self, key: str) -> int | None:
        """Remove the binding (close); the engine it pointed to, or None if there was none."""
        binding = self._by_key.pop(key, None)
        if binding is None:
            return None
        self.closes[binding.engine] += 1
        return binding.engine

    def sweep(self, now_s: float) -> None:
        expired = [key for key, b in self._by_key.items() if now_s >= b.expires_s]
        for key in expired:
            self.expiries[self._by_key.pop(key).engine] += 1

    def drop_engines(self, engines: frozenset[int]) -> None:
        """Forget every binding to these engines (their worker went down)."""
        gone = [key for key, b in self._by_key.items() if b.engine in engines]
        for key in gone:
            self.dropped[self._by_key.pop(key).engine] += 1

    def live_per_engine(self, now_s: float) -> list[int]:
        counts = [0] * len(self.binds)
        for binding in self._by_key.values():
            if now_s < binding.expires_s:
                counts[binding.engine] += 1
        return counts
