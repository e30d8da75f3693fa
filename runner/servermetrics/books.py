"""The books of one run's server metrics: readings in, the live view and the summary out.

Owns turning raw counters into increases over the run (a counter's value before the run is
not the run's; a worker whose series appears mid-run started from zero; a counter that goes
down was reset), min / mean / max / last per figure, and the bounded time series (at most
`max_points` rows: when full, every other row is dropped and later ones are kept at half the
rate, so a long run keeps its whole span). Pure: the scraper feeds it, times are given.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from runner.servermetrics.catalogue import FIGURES, GAUGE_FIGURES, Figure, Reading
from runner.servermetrics.shapes import (
    FigureStats,
    ServerMetricsSummary,
    ServerMetricsView,
    WorkerArrays,
)

__all__ = ["MAX_POINTS", "VIEW_WORKERS", "ServerMetricsBooks"]

MAX_POINTS: Final = 600
# A snapshot stays under 16 KB at 64 workers: its per-worker arrays show at most this many.
VIEW_WORKERS: Final = 64
SUMMARY_WORKERS: Final = 256
# Fractions averaged over workers; counts summed.
_MEAN_FIGURES: Final = frozenset({"kv_usage", "prefix_hit_ratio"})
_DIGITS: Final = re.compile(r"(\d+)")


@dataclass(slots=True)
class _Counter:
    """One counter of one worker: its value at the start and the increase since."""

    base: float
    last: float
    reset_gain: float = 0.0  # increase counted before the counter went back down

    def update(self, value: float) -> None:
        if value < self.last:  # the server restarted: it counts from zero again
            self.reset_gain += self.last - self.base
            self.base = 0.0
        self.last = value

    @property
    def increase(self) -> float:
        return self.reset_gain + self.last - self.base


@dataclass(slots=True)
class _Stats:
    n: int = 0
    total: float = 0.0
    low: float = math.inf
    high: float = -math.inf
    last: float | None = None

    def add(self, value: float | None) -> None:
        self.last = value
        if value is None:
            return
        self.n += 1
        self.total += value
        self.low = min(self.low, value)
        self.high = max(self.high, value)

    def report(self) -> FigureStats:
        if not self.n:
            return {"min": None, "mean": None, "max": None, "last": None}
        return {
            "min": _round(self.low),
            "mean": _round(self.total / self.n),
            "max": _round(self.high),
            "last": _round(self.last),
        }


@dataclass(slots=True)
class _Series:
    """Rows of (t_s, one value per gauge figure), at most `max_points`, thinned evenly."""

    max_points: int
    rows: list[tuple[float, ...]] = field(default_factory=list)
    stride: int = 1
    seen: int = 0

    def add(self, row: tuple[float, ...]) -> None:
        self.seen += 1
        if (self.seen - 1) % self.stride:
            return
        self.rows.append(row)
        if len(self.rows) >= self.max_points:
            self.rows = self.rows[::2]
            self.stride *= 2


class ServerMetricsBooks:
    def __init__(self, *, max_points: int = MAX_POINTS) -> None:
        self.kind: str | None = None
        self.scrapes = 0
        self.t_s: float | None = None
        self.sources: dict[Figure, str] = {}
        self.extras: dict[str, float] = {}
        self.other_families = 0
        self._counters: dict[Figure, tuple[dict[str, _Counter], dict[str, _Counter]]] = {}
        self._per_worker: dict[Figure, dict[str, float | None]] = {}
        self._overall: dict[Figure, float | None] = {}
        self._stats: dict[Figure, _Stats] = {f: _Stats() for f in FIGURES}
        self._worker_stats: dict[Figure, dict[str, _Stats]] = {f: {} for f in GAUGE_FIGURES}
        self._series = _Series(max_points)

    def observe(self, t_s: float, reading: Reading, *, final: bool = False) -> None:
        """One scrape at run time `t_s`. `final`: the scrape after the run drained, which
        completes the counters; its idle levels are no sample of the run's load."""
        self.scrapes += 1
        self.t_s = t_s
        self.kind = reading.kind
        self.sources.update(reading.sources)
        self.extras = dict(reading.extras)
        self.other_families = reading.other_families
        for figure in FIGURES:
            gauge = reading.gauges.get(figure)
            if gauge is not None and final:
                continue
            if gauge is not None:
                per_worker: dict[str, float | None] = dict(gauge)
                overall = _combine(figure, gauge.values())
                if figure in self._worker_stats:
                    stats = self._worker_stats[figure]
                    for worker, value in gauge.items():
                        stats.setdefault(worker, _Stats()).add(value)
            elif figure in reading.counters:
                per_worker, overall = self._counter_figure(figure, *reading.counters[figure])
            else:
                continue
            self._per_worker[figure] = per_worker
            self._overall[figure] = overall
            self._stats[figure].add(overall)
        if not final:
            self._series.add((t_s, *(_nan(self._overall.get(f)) for f in GAUGE_FIGURES)))

    def _counter_figure(
        self, figure: Figure, num: Mapping[str, float], den: Mapping[str, float] | None
    ) -> tuple[dict[str, float | None], float | None]:
        first = figure not in self._counters
        books = self._counters.setdefault(figure, ({}, {}))
        nums = _increases(books[0], num, first=first)
        if den is None:
            return dict(nums), math.fsum(nums.values())
        dens = _increases(books[1], den, first=first)
        ratios: dict[str, float | None] = {
            w: (nums.get(w, 0.0) / d if d > 0 else None) for w, d in dens.items()
        }
        total = math.fsum(dens.values())
        return ratios, (math.fsum(nums.values()) / total if total > 0 else None)

    # -- what leaves the books ------------------------------------------------------------

    def view(self) -> ServerMetricsView:
        """The latest scrape, compact: a snapshot carries it."""
        view: ServerMetricsView = {
            "available": True,
            "kind": self.kind,
            "t_s": None if self.t_s is None else round(self.t_s, 3),
            "figures": {f: _round(v) for f, v in self._overall.items()},
            "workers": None,
        }
        ids, columns, total = self._workers(GAUGE_FIGURES, VIEW_WORKERS)
        if ids:
            workers: WorkerArrays = {
                "ids": ids,
                "kv_usage": columns.get("kv_usage", []),
                "queue_depth": columns.get("queue_depth", []),
                "running": columns.get("running", []),
            }
            view["workers"] = workers
            view["workers_total"] = total
        return view

    def summary(self) -> ServerMetricsSummary:
        """Everything the run's summary says about the server (the scraper adds url, counts)."""
        ids, columns, _ = self._workers(FIGURES, SUMMARY_WORKERS)
        rows = self._series.rows
        series: dict[str, list[float | None]] = {"t_s": [round(r[0], 3) for r in rows]}
        for i, figure in enumerate(GAUGE_FIGURES, start=1):
            if figure in self._overall:
                series[figure] = [_round(None if math.isnan(r[i]) else r[i]) for r in rows]
        summary: ServerMetricsSummary = {
            "available": True,
            "kind": self.kind,
            "figures": {f: self._stats[f].report() for f in FIGURES if f in self._overall},
            "sources": {f: s for f, s in self.sources.items()},
            "series": series,
            "extras": {k: _round(v) or 0 for k, v in self.extras.items()},
            "other_families": self.other_families,
        }
        if ids:
            workers: dict[str, list[str] | list[float | None]] = {"ids": ids, **columns}
            for figure, stats in self._worker_stats.items():
                if any(w in stats for w in ids):
                    workers[f"{figure}_mean"] = [
                        _round(stats[w].total / stats[w].n) if w in stats and stats[w].n else None
                        for w in ids
                    ]
            summary["workers"] = workers
        return summary

    def _workers(
        self, figures: Iterable[Figure], cap: int
    ) -> tuple[list[str], dict[str, list[float | None]], int]:
        """Worker ids (natural order, at most `cap`) and, per figure reported per worker, its
        values in that order; no ids when no series names a worker."""
        shown = [f for f in figures if f in self._per_worker]
        ids = {w for f in shown for w in self._per_worker[f] if w != ""}
        ordered = sorted(ids, key=_natural)[:cap]
        columns: dict[str, list[float | None]] = {}
        for figure in shown:
            values = self._per_worker[figure]
            if any(w in values for w in ordered):
                columns[figure] = [_round(values.get(w)) for w in ordered]
        return ordered, columns, len(ids)


def _increases(
    books: dict[str, _Counter], values: Mapping[str, float], *, first: bool
) -> dict[str, float]:
    for worker, value in values.items():
        counter = books.get(worker)
        if counter is None:
            # Present at the first scrape: its value predates the run. A series that appears
            # later was created by the run's own requests (labelled series appear on first use).
            books[worker] = _Counter(base=value if first else 0.0, last=value)
        else:
            counter.update(value)
    return {w: c.increase for w, c in books.items()}


def _combine(figure: Figure, values: Iterable[float]) -> float | None:
    items = [v for v in values if math.isfinite(v)]
    if not items:
        return None
    total = math.fsum(items)
    return total / len(items) if figure in _MEAN_FIGURES else total


def _natural(worker: str) -> list[int | str]:
    # "2" before "10"; "w1/0" before "w1/1".
    return [int(p) if p.isdigit() else p for p in _DIGITS.split(worker)]


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


def _round(value: float | None, digits: int = 4) -> float | None:
    """Compact JSON: integral values as ints, others to `digits` decimals."""
    if value is None or not math.isfinite(value):
        return None
    rounded = round(value, digits)
    return int(rounded) if rounded.is_integer() and abs(rounded) < 2**53 else rounded
