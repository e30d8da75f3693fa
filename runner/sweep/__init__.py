"""Sweeps: one scenario along a load axis, arms compared point by point (issue 20).

    SweepSpec, parse_sweep, Arm, Slo, Validity, Point   the sweep, validated once (spec.py)
    Planner                   which points run next, from the results so far (plan.py, pure)
    PointResult, PointTally, point_result   what one run measured and whether it counts
    run_point(sweep, point, ...) -> PointResult     one point, on either clock
    run_sweep(sweep, ...) -> SweepReport    the whole sweep: live one point at a time with a
                                            drain between, simulated in parallel processes
    SweepReport, build_report, csv_rows     repeats aggregated, frontiers, headlines
    wilson_interval, Spread                 the statistics they stand on

The web service drives a sweep point by point with `Planner` and `run_point`.
"""

from runner.sweep.execute import run_point, run_sweep, wait_until_drained
from runner.sweep.plan import Planner, Probe, SloSearch, group_key
from runner.sweep.report import (
    Aggregate,
    FrontierPoint,
    Headline,
    SweepReport,
    aggregate,
    build_report,
    csv_rows,
    frontier,
    headline,
)
from runner.sweep.results import FIGURES, PointResult, PointTally, Verdict, point_result
from runner.sweep.spec import (
    PERCENTILES,
    Arm,
    Point,
    Slo,
    SweepSpec,
    Validity,
    parse_sweep,
    sweep_json_schema,
)
from runner.sweep.stats import Spread, overlap, spread_of, wilson_interval

__all__ = [
    "FIGURES",
    "PERCENTILES",
    "Aggregate",
    "Arm",
    "FrontierPoint",
    "Headline",
    "Planner",
    "Point",
    "PointResult",
    "PointTally",
    "Probe",
    "Slo",
    "SloSearch",
    "Spread",
    "SweepReport",
    "SweepSpec",
    "Validity",
    "Verdict",
    "aggregate",
    "build_report",
    "csv_rows",
    "frontier",
    "group_key",
    "headline",
    "overlap",
    "parse_sweep",
    "point_result",
    "run_point",
    "run_sweep",
    "spread_of",
    "sweep_json_schema",
    "wait_until_drained",
    "wilson_interval",
]
