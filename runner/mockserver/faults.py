"""Which fault, if any, one completion request gets: a seeded draw, nothing else.

Owns the probabilities of FaultConfig and where a broken or stalled answer breaks. It does
not inject anything (the app sends the 500, drops the connection, sleeps) and counts
nothing (`stats.py` does, for what was actually injected).
"""

from __future__ import annotations

import random
from typing import NamedTuple

from runner.mockserver.config import FaultConfig, FaultKind

__all__ = ["NO_FAULT", "FaultDraw", "FaultInjector"]


class FaultDraw(NamedTuple):
    kind: FaultKind | None
    # disconnect / stall: how many output tokens are sent before it happens. At least one
    # when the answer has two or more, so the break is mid-stream and never after the last.
    at_token: int = 0


NO_FAULT = FaultDraw(None)


class FaultInjector:
    """One uniform draw per request against the cumulative rates, in arrival order."""

    __slots__ = ("_bounds", "_rng")

    def __init__(self, config: FaultConfig) -> None:
        self._rng = random.Random(config.seed)
        bounds: list[tuple[float, FaultKind]] = []
        total = 0.0
        for kind, rate in config.rates().items():
            if rate > 0:
                total += rate
                bounds.append((total, kind))
        self._bounds = tuple(bounds)

    def draw(self, output_tokens: int) -> FaultDraw:
        if not self._bounds:
            return NO_FAULT  # no faults configured: no RNG work on the hot path
        u = self._rng.random()
        for bound, kind in self._bounds:
            if u < bound:
                if kind in ("disconnect", "stall"):
                    at = self._rng.randint(1, output_tokens - 1) if output_tokens > 1 else 0
                    return FaultDraw(kind, at)
                return FaultDraw(kind)
        return NO_FAULT
