"""The mock server's configuration: the cluster it serves, its model name, key and faults.

Owns every knob of `runner/mockserver` with its default, validated once when built (bad
values raise SpecError). Plain frozen data: no I/O, no clock, no randomness of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, get_args

from runner.cluster import ClusterConfig
from runner.errors import SpecError

__all__ = ["FAULT_KINDS", "FaultConfig", "FaultKind", "MockServerConfig"]

# error: HTTP 500   rate_limit: HTTP 429 + Retry-After   overload: HTTP 503
# disconnect: the connection drops mid-answer   stall: the answer pauses stall_s mid-stream
FaultKind = Literal["error", "rate_limit", "overload", "disconnect", "stall"]
FAULT_KINDS: tuple[FaultKind, ...] = get_args(FaultKind)

# An output longer than this is refused with a 400: it bounds one response's size (~200 bytes
# per streamed token) the way a real server's context length does.
MAX_OUTPUT_TOKENS = 131_072


@dataclass(frozen=True, kw_only=True, slots=True)
class FaultConfig:
    """Injected faults: each completion request draws at most one, with these probabilities.

    Rates are fractions 0–1 and must add up to at most 1. The draws come from one RNG seeded
    with `seed`, in request arrival order, so a run with one client in order is repeatable.
    """

    error_rate: float = 0.0
    rate_limit_rate: float = 0.0
    overload_rate: float = 0.0
    disconnect_rate: float = 0.0
    stall_rate: float = 0.0
    stall_s: float = 1.0  # how long a stalled answer pauses (wall seconds, not time-scaled)
    retry_after_s: int = 1  # the Retry-After header of an injected 429
    seed: int = 0

    def __post_init__(self) -> None:
        for kind, rate in self.rates().items():
            if not (math.isfinite(rate) and 0.0 <= rate <= 1.0):
                raise SpecError(f"the {kind} fault rate must be a fraction 0-1, got {rate}")
        total = sum(self.rates().values())
        if total > 1.0 + 1e-9:
            raise SpecError(f"fault rates add up to {total:g}; their sum must be at most 1")
        if not (math.isfinite(self.stall_s) and self.stall_s >= 0):
            raise SpecError(f"stall_s must be 0 or more seconds, got {self.stall_s}")
        if self.retry_after_s < 0:
            raise SpecError(f"retry_after_s must be 0 or more, got {self.retry_after_s}")

    def rates(self) -> dict[FaultKind, float]:
        return {
            "error": self.error_rate,
            "rate_limit": self.rate_limit_rate,
            "overload": self.overload_rate,
            "disconnect": self.disconnect_rate,
            "stall": self.stall_rate,
        }

    @property
    def enabled(self) -> bool:
        return any(rate > 0 for rate in self.rates().values())


@dataclass(frozen=True, kw_only=True, slots=True)
class MockServerConfig:
    """What the mock serves: one model name over a simulated cluster, with optional faults.

    `api_key` None accepts every request; otherwise `/v1/*` and `/admin/*` need
    `Authorization: Bearer <api_key>`. A request without `max_tokens` gets
    `default_max_tokens` tokens and finish_reason "stop" (it "ended by itself").
    """

    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    model: str = "mock-model"
    api_key: str | None = None
    faults: FaultConfig = field(default_factory=FaultConfig)
    default_max_tokens: int = 16

    def __post_init__(self) -> None:
        if not self.model or self.model != self.model.strip():
            raise SpecError(f"the served model name must be non-empty, got {self.model!r}")
        if self.api_key is not None and not self.api_key:
            raise SpecError("the API key must not be empty (leave it unset to accept any)")
        if not 1 <= self.default_max_tokens <= MAX_OUTPUT_TOKENS:
            raise SpecError(
                f"default_max_tokens must be 1..{MAX_OUTPUT_TOKENS}, got {self.default_max_tokens}"
            )
