"""A sweep's results read together: repeats aggregated, Pareto frontiers, headlines per arm pair.

Pure: built from a Planner's recorded results (and its SLO searches) whenever asked, so a
report of a sweep still running is the same shape as a finished one's. It runs nothing.

Noise: with repeats, two arms differ beyond noise only when the ranges of their repeats do
not overlap; a difference inside the spread is "within noise". Single runs have no spread to
judge by, and a headline says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import combinations
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from runner.sweep.plan import Planner, SloSearch, group_key
from runner.sweep.results import FIGURES, PointResult, Verdict, pooled_verdict
from runner.sweep.spec import Phase, SweepSpec
from runner.sweep.stats import Spread, overlap, spread_of

__all__ = [
    "Aggregate",
    "FrontierPoint",
    "Headline",
    "SweepReport",
    "aggregate",
    "build_report",
    "csv_rows",
    "frontier",
    "headline",
]

_FROZEN = ConfigDict(frozen=True)


class Aggregate(BaseModel):
    """One arm at one load over its repeats: the spread of each figure over the valid ones."""

    model_config = _FROZEN

    arm: str
    load: float
    phase: Phase
    label: str
    repeats: int
    valid_repeats: int
    valid: bool
    invalid_reason: str | None
    figures: dict[str, Spread | None]
    verdict: Verdict | None  # against the SLOs, when the sweep has them

    def mean(self, figure: str) -> float | None:
        spread = self.figures.get(figure)
        return None if spread is None else spread.mean


class FrontierPoint(BaseModel):
    model_config = _FROZEN

    load: float
    label: str
    tokens_per_s_per_user: float
    throughput: float  # output tok/s, per GPU when the sweep knows the GPUs


class Headline(BaseModel):
    model_config = _FROZEN

    arms: tuple[str, str]
    text: str
    # False: the difference lies beyond the repeats' spread; True: within it; None: nothing
    # to judge (single runs, or no difference to judge).
    within_noise: bool | None


class SweepReport(BaseModel):
    """Everything a sweep produced, as the CLI writes it (`--json`) and a page would draw it."""

    model_config = _FROZEN

    sweep: SweepSpec
    status: Literal["running", "completed", "cancelled"]
    runs: int
    wall_s: float
    points: list[PointResult]  # every run, in the order it finished
    aggregates: list[Aggregate]  # per arm and load, in arm order then load
    frontiers: dict[str, list[FrontierPoint]]  # per arm, by interactivity
    searches: dict[str, SloSearch]  # mode slo, per arm
    headlines: list[Headline]  # per arm pair


def aggregate(sweep: SweepSpec, results: Iterable[PointResult]) -> list[Aggregate]:
    """Repeats grouped per arm and load (the rate axis's synchronous point apart)."""
    groups: dict[tuple[str, float, bool], list[PointResult]] = {}
    for result in results:
        groups.setdefault(group_key(result.point), []).append(result)
    arm_order = {arm.name: i for i, arm in enumerate(sweep.arms)}
    rows = []
    for (arm, load, synchronous), members in sorted(
        groups.items(), key=lambda item: (arm_order[item[0][0]], not item[0][2], item[0][1])
    ):
        valid = [r for r in members if r.valid]
        phase = members[0].point.phase
        verdict = None
        if sweep.slo is not None:
            verdict = pooled_verdict(
                members, target=sweep.slo.goodput_fraction, confidence=sweep.slo.confidence
            )
        rows.append(
            Aggregate(
                arm=arm,
                load=load,
                phase=phase,
                label=sweep.load_text(load, "synchronous" if synchronous else phase),
                repeats=len(members),
                valid_repeats=len(valid),
                valid=bool(valid),
                invalid_reason=None
                if valid
                else "; ".join(sorted({str(r.invalid_reason) for r in members})),
                figures={name: spread_of(r.figures.get(name) for r in valid) for name in FIGURES},
                verdict=verdict,
            )
        )
    return rows


def frontier(sweep: SweepSpec, rows: Iterable[Aggregate]) -> list[FrontierPoint]:
    """The Pareto frontier of one arm's valid points: throughput against interactivity, the
    points no other beats on both (InferenceX's tok/s per GPU against tok/s per user)."""
    throughput = "output_tokens_per_s_per_gpu" if sweep.gpus else "output_tokens_per_s"
    candidates = [
        FrontierPoint(load=row.load, label=row.label, tokens_per_s_per_user=x, throughput=y)
        for row in rows
        if row.valid
        and (x := row.mean("tokens_per_s_per_user")) is not None
        and (y := row.mean(throughput)) is not None
    ]
    kept: list[FrontierPoint] = []
    best = -1.0
    for point in sorted(candidates, key=lambda p: (-p.tokens_per_s_per_user, -p.throughput)):
        if point.throughput > best:
            kept.append(point)
            best = point.throughput
    return sorted(kept, key=lambda p: p.tokens_per_s_per_user)


def headline(sweep: SweepSpec, a: str, b: str, rows: list[Aggregate]) -> Headline:
    """One sentence comparing arms `a` and `b`: where each holds the SLOs (and the goodput
    there), or, without SLOs, their peak throughput."""
    mine = [r for r in rows if r.arm == a and r.valid]
    theirs = [r for r in rows if r.arm == b and r.valid]
    if not mine or not theirs:
        empty = a if not mine else b
        return Headline(
            arms=(a, b), text=f"no valid point for {empty}: nothing to compare", within_noise=None
        )
    if sweep.slo is not None:
        return _slo_headline(sweep, a, b, mine, theirs)
    return _throughput_headline(sweep, a, b, mine, theirs)


def _slo_headline(
    sweep: SweepSpec, a: str, b: str, mine: list[Aggregate], theirs: list[Aggregate]
) -> Headline:
    assert sweep.slo is not None
    names = sweep.slo.names
    slo = f"the {' and '.join(names)} SLO{'s' if len(names) > 1 else ''}"
    high_a, high_b = _highest_meeting(mine), _highest_meeting(theirs)
    if high_a is None and high_b is None:
        return Headline(
            arms=(a, b), text=f"neither {a} nor {b} holds {slo} at any load", within_noise=None
        )
    if high_a is None or high_b is None:
        winner, loser, high = (a, b, high_a) if high_b is None else (b, a, high_b)
        assert high is not None
        text = f"{winner} holds {slo} up to {high.label} where {loser} misses it at every load"
        return _with_noise(sweep, (a, b), text, _deciding(mine, theirs))
    if high_a.load == high_b.load:
        goodput_a, goodput_b = high_a.figures["goodput_per_s"], high_b.figures["goodput_per_s"]
        both = f"{a} and {b} both hold {slo} up to {high_a.label}"
        if goodput_a is None or goodput_b is None or goodput_b.mean == 0:
            return Headline(arms=(a, b), text=both, within_noise=None)
        change = f"goodput there {_change(goodput_a.mean, goodput_b.mean)} for {a}"
        if sweep.repeats == 1:
            return Headline(arms=(a, b), text=f"{both}; {change}{_NO_REPEATS}", within_noise=None)
        if overlap(goodput_a, goodput_b):
            return Headline(
                arms=(a, b),
                text=f"no difference beyond noise: {both} (goodput ranges overlap)",
                within_noise=True,
            )
        return Headline(
            arms=(a, b), text=f"{both}; {change}, beyond the repeats' spread", within_noise=False
        )
    (winner, win), (loser, lose) = sorted(
        ((a, high_a), (b, high_b)), key=lambda item: -item[1].load
    )
    text = f"{winner} holds {slo} up to {win.label} where {loser} stops at {lose.label}"
    goodput_win, goodput_lose = win.mean("goodput_per_s"), lose.mean("goodput_per_s")
    if goodput_win is not None and goodput_lose:
        text += f" ({_change(goodput_win, goodput_lose)} goodput)"
    return _with_noise(sweep, (a, b), text, _deciding(mine, theirs))


def _throughput_headline(
    sweep: SweepSpec, a: str, b: str, mine: list[Aggregate], theirs: list[Aggregate]
) -> Headline:
    peak_a, peak_b = _peak(mine), _peak(theirs)
    if peak_a is None or peak_b is None:
        return Headline(
            arms=(a, b), text="no throughput measured: nothing to compare", within_noise=None
        )
    spread_a = peak_a.figures["output_tokens_per_s"]
    spread_b = peak_b.figures["output_tokens_per_s"]
    assert spread_a is not None and spread_b is not None
    figures = (
        f"{spread_a.mean:,.0f} output tok/s ({peak_a.label}) against {b}'s "
        f"{spread_b.mean:,.0f} ({peak_b.label})"
    )
    if sweep.repeats > 1 and overlap(spread_a, spread_b):
        return Headline(
            arms=(a, b),
            text=f"no difference beyond noise: {a} peaks at {figures}, ranges overlapping",
            within_noise=True,
        )
    text = f"{a} peaks at {figures}: {_change(spread_a.mean, spread_b.mean)}"
    if sweep.repeats == 1:
        return Headline(arms=(a, b), text=text + _NO_REPEATS, within_noise=None)
    return Headline(arms=(a, b), text=text + ", beyond the repeats' spread", within_noise=False)


_NO_REPEATS = " (single runs: no repeats to judge noise by)"


def _with_noise(
    sweep: SweepSpec,
    arms: tuple[str, str],
    text: str,
    deciding: tuple[Aggregate, Aggregate] | None,
) -> Headline:
    """A verdict that differs between the arms, judged against the repeats at the lowest load
    where both were measured and their verdicts differ."""
    if sweep.repeats == 1:
        return Headline(arms=arms, text=text + _NO_REPEATS, within_noise=None)
    if deciding is None:
        return Headline(
            arms=arms,
            text=text + " (no load measured for both decides between them: noise not judged)",
            within_noise=None,
        )
    first, second = deciding
    share_a, share_b = first.figures["good_ratio"], second.figures["good_ratio"]
    if share_a is not None and share_b is not None and overlap(share_a, share_b):
        return Headline(
            arms=arms,
            text=f"no difference beyond noise: {text}, but at {first.label} their good shares "
            f"overlap across repeats ({first.arm} {_range(share_a)}, {second.arm} "
            f"{_range(share_b)})",
            within_noise=True,
        )
    return Headline(arms=arms, text=text, within_noise=False)


def _deciding(mine: list[Aggregate], theirs: list[Aggregate]) -> tuple[Aggregate, Aggregate] | None:
    """The lowest load both arms were measured at where one meets the SLOs and the other not."""
    by_load = {(r.load, r.phase == "synchronous"): r for r in theirs}
    for row in sorted(mine, key=lambda r: r.load):
        other = by_load.get((row.load, row.phase == "synchronous"))
        if (
            other is not None
            and row.verdict
            and other.verdict
            and row.verdict.meets != other.verdict.meets
        ):
            return row, other
    return None


def _highest_meeting(rows: list[Aggregate]) -> Aggregate | None:
    meeting = [r for r in rows if r.verdict is not None and r.verdict.meets]
    return max(meeting, key=lambda r: r.load, default=None)


def _peak(rows: list[Aggregate]) -> Aggregate | None:
    measured = [r for r in rows if r.mean("output_tokens_per_s") is not None]
    return max(measured, key=lambda r: r.mean("output_tokens_per_s") or 0.0, default=None)


def _change(new: float, old: float) -> str:
    percent = round((new / old - 1) * 100)
    return "±0 %" if percent == 0 else f"{percent:+d} %"


def _range(spread: Spread) -> str:
    return f"{spread.min * 100:.1f}–{spread.max * 100:.1f} %"


def build_report(
    planner: Planner, *, status: Literal["running", "completed", "cancelled"], wall_s: float
) -> SweepReport:
    sweep = planner.sweep
    results = planner.results
    rows = aggregate(sweep, results)
    return SweepReport(
        sweep=sweep,
        status=status,
        runs=len(results),
        wall_s=round(wall_s, 3),
        points=results,
        aggregates=rows,
        frontiers={
            arm.name: frontier(sweep, [r for r in rows if r.arm == arm.name]) for arm in sweep.arms
        },
        searches=planner.searches(),
        headlines=[headline(sweep, a.name, b.name, rows) for a, b in combinations(sweep.arms, 2)],
    )


def csv_rows(report: SweepReport) -> list[dict[str, Any]]:
    """One row per arm and load: counts, validity, the SLO verdict, and each figure's mean,
    minimum and maximum over the valid repeats."""
    rows = []
    for row in report.aggregates:
        verdict = row.verdict
        line: dict[str, Any] = {
            "arm": row.arm,
            "load": row.load,
            "label": row.label,
            "phase": row.phase,
            "repeats": row.repeats,
            "valid_repeats": row.valid_repeats,
            "valid": row.valid,
            "invalid_reason": row.invalid_reason or "",
            "meets_slo": "" if verdict is None else verdict.meets,
            "good_share": "" if verdict is None or verdict.share is None else verdict.share,
            "good_share_low": "" if verdict is None else verdict.low,
            "good_share_high": "" if verdict is None else verdict.high,
        }
        for name in FIGURES:
            spread = row.figures.get(name)
            line[name] = "" if spread is None else spread.mean
            line[f"{name}_min"] = "" if spread is None else spread.min
            line[f"{name}_max"] = "" if spread is None else spread.max
        rows.append(line)
    return rows
