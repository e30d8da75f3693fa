"""A mergeable log-bucketed histogram of non-negative millisecond values.

Owns bucketing, exact moments (count, min, max, sum, sum of squares) and percentile
estimates. It must not know what the values mean, keep samples, or read a clock: it is fed
numbers and answers questions, so snapshots from several processes can be summed exactly.

Bucket scheme ("log2x64"): every power of two is cut into 64 geometric buckets; value v > 2^-10
ms goes to key floor(64·log2 v), covering [2^(key/64), 2^((key+1)/64)). Answering with
2·lo·hi/(lo + hi) is within (γ - 1)/(γ + 1) = 0.54 % (γ = 2^(1/64)) of any value in the bucket,
uniformly from 1 µs to an hour and beyond. (A log-linear split via frexp has the same bucket
count with a 0.78 % worst case, and frexp's tuple costs more than one log2 on the hot path.)
Values <= 2^-10 ms (0.98 µs) share one zero bucket. Sums are kept in integer nanoseconds, so
a merge equals one histogram fed both streams, bit for bit.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Sequence
from typing import Final, TypedDict

__all__ = [
    "HISTOGRAM_SCHEME",
    "HistogramDict",
    "LatencyHistogram",
    "PercentileSummary",
]

HISTOGRAM_SCHEME: Final = "log2x64"
ZERO_FLOOR_MS: Final = 2.0**-10  # at or below: the zero bucket (below the 1 µs we promise)
_BUCKETS_PER_OCTAVE: Final = 64
# List index = key + _KEY_OFFSET. Keys above the floor are >= -640, so the sum handed to
# int() is positive and int's truncation is the floor we want without a math.floor call.
_KEY_OFFSET: Final = 10 * _BUCKETS_PER_OCTAVE
# Preallocated up to 2^22 ms (about 70 minutes); longer values grow the list once.
_INITIAL_SLOTS: Final = (22 + 10) * _BUCKETS_PER_OCTAVE
_NS_PER_MS: Final = 1e6
_SUMMARY_PERCENTILES: Final = (50.0, 90.0, 95.0, 99.0)


class HistogramDict(TypedDict):
    """The JSON shape of a histogram: sparse buckets as a flat, gap-encoded int list."""

    scheme: str
    count: int
    zero_count: int
    min_ms: float | None
    max_ms: float | None
    sum_ns: int  # integer nanoseconds: sums stay exact, so merges are associative
    sum_sq_ns2: int
    # [first_key, count, gap, count, gap, count, ...] over non-empty buckets, keys ascending
    buckets: list[int]


class PercentileSummary(TypedDict):
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    min: float | None
    max: float | None
    mean: float | None
    std: float | None


def _bucket_estimate_ms(key: int) -> float:
    """The value that minimises the worst relative error over the bucket named by key."""
    lo = math.exp2(key / _BUCKETS_PER_OCTAVE)
    hi = math.exp2((key + 1) / _BUCKETS_PER_OCTAVE)
    return 2.0 * lo * hi / (lo + hi)


class LatencyHistogram:
    """Counts of millisecond values in log buckets, with exact moments."""

    __slots__ = ("_count", "_counts", "_max_ms", "_min_ms", "_sum_ns", "_sum_sq_ns2", "_zero")

    def __init__(self) -> None:
        self._counts: list[int] = [0] * _INITIAL_SLOTS
        self._zero = 0
        self._count = 0
        self._sum_ns = 0
        self._sum_sq_ns2 = 0
        self._min_ms = math.inf
        self._max_ms = -math.inf

    # -- feeding ---------------------------------------------------------------------------

    def record(self, value_ms: float) -> None:
        """Add one value. On the hot path: one log2, one list bump, a few integer adds."""
        if value_ms > ZERO_FLOOR_MS:  # NaN fails this and the next test
            try:
                index = int(math.log2(value_ms) * 64.0 + 640.0)  # 64 per octave, + _KEY_OFFSET
                self._counts[index] += 1
            except IndexError:
                self._grow(index + 1)
                self._counts[index] += 1
            except OverflowError:  # int(inf)
                raise ValueError(f"histogram value must be finite, got {value_ms!r}") from None
        elif value_ms >= 0.0:
            self._zero += 1
        else:
            raise ValueError(f"histogram value must be a non-negative number, got {value_ms!r}")
        self._count += 1
        value_ns = int(value_ms * _NS_PER_MS + 0.5)
        self._sum_ns += value_ns
        self._sum_sq_ns2 += value_ns * value_ns
        if value_ms < self._min_ms:
            self._min_ms = value_ms
        if value_ms > self._max_ms:
            self._max_ms = value_ms

    def record_many(self, values_ms: Iterable[float]) -> None:
        record = self.record
        for value_ms in values_ms:
            record(value_ms)

    def merge(self, other: LatencyHistogram) -> None:
        """Add other's counts to ours; the result equals one histogram fed both streams."""
        if len(other._counts) > len(self._counts):
            self._grow(len(other._counts))
        theirs = other._counts
        # Element-wise add at C speed; map stops at the shorter list, our longer tail stays.
        self._counts[: len(theirs)] = map(operator.add, self._counts, theirs)
        self._zero += other._zero
        self._count += other._count
        self._sum_ns += other._sum_ns
        self._sum_sq_ns2 += other._sum_sq_ns2
        self._min_ms = min(self._min_ms, other._min_ms)
        self._max_ms = max(self._max_ms, other._max_ms)

    def copy(self) -> LatencyHistogram:
        clone = LatencyHistogram()
        clone.merge(self)
        return clone

    def _grow(self, slots: int) -> None:
        self._counts.extend([0] * (slots - len(self._counts)))

    # -- exact moments ---------------------------------------------------------------------

    @property
    def count(self) -> int:
        return self._count

    @property
    def min_ms(self) -> float | None:
        return self._min_ms if self._count else None

    @property
    def max_ms(self) -> float | None:
        return self._max_ms if self._count else None

    @property
    def sum_ms(self) -> float:
        return self._sum_ns / _NS_PER_MS

    @property
    def mean_ms(self) -> float | None:
        if not self._count:
            return None
        # int / int is correctly rounded however large the sum; clamp because each value was
        # rounded to whole nanoseconds and the mean must never leave [min, max].
        mean_ms = self._sum_ns / self._count / _NS_PER_MS
        return min(max(mean_ms, self._min_ms), self._max_ms)

    @property
    def std_ms(self) -> float | None:
        """Population standard deviation, from exact integer moments (no cancellation)."""
        if not self._count:
            return None
        n = self._count
        numerator_ns2 = n * self._sum_sq_ns2 - self._sum_ns * self._sum_ns  # = n²·variance
        return math.sqrt(numerator_ns2) / n / _NS_PER_MS

    # -- percentiles -----------------------------------------------------------------------

    def percentile(self, q: float) -> float | None:
        """The q-th percentile (0..100), linear between order statistics like numpy's default.

        None when empty. Within 0.54 % of the exact answer for values above the zero floor;
        p0 and p100 are the exact min and max.
        """
        return self.percentiles((q,))[0]

    def percentiles(self, qs: Sequence[float]) -> list[float | None]:
        """Several percentiles in one pass over the buckets."""
        for q in qs:
            if not 0.0 <= q <= 100.0:
                raise ValueError(f"percentile must be within 0..100, got {q!r}")
        n = self._count
        if not n:
            return [None for _ in qs]
        # Order statistics needed: numpy's "linear" method reads ranks floor(h) and ceil(h) of
        # h = (n - 1)·q/100 and interpolates. Each estimate is within the bucket bound, and a
        # convex combination of two values each within ±ε stays within ±ε.
        positions = [(n - 1) * q / 100.0 for q in qs]
        ranks = sorted({r for h in positions for r in (math.floor(h), math.ceil(h))})
        values = dict(zip(ranks, self._order_statistics_ms(ranks), strict=True))
        answers: list[float | None] = []
        for h in positions:
            below = math.floor(h)
            fraction = h - below
            value = values[below]
            if fraction:
                value += fraction * (values[math.ceil(h)] - value)
            answers.append(value)
        return answers

    def _order_statistics_ms(self, ranks: Sequence[int]) -> list[float]:
        """Estimates of the values at 0-based ranks (ascending), walking buckets once."""
        last = self._count - 1
        lowest, highest = self._min_ms, self._max_ms
        out: list[float] = []
        pending = iter(ranks)
        rank = next(pending, None)
        # The zero bucket first: its only known member is the exact minimum.
        seen = self._zero
        while rank is not None and rank < seen:
            out.append(highest if rank == last else lowest)
            rank = next(pending, None)
        for index, n in enumerate(self._counts):
            if rank is None:
                break
            if not n:
                continue
            seen += n
            if rank >= seen:
                continue
            estimate = min(max(_bucket_estimate_ms(index - _KEY_OFFSET), lowest), highest)
            while rank is not None and rank < seen:
                if rank == 0:
                    out.append(lowest)
                elif rank == last:
                    out.append(highest)
                else:
                    out.append(estimate)
                rank = next(pending, None)
        return out

    def summary(self) -> PercentileSummary:
        p50, p90, p95, p99 = self.percentiles(_SUMMARY_PERCENTILES)
        return {
            "p50": p50,
            "p90": p90,
            "p95": p95,
            "p99": p99,
            "min": self.min_ms,
            "max": self.max_ms,
            "mean": self.mean_ms,
            "std": self.std_ms,
        }

    # -- snapshots -------------------------------------------------------------------------

    def to_dict(self) -> HistogramDict:
        buckets: list[int] = []
        previous_key: int | None = None
        for index, n in enumerate(self._counts):
            if n:
                key = index - _KEY_OFFSET
                buckets.append(key if previous_key is None else key - previous_key)
                buckets.append(n)
                previous_key = key
        return {
            "scheme": HISTOGRAM_SCHEME,
            "count": self._count,
            "zero_count": self._zero,
            "min_ms": self.min_ms,
            "max_ms": self.max_ms,
            "sum_ns": self._sum_ns,
            "sum_sq_ns2": self._sum_sq_ns2,
            "buckets": buckets,
        }

    @classmethod
    def from_dict(cls, data: HistogramDict) -> LatencyHistogram:
        """Rebuild a histogram from `to_dict()` output, checking it is self-consistent."""
        if data.get("scheme") != HISTOGRAM_SCHEME:
            raise ValueError(
                f"histogram scheme {data.get('scheme')!r} is not {HISTOGRAM_SCHEME!r}; "
                "snapshots must come from the same engine version"
            )
        hist = cls()
        buckets = data["buckets"]
        if len(buckets) % 2:
            raise ValueError("histogram buckets must be [key, count, gap, count, ...] pairs")
        key = 0
        total = data["zero_count"]
        for position in range(0, len(buckets), 2):
            step, n = buckets[position], buckets[position + 1]
            key = step if position == 0 else key + step
            index = key + _KEY_OFFSET
            if index < 0 or (position and step < 1) or n < 1:
                raise ValueError(f"histogram bucket entry {position // 2} is out of order")
            if index >= len(hist._counts):
                hist._grow(index + 1)
            hist._counts[index] = n
            total += n
        if total != data["count"] or data["zero_count"] < 0:
            raise ValueError("histogram count does not equal the sum of its buckets")
        hist._zero = data["zero_count"]
        hist._count = data["count"]
        hist._sum_ns = data["sum_ns"]
        hist._sum_sq_ns2 = data["sum_sq_ns2"]
        if hist._count:
            min_ms, max_ms = data["min_ms"], data["max_ms"]
            if min_ms is None or max_ms is None:
                raise ValueError("a non-empty histogram needs min_ms and max_ms")
            hist._min_ms = float(min_ms)
            hist._max_ms = float(max_ms)
        return hist
