"""Which points a sweep runs, in which order: a pure state machine fed with point results.

`Planner(sweep, results)` answers `pending()`: the points that may run now (all of them at
once on the simulated cluster, the first of them next on a live endpoint), computed from the
results recorded so far and nothing else, so a web worker can rebuild it from stored results
and drive it one run at a time. It never runs anything, reads a clock or does I/O.

Order: points of different arms interleave (A@1 B@1 A@1' B@1' A@2 B@2 ..., ' a repeat), so
drift over the sweep's hours (a server warming, a neighbour's load) hits every arm alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pydantic import BaseModel, ConfigDict

from runner.sweep.results import PointResult, Verdict, pooled_verdict
from runner.sweep.spec import Phase, Point, SweepSpec

__all__ = ["Planner", "Probe", "SloSearch", "group_key"]

GroupKey = tuple[str, float, bool]


def group_key(point: Point) -> GroupKey:
    """The repeats of one arm at one load share this key; the rate axis's synchronous point
    (its load run one tree at a time) is apart from the same load run freely."""
    return point.arm, point.load, point.phase == "synchronous"


class Probe(BaseModel):
    model_config = ConfigDict(frozen=True)

    load: float
    verdict: Verdict


class SloSearch(BaseModel):
    """One arm's search for the highest load meeting the SLOs (mode slo)."""

    model_config = ConfigDict(frozen=True)

    arm: str
    done: bool
    highest_meeting: float | None
    lowest_missing: float | None
    runs: int  # runs the search used
    exhaustive_runs: int  # runs every load of the axis would take
    probes: list[Probe]  # in the order they ran
    statement: str


class Planner:
    """The sweep's next points given its results so far (see the module docstring)."""

    def __init__(self, sweep: SweepSpec, results: Iterable[PointResult] = ()) -> None:
        self.sweep = sweep
        self._results: dict[Point, PointResult] = {}
        for result in results:
            self.record(result)

    @property
    def results(self) -> list[PointResult]:
        """Every result recorded, in the order it was recorded."""
        return list(self._results.values())

    @property
    def done(self) -> bool:
        return not self.pending()

    def pending(self) -> list[Point]:
        """The points due now, in the order to run them; [] once the sweep is complete."""
        for batch in self._batches():
            due = [point for point in batch if point not in self._results]
            if due:
                return due
        return []

    def record(self, result: PointResult) -> None:
        """Add a finished point's result. Raises ValueError for a point not due now (results
        must arrive in an order the plan allows, as `pending` hands them out)."""
        if result.point not in self.pending():
            raise ValueError(f"{result.point} is not a pending point of this sweep")
        self._results[result.point] = result

    # -- the batches of each mode ------------------------------------------------------------

    def _batches(self) -> Iterator[list[Point]]:
        """The sweep's batches in order; a later one is computed only once every point of
        the one before has a result (a generator: `pending` stops at the first open one)."""
        sweep = self.sweep
        if sweep.mode == "list":
            yield self._interleave(sweep.loads, "list")
        elif sweep.mode == "auto":
            # guidellm's sweep: the synchronous rate and the saturated one first, then the
            # points between them.
            start = self._interleave([self._synchronous_load()], "synchronous")
            start += self._interleave([sweep.saturation_load], "saturation")
            yield start
            yield self._interleave(self._between_loads(), "between")
        else:
            # Each step's probes come from the steps before it only: a step's batch must not
            # change while its points run.
            probes: dict[str, list[Probe]] = {arm.name: [] for arm in sweep.arms}
            while True:
                step = {arm: self._next_load(done) for arm, done in probes.items()}
                batch = [
                    Point(arm=arm, load=load, repeat=repeat, phase="search")
                    for repeat in range(sweep.repeats)
                    for arm, load in step.items()
                    if load is not None
                ]
                if not batch:
                    return
                yield batch
                # Resumed only once every point of the batch has its result.
                for arm, load in step.items():
                    if load is not None:
                        probes[arm].append(self._probe(arm, load))

    def _interleave(self, loads: Iterable[float], phase: Phase) -> list[Point]:
        return [
            Point(arm=arm.name, load=load, repeat=repeat, phase=phase)
            for load in loads
            for repeat in range(self.sweep.repeats)
            for arm in self.sweep.arms
        ]

    def _synchronous_load(self) -> float:
        # One lane on the concurrency axis; the rate axis's highest rate with one tree at a
        # time (arrivals queue for the single slot, so trees run back to back).
        return 1.0 if self.sweep.axis == "concurrency" else self.sweep.saturation_load

    def _between_loads(self) -> list[float]:
        """auto's points between synchronous and saturation. As guidellm places rates evenly
        between the two measured throughputs, so do we, with the arms' mean: on the rate axis
        the measured tree rates themselves; on the concurrency axis the lanes that would give
        those throughputs if each lane kept its synchronous rate (below saturation, throughput
        grows about linearly with lanes), which packs points below the knee, where the
        curves bend. Common to every arm, so curves compare at equal loads."""
        sweep = self.sweep
        figure = "requests_per_s" if sweep.axis == "concurrency" else "achieved_tree_rate_per_s"
        low = self._mean_figure("synchronous", figure)
        high = self._mean_figure("saturation", figure)
        n = sweep.auto_points
        top = sweep.saturation_load
        if sweep.axis == "concurrency":
            if low is None or high is None or high <= low:
                # Nothing measured to place by (or no gain from more lanes): evenly in lanes.
                targets = [1 + (top - 1) * k / (n + 1) for k in range(1, n + 1)]
            else:
                targets = [(low + (high - low) * k / (n + 1)) / low for k in range(1, n + 1)]
            lanes = sorted({min(max(round(t), 2), round(top) - 1) for t in targets})
            return [float(c) for c in lanes if 1 < c < top]
        if low is None or high is None or high <= low:
            low, high = top / (n + 1), top
        rates = [low + (high - low) * k / (n + 1) for k in range(1, n + 1)]
        return sorted({float(f"{r:.4g}") for r in rates if r > 0})

    def _mean_figure(self, phase: Phase, figure: str) -> float | None:
        values = [
            value
            for result in self._results.values()
            if result.point.phase == phase
            and result.valid
            and (value := result.figures.get(figure)) is not None
        ]
        return sum(values) / len(values) if values else None

    # -- the SLO search ----------------------------------------------------------------------

    def _probes(self, arm: str) -> list[Probe]:
        """The arm's search probes whose every repeat is recorded, in the order they ran."""
        loads = dict.fromkeys(
            r.point.load
            for r in self._results.values()
            if r.point.arm == arm and r.point.phase == "search"
        )
        probes = [self._probe(arm, load) for load in loads]
        return [p for p in probes if p.verdict.repeats == self.sweep.repeats]

    def _probe(self, arm: str, load: float) -> Probe:
        slo = self.sweep.slo
        assert slo is not None  # mode slo needs one (SweepSpec)
        results = [
            r
            for r in self._results.values()
            if r.point.arm == arm and r.point.load == load and r.point.phase == "search"
        ]
        verdict = pooled_verdict(results, target=slo.goodput_fraction, confidence=slo.confidence)
        return Probe(load=load, verdict=verdict)

    def _next_load(self, probes: list[Probe]) -> float | None:
        """Bracket upwards from the lowest load, doubling the step in the axis's list (index
        0, 1, 3, 7, ...) until a load misses; then bisect between the highest load meeting
        and the lowest missing until they are neighbours in the list."""
        loads = self.sweep.loads
        index = {load: i for i, load in enumerate(loads)}
        meets = {index[p.load]: p.verdict.meets for p in probes}
        if not meets:
            return loads[0]
        missing = [i for i, ok in meets.items() if not ok]
        if not missing:
            top = max(meets)
            return None if top == len(loads) - 1 else loads[min(2 * top + 1, len(loads) - 1)]
        high = min(missing)
        low = max((i for i, ok in meets.items() if ok and i < high), default=None)
        if low is None or high - low <= 1:
            return None
        return loads[(low + high) // 2]

    def searches(self) -> dict[str, SloSearch]:
        """Each arm's search so far (mode slo; {} otherwise)."""
        if self.sweep.mode != "slo":
            return {}
        return {arm.name: self._search(arm.name) for arm in self.sweep.arms}

    def _search(self, arm: str) -> SloSearch:
        sweep = self.sweep
        probes = self._probes(arm)
        meeting = [p.load for p in probes if p.verdict.meets]
        missing = [p.load for p in probes if not p.verdict.meets]
        lowest_missing = min(missing, default=None)
        highest = max(
            (load for load in meeting if lowest_missing is None or load < lowest_missing),
            default=None,
        )
        done = self._next_load(probes) is None
        runs = sum(1 for r in self._results.values() if r.point.arm == arm)
        search = SloSearch(
            arm=arm,
            done=done,
            highest_meeting=highest,
            lowest_missing=lowest_missing,
            runs=runs,
            exhaustive_runs=len(sweep.loads) * sweep.repeats,
            probes=probes,
            statement="",
        )
        return search.model_copy(update={"statement": self._statement(search)})

    def _statement(self, search: SloSearch) -> str:
        """The search's answer and how sure it is, in words."""
        sweep = self.sweep
        slo = sweep.slo
        assert slo is not None
        by_load = {p.load: p.verdict for p in search.probes}
        target = f"target {_pct(slo.goodput_fraction)}"
        parts = [f"{search.arm}:"]
        if search.highest_meeting is None and search.lowest_missing is None:
            return f"{search.arm}: no load searched yet"
        if search.highest_meeting is None:
            parts.append("no load meets the SLOs;")
        elif search.lowest_missing is None:
            parts.append(
                f"every load searched meets the SLOs, up to the axis's highest, "
                f"{sweep.load_text(search.highest_meeting)} (raise the axis to find the limit):"
            )
        else:
            parts.append(
                f"the highest load meeting the SLOs is {sweep.load_text(search.highest_meeting)}:"
            )
        shown = [
            load for load in (search.highest_meeting, search.lowest_missing) if load is not None
        ]
        details = []
        for load in shown:
            verdict = by_load[load]
            details.append(f"{sweep.load_text(load)} {_verdict_text(verdict, slo.confidence)}")
        parts.append("; ".join(details) + f" ({target}).")
        unresolved = [sweep.load_text(load) for load in shown if not by_load[load].resolved]
        if unresolved:
            parts.append(
                f"The interval at {' and '.join(unresolved)} straddles the target: longer "
                "points (more requests) would settle it."
            )
        state = "Found" if search.done else "So far"
        parts.append(
            f"{state} in {_runs(search.runs)}, where every load of the axis would take "
            f"{_runs(search.exhaustive_runs)}."
        )
        return " ".join(parts)


def _verdict_text(verdict: Verdict, confidence: float) -> str:
    if verdict.share is None:
        return f"counts as missing: no valid repeat ({verdict.reason})"
    meets = "meets" if verdict.meets else "misses"
    over = f"over {verdict.valid_repeats} repeats" if verdict.valid_repeats > 1 else "in one run"
    skipped = verdict.repeats - verdict.valid_repeats
    note = f", {skipped} invalid repeat{'s' if skipped > 1 else ''} left out" if skipped else ""
    return (
        f"{meets}: {_pct(verdict.share)} of {verdict.finished:,} requests good {over}{note} "
        f"({confidence * 100:g} % Wilson interval {_pct(verdict.low)}–{_pct(verdict.high)})"
    )


def _pct(share: float) -> str:
    return f"{share * 100:.1f} %"


def _runs(n: int) -> str:
    return f"{n} run{'s' if n != 1 else ''}"
