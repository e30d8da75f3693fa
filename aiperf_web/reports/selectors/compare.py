"""The comparison's read model: two or more runs side by side, heads from the fields that
differ, key figures with deltas against a reference and verdict words that know repeats
(reports/differences.py), and each run's thinned series for the overlays."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypedDict

from aiperf_web.core.errors import Invalid
from aiperf_web.live.selectors import run_history, run_leak_points
from aiperf_web.reports.differences import (
    Group,
    NoiseWord,
    RunConfig,
    config_groups,
    differing_fields,
    noise_verdict,
    pair_sentence,
    run_config,
    same_for_all,
)
from aiperf_web.runs import selectors as run_sel
from aiperf_web.runs.leaks import LeakVerdict, leak_assess
from aiperf_web.runs.models import FINAL, Run
from aiperf_web.runs.verdict import KEY_METRICS, Metric, metric_check, summary_value
from aiperf_web.teams.selectors import AnyUser

# Where the server put the trees: rows of the comparison (conversation vs lineage shows here),
# not checks of the verdict, whose gate a new figure must not tighten behind a user's back.
# Percentages are of the run's own trees and requests: runs of different lengths compare.
PLACEMENT_METRICS: tuple[Metric, ...] = (
    Metric("placement.trees_split", "Trees split across inference workers", "trees", "lower",
           0.0, 0.5),
    Metric("placement.trees_split_pct", "Trees split across inference workers", "% of trees",
           "lower", 0.0, 1.0),
    Metric("placement.child_requests_on_root_worker_pct", "Child requests on their root's worker",
           "% of child requests", "higher", 0.0, 1.0),
    Metric("placement.key_misses", "Requests off their affinity key's worker (key misses)",
           "requests", "lower", 0.0, 0.5),
)  # fmt: skip

MAX_COMPARED = 8
COMPARE_POINTS = 400
# With SLOs set, how many requests met them and at what rate: rows of the comparison.
GOODPUT_METRICS: tuple[Metric, ...] = (
    Metric("goodput.good_ratio", "Requests within the SLOs", "", "higher", 0.0, 0.02),
    Metric("goodput.goodput_per_s", "Goodput", "good req/s", "higher", abs_tolerance=0.01),
)
COMPARE_METRICS: tuple[Metric, ...] = (*KEY_METRICS, *GOODPUT_METRICS, *PLACEMENT_METRICS)


class Compared(TypedDict):
    runs: list[Run]  # the reference first, then the others in the order named
    letters: list[str]  # A, B, ... in the order named (a run keeps its letter whatever the ref)
    heads: list[str]  # from the fields that differ: 'c=8 · legacy'
    configs: list[RunConfig]
    differs: list[str]  # the fields that differ between the runs
    same_for_all: str  # 'all runs: scenario demo, endpoint ..., ...'
    slos: list[str]  # each run's SLOs as a row shows them
    groups: list[Group]  # runs of one configuration (repeats), the reference's first
    metrics: list[dict[str, Any]]
    sentences: list[str]  # one per configuration against the reference's
    noise: str  # what the verdict words stand on (repeats or none)
    series: list[dict[str, Any]]
    leaks: list[LeakVerdict]


def config_of(r: Run) -> RunConfig:
    """A run's configuration as the comparison and the history read it."""
    endpoint = getattr(r, "endpoint", None)
    return run_config(
        r.spec,
        scenario=r.scenario_name,
        endpoint=r.endpoint_name,
        target_kind=r.target_kind,
        server_kind=getattr(endpoint, "server_kind", None),
    )


def runs_compare(*, user: AnyUser, run_ids: Sequence[str], reference: str = "") -> Compared:
    """Two or more runs side by side: heads from the fields that differ, key figures with
    deltas against the reference run (the first named unless `reference` names another), a
    verdict word per figure that knows about repeats (differences.py), one sentence per
    configuration, and each run's thinned series for the overlays."""
    ids = [i for i in dict.fromkeys(x.strip() for x in run_ids) if i]
    if len(ids) < 2:
        raise Invalid.field("runs", "name two or more runs to compare")
    if len(ids) > MAX_COMPARED:
        raise Invalid.field("runs", f"at most {MAX_COMPARED} runs")
    named = [run_sel.run_get(user=user, run_id=i) for i in ids]
    letters_named = [chr(ord("A") + i) for i in range(len(named))]
    ref_at = 0
    if reference.strip():
        ref_id = reference.strip().lower()
        found = [i for i, r in enumerate(named) if str(r.uuid) == ref_id]
        if not found:
            raise Invalid.field("reference", "name one of the compared runs as the reference")
        ref_at = found[0]
    order = [ref_at, *(i for i in range(len(named)) if i != ref_at)]
    runs = [named[i] for i in order]
    letters = [letters_named[i] for i in order]
    configs = [config_of(r) for r in runs]
    differs = differing_fields(configs)
    groups = config_groups(configs, differs)  # the reference's group is first: it is run 0
    group_of = {i: g for g in groups for i in g.members}
    values = {m.key: [summary_value(r.summary, m.key) for r in runs] for m in COMPARE_METRICS}
    ref_group = groups[0]
    metrics: list[dict[str, Any]] = []
    for m in COMPARE_METRICS:
        vals = values[m.key]
        base = vals[0]
        cells = []
        words: dict[tuple[str, ...], NoiseWord] = {
            g.key: noise_verdict(
                m, [vals[i] for i in ref_group.members], [vals[i] for i in g.members]
            )
            for g in groups[1:]
        }
        for i, value in enumerate(vals):
            check: dict[str, Any] = dict(metric_check(m, value, base))
            g = group_of[i]
            check["verdict"] = (
                "reference" if i == 0 else "repeat" if g is ref_group else words[g.key]
            )
            cells.append(check)
        metrics.append(
            {
                "key": m.key, "label": m.label, "unit": m.unit, "better": m.better, "cells": cells,
                # A change of a percentage reads in points: 9.4 % -> 0 % is -9.4, not -100 %.
                "points": m.unit.startswith("%"),
            }
        )  # fmt: skip
    sentences = []
    for g in groups[1:]:
        words_g: dict[str, NoiseWord] = {
            row["key"]: row["cells"][g.members[0]]["verdict"] for row in metrics
        }
        sentences.append(
            pair_sentence(
                head=g.head,
                ref_head=ref_group.head,
                metrics=COMPARE_METRICS,
                reference={k: [v[i] for i in ref_group.members] for k, v in values.items()},
                other={k: [v[i] for i in g.members] for k, v in values.items()},
                words=words_g,
            )
        )
    repeated = [g for g in groups if len(g.members) > 1]
    if not repeated:
        noise = (
            "One run of each configuration: no repeats to judge noise, so no difference is "
            "called better or worse. Repeat a configuration (Rerun on its page) and compare the "
            "repeats together."
        )
    else:
        noise = (
            "Repeats of a configuration (same configuration, several runs) give its spread: a "
            "difference whose ranges overlap is within noise; better or worse needs repeats on "
            "both sides, ranges apart, and a change beyond the figure's tolerance."
        )
    series = []
    leaks = []
    for r in runs:
        history = run_history(run_obj=r, max_points=COMPARE_POINTS)
        series.append({"id": str(r.uuid), "samples": history["samples"]})
        points = run_leak_points(run_obj=r, max_points=COMPARE_POINTS)
        leaks.append(leak_assess(points, ended=r.status in FINAL))
    return {
        "runs": runs,
        "letters": letters,
        "heads": [g.head for i in range(len(runs)) for g in [group_of[i]]],
        "configs": configs,
        "differs": differs,
        "same_for_all": same_for_all(configs, differs),
        "slos": [c.get("slo").removeprefix("SLO ") for c in configs],
        "groups": groups,
        "metrics": metrics,
        "sentences": sentences,
        "noise": noise,
        "series": series,
        "leaks": leaks,
    }
