"""Dynamo's wire names and generations, shared by both sides: the affinity emitters that put them
on requests, the live probe that finds which generation a server speaks, and the simulated
cluster and mock server that behave as one. One spelling, one place: no other module writes a
generation's value out (tests/runner/test_dynamo_vocabulary.py holds it).

A generation is one of Dynamo's affinity contracts (docs/engine.md, docs/dynamo-observed.md):

    1.2    released 1.2.x: nvext.session_control open/close; no header affinity
    bind   development builds with open/bind/close (the seeds' contract, in no release);
           X-Dynamo-Session-ID affinity too when the frontend has a header TTL
    1.6    released 1.3 to 1.6.x: no nvext.session_control (HTTP 400, unknown field);
           X-Dynamo-Session-ID affinity when the frontend runs with
           --router-session-affinity-ttl-secs

The value is what a spec's `dynamo_version`, `--dynamo-version` and an endpoint's stored
detection say.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final, Literal

__all__ = [
    "GENERATIONS",
    "GENERATION_ALIASES",
    "NO_SESSION_CONTROL_LABEL",
    "PARENT_SESSION_HEADER",
    "SESSION_FINAL_HEADER",
    "SESSION_HEADER",
    "Generation",
    "GenerationName",
    "NvextActions",
]

# Header affinity of released Dynamo (1.3 on; the frontend needs
# --router-session-affinity-ttl-secs): the key a request binds under, and since 1.6 the parent's
# id, which keys the request on a sibling group derived from the parent instead.
SESSION_HEADER: Final = "X-Dynamo-Session-ID"
PARENT_SESSION_HEADER: Final = "X-Dynamo-Parent-Session-ID"
# The request that would close the session (Dynamo 1.6 keeps the binding to its idle TTL).
SESSION_FINAL_HEADER: Final = "X-Dynamo-Session-Final"

# A generation's value as a spec field's type (the published JSON schema lists them as an
# enum of strings); Generation below is the same values with their behaviour.
GenerationName = Literal["1.2", "bind", "1.6"]
# The opening action dynamo-nvext sends (`affinity_actions`): bind where the server knows it,
# open on 1.2.x, which rejects bind with HTTP 400.
NvextActions = Literal["bind", "open"]


@dataclass(frozen=True, slots=True)
class _Contract:
    session_actions: tuple[str, ...]  # nvext.session_control actions, in serde's order
    header_affinity: bool  # X-Dynamo-Session-ID can pin sessions (with a header TTL)
    label: str  # for people: the generation and what it speaks
    short: str  # a few words for a list cell


class Generation(enum.StrEnum):
    """A Dynamo generation's affinity contract; compares equal to its value."""

    V1_2 = "1.2"
    BIND = "bind"
    V1_6 = "1.6"

    @classmethod
    def parse(cls, value: object) -> Generation:
        """The generation `value` names, a deprecated alias ("1.3") included; ValueError for
        anything else."""
        if not isinstance(value, str):
            raise ValueError(f"{value!r} is not a Dynamo generation")
        alias = GENERATION_ALIASES.get(value)
        return alias if alias is not None else cls(value)

    @property
    def session_actions(self) -> tuple[str, ...]:
        """The `nvext.session_control` actions this generation knows; () when it refuses the
        whole field."""
        return _CONTRACTS[self].session_actions

    @property
    def session_control(self) -> bool:
        """Whether it reads `nvext.session_control` at all (dynamo-nvext can work)."""
        return bool(_CONTRACTS[self].session_actions)

    @property
    def nvext_actions(self) -> NvextActions | None:
        """The `affinity_actions` dynamo-nvext must use here; None without session_control."""
        actions = _CONTRACTS[self].session_actions
        if "bind" in actions:
            return "bind"
        if "open" in actions:
            return "open"
        return None

    @property
    def header_affinity(self) -> bool:
        """Whether X-Dynamo-Session-ID can pin sessions (when the frontend has a header TTL)."""
        return _CONTRACTS[self].header_affinity

    @property
    def label(self) -> str:
        return _CONTRACTS[self].label

    @property
    def short(self) -> str:
        return _CONTRACTS[self].short


_CONTRACTS: Final[dict[Generation, _Contract]] = {
    Generation.V1_2: _Contract(
        session_actions=("open", "close"),
        header_affinity=False,
        label="Dynamo 1.2.x (session_control open/close)",
        short="Dynamo 1.2.x: session_control open/close",
    ),
    Generation.BIND: _Contract(
        session_actions=("open", "bind", "close"),
        header_affinity=True,
        label="Dynamo development build (session_control bind)",
        short="Dynamo dev build: session_control bind",
    ),
    Generation.V1_6: _Contract(
        session_actions=(),
        header_affinity=True,
        label="Dynamo 1.3+ (header affinity)",
        short="Dynamo 1.3+: header affinity",
    ),
}

GENERATIONS: Final[tuple[str, ...]] = tuple(g.value for g in Generation)
# Older names still accepted where a user or a stored spec gives a version: "1.3" meant the
# bind-era contract before it turned out that no release has it.
GENERATION_ALIASES: Final[dict[str, Generation]] = {"1.3": Generation.BIND}
# A server that answers without Dynamo's session_control (not Dynamo, or its nvext disabled).
NO_SESSION_CONTROL_LABEL: Final = "no Dynamo session_control (nvext ignored or refused)"
