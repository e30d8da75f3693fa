"""The little statistics a sweep needs: a Wilson interval and a spread over repeats.

Pure functions on numbers; nothing here knows what a point or a run is.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

__all__ = ["Spread", "overlap", "spread_of", "wilson_interval"]


def wilson_interval(
    successes: int, trials: int, *, confidence: float = 0.95
) -> tuple[float, float]:
    """The Wilson score interval of a binomial share (Wilson 1927; Newcombe 1998, method 3).

    Chosen over the normal approximation because good shares sit near 1, where that one
    runs past 1 and is too narrow for the few hundred requests a point holds. No trials: the
    whole of [0, 1]."""
    if trials <= 0:
        return 0.0, 1.0
    successes = min(max(successes, 0), trials)
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    share = successes / trials
    z2n = z * z / trials
    centre = (share + z2n / 2) / (1 + z2n)
    half = z * math.sqrt(share * (1 - share) / trials + z2n / (4 * trials)) / (1 + z2n)
    # At 0 and at every trial the bound is exactly 0 (or 1): say so, not 2.8e-17.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return low, high


class Spread(BaseModel):
    """One figure over a point's repeats: mean, range and sample standard deviation."""

    model_config = ConfigDict(frozen=True)

    mean: float
    min: float
    max: float
    std: float  # 0 for a single repeat
    n: int


def spread_of(values: Iterable[float | None]) -> Spread | None:
    """The spread of the values present; None when there are none."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    return Spread(
        mean=statistics.fmean(present),
        min=min(present),
        max=max(present),
        std=statistics.stdev(present) if len(present) > 1 else 0.0,
        n=len(present),
    )


def overlap(a: Spread, b: Spread) -> bool:
    """Do the two ranges of repeats overlap? Then their difference is within noise."""
    return a.min <= b.max and b.min <= a.max
