"""Reads behind the run report, the comparison and the scenario history. Everything comes from
the database: the stored time series (thinned), the stored summary, and for the agent-tree view
a bounded slice of the records. The verdict on a run (its own checks, and its figures against a
baseline: KEY_METRICS) is runs/verdict.py's; the report, compare and history show it.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from aiperf_web.core.errors import Invalid
from aiperf_web.live.leaks import LeakVerdict, leak_assess
from aiperf_web.live.selectors import History, run_history, run_leak_points
from aiperf_web.reports.differences import (
    Group,
    NoiseWord,
    RunConfig,
    config_groups,
    config_head,
    differing_fields,
    noise_verdict,
    pair_sentence,
    run_config,
    same_for_all,
)
from aiperf_web.reports.models import RunTrees
from aiperf_web.runs import selectors as run_sel
from aiperf_web.runs.models import FINAL, Run, RunRecord, Status
from aiperf_web.runs.verdict import (
    KEY_METRICS,
    Metric,
    Verdict,
    metric_check,
    run_verdict,
    scenario_baseline,
    summary_value,
)
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
# The trend charts of the scenario history page.
TREND_KEYS = (
    "ttft_ms.p99",
    "requests_per_s",
    "prefix_cache_hit_ratio",
    "worker_switches",
    "orphaned_session_copies",
)


# -- the run page and report -------------------------------------------------------------------


class RunReport(TypedDict):
    history: History
    leak: LeakVerdict
    drain: dict[str, Any] | None
    by_depth: dict[str, Any]
    by_branch_mode: dict[str, Any]
    baseline: Run | None
    verdict: Verdict


def run_report(*, run_obj: Run) -> RunReport:
    """Everything the run page draws, from the stored series and the summary (never the
    records): O(thinned samples), whatever the run's length."""
    history = run_history(run_obj=run_obj)
    points = run_leak_points(run_obj=run_obj)
    summary = run_obj.summary or {}
    baseline = scenario_baseline(run_obj=run_obj) if run_obj.status in FINAL else None
    return {
        "history": history,
        "leak": leak_assess(points, ended=run_obj.status in FINAL),
        "drain": summary.get("drain") if isinstance(summary.get("drain"), dict) else None,
        "by_depth": summary.get("by_depth") or {},
        "by_branch_mode": summary.get("by_branch_mode") or {},
        "baseline": baseline,
        "verdict": run_verdict(run_obj=run_obj, baseline=baseline),
    }


# -- the agent-tree view -----------------------------------------------------------------------

TREE_SCAN_RECORDS = 20_000
TREES_SHOWN = 6
# The shape of the stored tree data: a run's trees stored in an older shape are built again
# (2: each session's requests, for the timeline).
TREES_VERSION = 2


def _tree_layout(sessions: dict[str, dict[str, Any]], root: str) -> None:
    """x = depth; y = leaves top to bottom, a parent centred on its children."""
    children: dict[str, list[str]] = defaultdict(list)
    for sid, node in sessions.items():
        if sid == root:
            continue
        # A session whose parent sent nothing in the scanned records (a grandchild of a child
        # with no records of its own) hangs off the root, so that every node is laid out.
        children[node["parent"] if node["parent"] in sessions else root].append(sid)
    for kids in children.values():
        kids.sort(key=lambda s: sessions[s]["start_s"])
    next_leaf = 0.0
    # Iterative post-order (trees can be deep): a node's y is known after its children's.
    stack: list[tuple[str, bool]] = [(root, False)]
    while stack:
        sid, done = stack.pop()
        kids = children.get(sid, [])
        if done or not kids:
            if kids:
                sessions[sid]["y"] = sum(sessions[k]["y"] for k in kids) / len(kids)
            else:
                sessions[sid]["y"] = next_leaf
                next_leaf += 1
            continue
        stack.append((sid, True))
        for kid in reversed(kids):
            stack.append((kid, False))


def trees_build(records: Sequence[Mapping[str, Any]], *, limit: int = TREES_SHOWN) -> list[Any]:
    """Sampled agent trees from records: nodes = sessions with the client worker of each turn
    (a bounce is a session on more than one), the inference worker of its first turn and
    whether that first turn hit the prefix cache."""
    by_root: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in records:
        root, sid = r.get("root_id"), r.get("session_id")
        if not root or not sid:
            continue
        node = by_root[root].get(sid)
        if node is None:
            node = by_root[root][sid] = {
                "id": sid,
                "parent": r.get("parent_id"),
                "depth": int(r.get("depth") or 0),
                "branch_mode": r.get("branch_mode") or "root",
                "start_s": float(r.get("start_s") or 0.0),
                "turns": [],
            }
        node["start_s"] = min(node["start_s"], float(r.get("start_s") or 0.0))
        node["turns"].append(
            (
                int(r.get("turn_index") or 0),
                r.get("client_worker"),
                r.get("inference_worker"),
                r.get("cached_tokens"),
                r.get("prompt_tokens"),
                r.get("error"),
                r.get("start_s"),
                r.get("end_s"),
            )
        )
    # The trees with the most sessions first: they are the ones bounces and lineage show in.
    ranked = sorted(by_root.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:limit]
    trees = []
    for root, sessions in ranked:
        if root not in sessions:
            # The root's turns fell outside the scanned records: attach orphans to a stub.
            sessions[root] = {
                "id": root, "parent": None, "depth": 0, "branch_mode": "root",
                "start_s": min(s["start_s"] for s in sessions.values()), "turns": [],
            }  # fmt: skip
        nodes = []
        for node in sessions.values():
            turns = sorted(node.pop("turns"), key=lambda t: (t[0], t[6] or 0.0))
            workers = [t[1] for t in turns if t[1] is not None]
            first = turns[0] if turns else None
            switches = sum(1 for a, b in itertools.pairwise(workers) if a != b)
            node.update(
                {
                    "turns": len(turns),
                    "client_workers": workers,
                    "switches": switches,
                    "bounced": len(set(workers)) > 1,
                    "inference_worker": first[2] if first else None,
                    "first_cached_tokens": first[3] if first else None,
                    "first_prompt_tokens": first[4] if first else None,
                    "first_turn_hit": bool(first and first[3]) if first else None,
                    "first_turn_index": first[0] if first else None,
                    "errors": sum(1 for t in turns if t[5]),
                    # The timeline's bars: [turn, start_s, end_s, client worker, inference
                    # worker, cached tokens, prompt tokens, error] per request, in turn order.
                    "requests": [
                        [t[0], t[6], t[7], t[1], t[2], t[3], t[4], t[5]]
                        for t in turns
                        if t[6] is not None and t[7] is not None
                    ],
                }
            )
            nodes.append(node)
        _tree_layout(sessions, root)
        trees.append(
            {
                "root": root,
                "sessions": len(nodes),
                "bounced": sum(1 for n in nodes if n["bounced"]),
                "nodes": sorted(nodes, key=lambda n: (n["depth"], n["y"])),
            }
        )
    return trees


def run_trees(*, run_obj: Run) -> dict[str, Any]:
    """The agent-tree view's data: built from the first TREE_SCAN_RECORDS records (a bounded
    read whatever the run's size) and kept once the run has ended."""
    if run_obj.status in FINAL:
        stored = RunTrees.objects.filter(run=run_obj).values_list("data", flat=True).first()
        if stored is not None and stored.get("version") == TREES_VERSION:
            return dict(stored)
    rows = (
        RunRecord.objects.filter(run=run_obj, warmup=False)
        .order_by("seq")
        .values_list("data", flat=True)[:TREE_SCAN_RECORDS]
    )
    records = list(rows)
    data = {
        "version": TREES_VERSION,
        "scanned_records": len(records),
        "complete": len(records) < TREE_SCAN_RECORDS,
        "trees": trees_build(records),
    }
    if run_obj.status in FINAL:
        RunTrees.objects.update_or_create(run=run_obj, defaults={"data": data})
    return data


# -- compare -----------------------------------------------------------------------------------

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


def _config(r: Run) -> RunConfig:
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
    configs = [_config(r) for r in runs]
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


# -- scenario history ----------------------------------------------------------------------------

HISTORY_RUNS = 200


def history_groups(runs: Sequence[Run]) -> tuple[list[str], list[str], str]:
    """The trend line each run belongs to: its configuration, read from the fields that differ
    between the scenario's runs (policy, scope, concurrency, endpoint, affinity, ...). Legacy
    and spawn-pin runs, or runs at c=8 and c=64, are different experiments: one line through
    both would draw their difference as a trend. Returns each run's line, the fields that
    differ and the line of what they all share."""
    configs = [_config(r) for r in runs]
    differs = differing_fields(configs)
    heads = [config_head(c, differs) if differs else "all runs" for c in configs]
    return heads, differs, same_for_all(configs, differs)


def scenario_history(*, scenario: Any) -> dict[str, Any]:
    runs = list(
        Run.objects.filter(scenario=scenario, status=Status.SUCCEEDED)
        .exclude(summary__isnull=True)
        .select_related("endpoint")
        .order_by("-created_at")
        .only(
            "uuid", "created_at", "summary", "is_baseline", "tags", "spec", "status",
            "scenario_name", "endpoint_name", "team_id", "scenario_id", "target_kind",
            "endpoint__server_kind",
        )[:HISTORY_RUNS]
    )  # fmt: skip
    runs.reverse()
    heads, differs, shared = history_groups(runs)
    for r, head in zip(runs, heads, strict=True):
        r.history_line = head  # type: ignore[attr-defined]  # the Runs table's column
    baseline = next((r for r in reversed(runs) if r.is_baseline), None)
    points = [
        {
            "id": str(r.uuid),
            "created_at": r.created_at.isoformat(),
            "group": head,
            "label": f"{r.created_at:%Y-%m-%d %H:%M} · {head}",
            "baseline": r.is_baseline,
            "values": {k: summary_value(r.summary, k) for k in TREND_KEYS},
        }
        for r, head in zip(runs, heads, strict=True)
    ]
    latest = runs[-1] if runs else None
    verdict = None
    if latest is not None:
        # When the latest run is the baseline itself there is nothing to judge it against.
        base = baseline if baseline is not None and baseline.pk != latest.pk else None
        verdict = run_verdict(run_obj=latest, baseline=base)
    trend_metrics = [
        {"key": m.key, "label": m.label, "unit": m.unit, "better": m.better}
        for m in KEY_METRICS
        if m.key in TREND_KEYS
    ]
    return {
        "runs": runs,
        "points": points,
        "baseline": baseline,
        "latest": latest,
        "verdict": verdict,
        "metrics": trend_metrics,
        "differs": differs,
        "same_for_all": shared,
    }
