"""The sweep's curves (aiperf_web/sweeps/charts.py): pure figures from a SweepReport, read
back as plotly would draw them. Synthetic points, so every figure is known; one real sweep of
the simulated cluster to hold the charts to what the engine reports."""

from __future__ import annotations

import json
from typing import Any

import pytest

from aiperf_web.sweeps.charts import (
    arm_colour,
    pareto,
    sweep_compare_figures,
    sweep_figures,
)
from runner.sweep import (
    FIGURES,
    Planner,
    Point,
    PointResult,
    SweepReport,
    build_report,
    parse_sweep,
)

BASE = {"target": {"kind": "simulated"}, "duration_s": 60}


def _sweep(**extra: Any) -> Any:
    return parse_sweep(
        {
            "base": BASE,
            "concurrency": [1, 2, 4, 8, 16],
            "arms": [
                {"name": "legacy", "overrides": {"policy": "legacy"}},
                {"name": "spawn-pin", "overrides": {"policy": "spawn-pin"}},
            ],
            **extra,
        }
    )


def _result(
    arm: str,
    load: float,
    repeat: int = 0,
    *,
    itl: float = 10.0,
    tokens: float = 100.0,
    orphans: float = 0.0,
    invalid: str | None = None,
    **figures: float | None,
) -> PointResult:
    values: dict[str, float | None] = dict.fromkeys(FIGURES)
    values.update(
        {
            "itl_p50_ms": itl / 2,
            "itl_p90_ms": itl,
            "itl_p95_ms": itl,
            "itl_p99_ms": itl,
            "ttft_p90_ms": 100 * load,
            "ttft_p50_ms": 50 * load,
            "tokens_per_s_per_user": 1000 / itl,
            "output_tokens_per_s": tokens,
            "requests_per_s": tokens / 100,
            "orphaned_session_copies": orphans,
            "prefix_cache_hit_ratio": 0.5,
            "session_copy_bytes": 2 * (1 << 20),
            **figures,
        }
    )
    return PointResult(
        point=Point(arm=arm, load=load, repeat=repeat),
        status="succeeded",
        stopped_reason=None,
        requests=100,
        finished=100,
        completed=100,
        good_requests=90,
        figures=values,
        valid=invalid is None,
        invalid_reason=invalid,
        wall_s=1.0,
    )


def _report(sweep: Any, results: list[PointResult]) -> SweepReport:
    return build_report(Planner(sweep, results), status="running", wall_s=1.0)


def _chart(charts: list[Any], chart_id: str) -> dict[str, Any]:
    return next(c["figure"] for c in charts if c["id"] == chart_id)


def _trace(figure: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in figure["data"] if t["name"] == name)


def test_pareto_keeps_the_points_none_beats_on_both() -> None:
    assert pareto([(10, 100), (20, 50), (15, 40), (5, 90), (30, 10)]) == [
        (10, 100),
        (20, 50),
        (30, 10),
    ]
    assert pareto([]) == []


def test_every_chart_has_a_title_axis_units_and_stable_ids() -> None:
    sweep = _sweep(gpus=4, slo={"ttft_ms": 500})
    charts = sweep_figures(_report(sweep, [_result("legacy", 1)]))
    ids = [c["id"] for c in charts]
    assert ids[0] == "sweep-frontier-gpu"  # the per-GPU frontier first when GPUs are known
    assert len(ids) == len(set(ids))
    for expected in (
        "sweep-frontier-tokens", "sweep-frontier-requests", "sweep-ttft", "sweep-itl",
        "sweep-goodput", "sweep-good-share", "sweep-prefix-hit", "sweep-child-hit",
        "sweep-switches", "sweep-orphans", "sweep-copy-memory", "sweep-trees-split",
        "sweep-root-share",
    ):  # fmt: skip
        assert expected in ids
    for chart in charts:
        layout = chart["figure"]["layout"]
        assert layout["title"]["text"]
        assert layout["xaxis"]["title"]["text"]
        assert layout["yaxis"]["title"]["text"]
    assert "4 GPUs" in _chart(charts, "sweep-frontier-gpu")["layout"]["title"]["text"]
    # Without GPUs there is no per-GPU chart; the load axis names its unit.
    plain = sweep_figures(_report(_sweep(), [_result("legacy", 1)]))
    assert "sweep-frontier-gpu" not in [c["id"] for c in plain]
    assert _chart(plain, "sweep-ttft")["layout"]["xaxis"]["title"]["text"] == "concurrency (lanes)"
    json.dumps(charts)  # plain JSON: the page and the socket send it as is


def test_curves_against_load_carry_the_repeats_spread_and_log_axis() -> None:
    sweep = _sweep(repeats=3)
    results = [
        _result("legacy", load, repeat, orphans=load * 10 + repeat)
        for load in (1, 2, 4)
        for repeat in range(3)
    ]
    charts = sweep_figures(_report(sweep, results))
    orphans = _chart(charts, "sweep-orphans")
    line = _trace(orphans, "legacy")
    assert line["x"] == [1, 2, 4]
    assert line["y"] == [11, 21, 41]  # the means of 10+{0,1,2}, ...
    assert line["error_y"]["array"] == [1, 1, 1]  # up to the highest repeat
    assert line["error_y"]["arrayminus"] == [1, 1, 1]  # down to the lowest
    assert "10 – 12 over 3 valid repeats" in line["customdata"][0][2]
    # 1..16 spans 16x: logarithmic, ticks at the axis's loads.
    assert orphans["layout"]["xaxis"]["type"] == "log"
    assert orphans["layout"]["xaxis"]["ticktext"] == ["1", "2", "4", "8", "16"]
    # The memory chart reads MiB.
    memory = _chart(charts, "sweep-copy-memory")
    assert _trace(memory, "legacy end")["y"] == [2.0, 2.0, 2.0]
    # Ratios as shares on a 0-100 % axis.
    hit = _chart(charts, "sweep-prefix-hit")
    assert hit["layout"]["yaxis"]["tickformat"] == ".0%"


def test_arms_keep_their_colours_and_a_twin_is_dashed_beside_them() -> None:
    sweep = _sweep()
    live = _report(sweep, [_result("legacy", 1), _result("spawn-pin", 1)])
    twin = _report(sweep, [_result("legacy", 1, tokens=120), _result("spawn-pin", 1)])
    charts = sweep_figures(live, twin=twin)
    for chart in charts:
        for trace in chart["figure"]["data"]:
            arm = "legacy" if trace["name"].startswith("legacy") else "spawn-pin"
            colour = trace.get("line", trace.get("marker", {})).get("color")
            assert colour == arm_colour(0 if arm == "legacy" else 1), (chart["id"], trace["name"])
    tokens = _chart(charts, "sweep-frontier-tokens")
    assert _trace(tokens, "legacy frontier")["line"]["dash"] == "solid"
    twin_line = _trace(tokens, "legacy · simulated twin frontier")
    assert twin_line["line"]["dash"] == "dash"
    assert twin_line["y"] == [120]
    assert (
        _trace(_chart(charts, "sweep-orphans"), "legacy · simulated twin")["line"]["dash"] == "dash"
    )


def test_invalid_points_are_hollow_with_their_reason_and_not_on_the_frontier() -> None:
    sweep = _sweep()
    reason = "errors 40 % > 10 %"
    results = [
        _result("legacy", 1, itl=10, tokens=100),
        _result("legacy", 2, itl=12, tokens=180),
        # The best of all on both axes, but invalid: hollow, and no part of the frontier.
        _result("legacy", 4, itl=5, tokens=500, orphans=7, invalid=reason),
    ]
    charts = sweep_figures(_report(sweep, results))
    tokens = _chart(charts, "sweep-frontier-tokens")
    front = _trace(tokens, "legacy frontier")
    assert front["y"] == [180, 100]  # by interactivity: 1000/12 then 1000/10
    hollow = _trace(tokens, "legacy · invalid")
    assert hollow["marker"]["symbol"] == "circle-open"
    assert hollow["x"] == [200] and hollow["y"] == [500]
    assert reason in hollow["customdata"][0][2]
    orphans = _chart(charts, "sweep-orphans")
    assert _trace(orphans, "legacy")["x"] == [1, 2]
    assert _trace(orphans, "legacy · invalid")["y"] == [7]


def test_the_chosen_percentile_moves_interactivity_and_latency() -> None:
    sweep = _sweep()
    report = _report(sweep, [_result("legacy", 2, itl=10)])
    p90 = sweep_figures(report)
    p50 = sweep_figures(report, percentile="p50")
    assert _trace(_chart(p90, "sweep-frontier-tokens"), "legacy frontier")["x"] == [100]
    assert _trace(_chart(p50, "sweep-frontier-tokens"), "legacy frontier")["x"] == [200]
    assert "(p50" in _chart(p50, "sweep-ttft")["layout"]["title"]["text"]
    assert _trace(_chart(p90, "sweep-ttft"), "legacy p90")["y"] == [200]
    assert _trace(_chart(p90, "sweep-ttft"), "legacy p50")["line"]["dash"] == "dot"


def test_slo_thresholds_are_drawn_and_an_empty_chart_says_so() -> None:
    sweep = _sweep(slo={"ttft_ms": 300, "goodput_fraction": 0.9})
    charts = sweep_figures(_report(sweep, []))
    ttft = _chart(charts, "sweep-ttft")
    assert ttft["layout"]["shapes"][0]["y0"] == 300
    assert "SLO 300 ms" in ttft["layout"]["shapes"][0]["label"]["text"]
    assert _chart(charts, "sweep-good-share")["layout"]["shapes"][0]["y0"] == 0.9
    assert ttft["layout"]["annotations"][0]["text"] == "no point measured yet"
    # A finished sweep whose points never reported a figure says so, on the axis's own range.
    done = build_report(Planner(sweep, [_result("legacy", 1)]), status="completed", wall_s=1.0)
    child = _chart(sweep_figures(done), "sweep-child-hit")
    assert child["layout"]["annotations"][0]["text"] == "not measured: no point reported it"
    assert child["layout"]["xaxis"]["ticktext"] == ["1", "2", "4", "8", "16"]
    # A narrow linear axis has its ticks at its loads, not between them.
    narrow = _sweep(concurrency=[1, 2, 4])
    orphans = _chart(sweep_figures(_report(narrow, [_result("legacy", 1)])), "sweep-orphans")
    assert orphans["layout"]["xaxis"]["type"] == "linear"
    assert orphans["layout"]["xaxis"]["tickvals"] == [1, 2, 4]


def test_compare_draws_each_sweep_in_its_colour_and_each_arm_in_its_dash() -> None:
    sweep = _sweep()
    today = _report(sweep, [_result("legacy", 1, tokens=200), _result("spawn-pin", 1)])
    earlier = _report(sweep, [_result("legacy", 1, tokens=100)])
    charts = sweep_compare_figures([("today", today), ("earlier", earlier)])
    frontier = _chart(charts, "sweep-cmp-frontier")
    mine = _trace(frontier, "today · legacy frontier")
    theirs = _trace(frontier, "earlier · legacy frontier")
    assert mine["y"] == [200] and theirs["y"] == [100]
    assert mine["line"]["color"] == arm_colour(0) and theirs["line"]["color"] == arm_colour(1)
    assert _trace(frontier, "today · spawn-pin frontier")["line"]["dash"] == "dash"
    assert {c["card"] for c in charts} == {"compare"}


@pytest.mark.timeout(120)
def test_a_real_simulated_sweep_draws_what_its_report_says() -> None:
    from runner.sweep import run_sweep

    sweep = parse_sweep(
        {
            "base": {**BASE, "duration_s": 30, "start_window": [0, 1]},
            "concurrency": [1, 4],
            "arms": [
                {"name": "legacy", "overrides": {"policy": "legacy"}},
                {"name": "spawn-pin", "overrides": {"policy": "spawn-pin"}},
            ],
        }
    )
    report = run_sweep(sweep, processes=1)
    charts = sweep_figures(report)
    tokens = _chart(charts, "sweep-frontier-tokens")
    for arm, points in report.frontiers.items():
        line = _trace(tokens, f"{arm} frontier")
        assert line["y"] == pytest.approx([p.throughput for p in points])
    orphans = _chart(charts, "sweep-orphans")
    for row in report.aggregates:
        line = _trace(orphans, row.arm)
        assert row.mean("orphaned_session_copies") == pytest.approx(
            line["y"][line["x"].index(row.load)]
        )
