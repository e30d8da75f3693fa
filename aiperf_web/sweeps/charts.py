"""A sweep's curves as plotly figures: pure functions from a runner.sweep.SweepReport.

`sweep_figures(report, percentile=..., twin=...)` gives every chart of the sweep page, the
offline report and the compare page, as `{"id", "card", "figure": {"data", "layout"}}`; the
browser only hands each figure to Plotly (static/js/sweep.js), so the page, its live updates
(the socket sends the same list) and the offline HTML draw exactly the same thing.

The rules every chart follows:
- one colour per arm (its index in the sweep's arms), the run page's palette
  (static/js/charts/format.js); a simulated twin's curve in the arm's colour, dashed, named
  "<arm> · simulated twin" (a prediction beside the live curve);
- a line through the mean of the valid repeats at each load, error bars from the lowest to the
  highest repeat (the spread the headline's noise rule reads);
- invalid runs drawn hollow at their own value with the reason in the hover, never part of a
  line or a frontier;
- throughput charts: every valid point, and the arm's Pareto frontier (the points no other of
  that arm beats on both axes) as a line;
- titles name the figure, axes their unit; the load axis is logarithmic when it spans 8x or
  more (1, 2, 4, 8, 16).

`sweep_compare_figures(reports)` overlays several sweeps (history, compare): one colour per
sweep, a dash style per arm.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Final, TypedDict

from runner import SWEEP_FIGURES as FIGURES
from runner import PointResult, Spread, SweepReport, spread_of
from runner import sweep_group_key as group_key

__all__ = [
    "PALETTE",
    "SweepChart",
    "arm_colour",
    "chart_ids",
    "interactivity",
    "pareto",
    "sweep_compare_figures",
    "sweep_figures",
]

# The run page's palette (static/js/charts/format.js PALETTE), so arm 0 of a sweep and worker 0
# of a run share a colour.
PALETTE: Final[tuple[str, ...]] = (
    "#2458d6", "#e8710a", "#1e8e3e", "#d93025", "#9334e6", "#12b5cb", "#c5221f", "#f9ab00",
)  # fmt: skip
TWIN_DASH: Final = "dash"
SECONDARY_DASH: Final = "dot"
LOG_SPAN: Final = 8.0  # a load axis spanning this factor or more is drawn logarithmic
HEIGHT: Final = 300

Figure = dict[str, Any]
Trace = dict[str, Any]


class SweepChart(TypedDict):
    id: str  # the element id on the page
    card: str  # the section it sits in: throughput, latency, goodput, cache, copies, placement
    figure: Figure


def arm_colour(index: int) -> str:
    if index < len(PALETTE):
        return PALETTE[index]
    return f"hsl({(index * 137.508) % 360:.0f}, 62%, {42 if index % 2 else 55}%)"


# -- reading the report ---------------------------------------------------------------------

Key = tuple[str, float, bool]  # arm, load, the rate axis's synchronous point


def interactivity(result: PointResult, percentile: str) -> float | None:
    """tok/s per user at `percentile`: 1000 / ITL there (the sweep's own percentile is already
    in the point's figures; any other is read from its ITL percentiles)."""
    itl = result.figures.get(f"itl_{percentile}_ms")
    return 1000.0 / itl if itl else None


Reader = Callable[[PointResult], float | None]


def _figure(name: str) -> Reader:
    return lambda result: result.figures.get(name)


def _groups(report: SweepReport) -> dict[Key, list[PointResult]]:
    groups: dict[Key, list[PointResult]] = {}
    for result in report.points:
        groups.setdefault(group_key(result.point), []).append(result)
    return groups


def _label(report: SweepReport, key: Key) -> str:
    _arm, load, synchronous = key
    return report.sweep.load_text(load, "synchronous" if synchronous else "list")


def _load_title(report: SweepReport) -> str:
    if report.sweep.axis == "concurrency":
        return "concurrency (lanes)"
    return "arrival rate (trees / s)"


def _log_axis(loads: Sequence[float]) -> bool:
    positive = [x for x in loads if x > 0]
    return (
        len(positive) == len(loads) and bool(positive) and max(positive) / min(positive) >= LOG_SPAN
    )


def pareto(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points (x, y) no other beats on both (higher x and higher y), by x ascending: the
    rule of runner.sweep.report.frontier for any pair of figures."""
    kept: list[tuple[float, float]] = []
    best = float("-inf")
    for x, y in sorted(points, key=lambda p: (-p[0], -p[1])):
        if y > best:
            kept.append((x, y))
            best = y
    return sorted(kept)


def _error(spread: Spread, scale: float = 1.0) -> tuple[float, float]:
    return (spread.max - spread.mean) * scale, (spread.mean - spread.min) * scale


# -- traces ---------------------------------------------------------------------------------


class _Style(TypedDict):
    colour: str
    dash: str
    name: str  # the legend's entry for the arm's curve
    group: str  # legendgroup
    twin: bool


def _styles(report: SweepReport, *, twin: bool = False) -> dict[str, _Style]:
    return {
        arm.name: {
            "colour": arm_colour(i),
            "dash": TWIN_DASH if twin else "solid",
            "name": f"{arm.name} · simulated twin" if twin else arm.name,
            "group": f"{arm.name}-twin" if twin else arm.name,
            "twin": twin,
        }
        for i, arm in enumerate(report.sweep.arms)
    }


def _hover(value_format: str, unit: str) -> str:
    return (
        "<b>%{customdata[0]}</b> %{customdata[1]}<br>"
        f"%{{y:{value_format}}}{unit}"
        "<br>%{customdata[2]}<extra></extra>"
    )


def _spread_text(spread: Spread, fmt: Callable[[float], str]) -> str:
    if spread.n < 2:
        return "1 valid repeat"
    return f"{fmt(spread.min)} – {fmt(spread.max)} over {spread.n} valid repeats"


def _number(value: float) -> str:
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    return f"{value:.3g}"


def _percent(value: float) -> str:
    return f"{value * 100:.1f} %"


def _load_traces(
    report: SweepReport,
    reader: Reader,
    style: _Style,
    arm: str,
    *,
    scale: float = 1.0,
    suffix: str = "",
    secondary: bool = False,
    ratio: bool = False,
) -> list[Trace]:
    """One arm's curve of one figure against load: the mean of the valid repeats with their
    range as error bars, and the invalid runs hollow."""
    groups = _groups(report)
    fmt = _percent if ratio else (lambda v: _number(v * scale))
    xs: list[float] = []
    ys: list[float] = []
    plus: list[float] = []
    minus: list[float] = []
    info: list[list[str]] = []
    hollow_x: list[float] = []
    hollow_y: list[float] = []
    hollow_info: list[list[str]] = []
    name = style["name"] + suffix
    for key in sorted(groups, key=lambda k: k[1]):
        if key[0] != arm or (key[2] and report.sweep.axis == "rate_per_s"):
            continue  # the rate axis's synchronous point has no place on the load axis
        members = groups[key]
        spread = spread_of(reader(r) for r in members if r.valid)
        if spread is not None:
            xs.append(key[1])
            ys.append(spread.mean * scale)
            up, down = _error(spread, scale)
            plus.append(up)
            minus.append(down)
            info.append([name, _label(report, key), _spread_text(spread, fmt)])
        for result in members:
            value = reader(result)
            if not result.valid and value is not None:
                hollow_x.append(key[1])
                hollow_y.append(value * scale)
                hollow_info.append(
                    [name, f"{_label(report, key)} #{result.point.repeat + 1}",
                     f"invalid: {result.invalid_reason}"]
                )  # fmt: skip
    value_format = ".1%" if ratio else ",.3~g"
    line: Trace = {
        "type": "scatter",
        "mode": "lines+markers",
        "name": name,
        "legendgroup": style["group"],
        "x": xs,
        "y": ys,
        "customdata": info,
        "hovertemplate": _hover(value_format, ""),
        "line": {
            "color": style["colour"],
            "dash": SECONDARY_DASH if secondary and not style["twin"] else style["dash"],
            "width": 1.5 if secondary else 2,
        },
        "marker": {"color": style["colour"], "size": 5 if secondary else 7},
    }
    if any(plus) or any(minus):
        line["error_y"] = {
            "type": "data",
            "symmetric": False,
            "array": plus,
            "arrayminus": minus,
            "color": style["colour"],
            "thickness": 1.2,
            "width": 4,
        }
    traces = [line]
    if hollow_x:
        traces.append(_hollow(style, hollow_x, hollow_y, hollow_info, value_format, name))
    return traces


def _hollow(
    style: _Style,
    xs: list[float],
    ys: list[float],
    info: list[list[str]],
    value_format: str,
    name: str,
) -> Trace:
    return {
        "type": "scatter",
        "mode": "markers",
        "name": f"{name} · invalid",
        "legendgroup": style["group"],
        "showlegend": False,
        "x": xs,
        "y": ys,
        "customdata": info,
        "hovertemplate": _hover(value_format, ""),
        "marker": {
            "symbol": "circle-open",
            "size": 10,
            "color": style["colour"],
            "line": {"width": 2, "color": style["colour"]},
        },
    }


def _frontier_traces(
    report: SweepReport, y_reader: Reader, style: _Style, arm: str, percentile: str, unit: str
) -> list[Trace]:
    """One arm's points of throughput against interactivity: every valid load (mean of its
    repeats, with their ranges on both axes), its Pareto frontier as a line, invalid runs
    hollow."""
    groups = _groups(report)
    points: list[tuple[float, float]] = []
    xs: list[float] = []
    ys: list[float] = []
    ex: list[tuple[float, float]] = []
    ey: list[tuple[float, float]] = []
    info: list[list[str]] = []
    hollow_x: list[float] = []
    hollow_y: list[float] = []
    hollow_info: list[list[str]] = []
    name = style["name"]
    for key in sorted(groups, key=lambda k: (k[1], not k[2])):
        if key[0] != arm:
            continue
        members = groups[key]
        valid = [r for r in members if r.valid]
        x_spread = spread_of(interactivity(r, percentile) for r in valid)
        y_spread = spread_of(y_reader(r) for r in valid)
        if x_spread is not None and y_spread is not None:
            points.append((x_spread.mean, y_spread.mean))
            xs.append(x_spread.mean)
            ys.append(y_spread.mean)
            ex.append(_error(x_spread))
            ey.append(_error(y_spread))
            info.append(
                [name, _label(report, key),
                 f"{x_spread.mean:,.1f} tok/s per user · {_spread_text(y_spread, _number)}"]
            )  # fmt: skip
        for result in members:
            x, y = interactivity(result, percentile), y_reader(result)
            if not result.valid and x is not None and y is not None:
                hollow_x.append(x)
                hollow_y.append(y)
                hollow_info.append(
                    [name, f"{_label(report, key)} #{result.point.repeat + 1}",
                     f"invalid: {result.invalid_reason}"]
                )  # fmt: skip
    front = pareto(points)
    hover = (
        "<b>%{customdata[0]}</b> %{customdata[1]}<br>%{y:,.3~g}"
        + unit
        + "<br>%{customdata[2]}<extra></extra>"
    )
    scatter: Trace = {
        "type": "scatter",
        "mode": "markers",
        "name": f"{name} · points",
        "legendgroup": style["group"],
        "showlegend": False,
        "x": xs,
        "y": ys,
        "customdata": info,
        "hovertemplate": hover,
        "marker": {
            "color": style["colour"],
            "size": 7,
            "symbol": "diamond" if style["twin"] else "circle",
            "opacity": 0.7,
        },
    }
    if any(a or b for a, b in ey):
        scatter["error_y"] = {
            "type": "data", "symmetric": False, "array": [a for a, _ in ey],
            "arrayminus": [b for _, b in ey], "color": style["colour"], "thickness": 1, "width": 3,
        }  # fmt: skip
    if any(a or b for a, b in ex):
        scatter["error_x"] = {
            "type": "data", "symmetric": False, "array": [a for a, _ in ex],
            "arrayminus": [b for _, b in ex], "color": style["colour"], "thickness": 1, "width": 3,
        }  # fmt: skip
    by_point = dict(zip(zip(xs, ys, strict=True), info, strict=True))
    line: Trace = {
        "type": "scatter",
        "mode": "lines",
        "name": f"{name} frontier",
        "legendgroup": style["group"],
        "x": [x for x, _ in front],
        "y": [y for _, y in front],
        "customdata": [by_point[p] for p in front],
        "hovertemplate": hover,
        "line": {"color": style["colour"], "dash": style["dash"], "width": 2, "shape": "linear"},
    }
    traces = [line, scatter]
    if hollow_x:
        traces.append(_hollow(style, hollow_x, hollow_y, hollow_info, ",.3~g", name))
    return traces


# -- layouts --------------------------------------------------------------------------------


def _layout(title: str, x_title: str, y_title: str, **extra: Any) -> dict[str, Any]:
    """The run page's chart layout (static/js/charts/plot.js layout()) with axis titles: a
    sweep's x is a figure with a unit, not run time."""
    return {
        "title": {"text": title, "font": {"size": 14}, "x": 0, "xanchor": "left"},
        "margin": {"l": 60, "r": 16, "t": 36, "b": 44},
        "height": HEIGHT,
        "xaxis": {"title": {"text": x_title, "standoff": 4}, "zeroline": False,
                  "automargin": True},
        "yaxis": {"title": {"text": y_title}, "rangemode": "tozero", "zeroline": False,
                  "automargin": True},
        "legend": {"orientation": "h", "y": -0.22, "yanchor": "top", "x": 0,
                   "font": {"size": 11}},
        "hovermode": "closest",
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "#fff",
        **extra,
    }  # fmt: skip


def _empty_note(text: str) -> dict[str, Any]:
    return {
        "text": text,
        "showarrow": False,
        "xref": "paper",
        "yref": "paper",
        "x": 0.5,
        "y": 0.5,
        "font": {"size": 12, "color": "#667085"},
    }


def _finish(fig: Figure, *, loads: Sequence[float] | None, empty: str) -> Figure:
    layout = fig["layout"]
    if loads:
        # Ticks at the axis's own loads (not 1.5, 2.5 between 1, 2, 4); the range is the
        # axis's, so an empty chart does not draw -1 to 6.
        log = _log_axis(loads)
        low, high = min(loads), max(loads)
        pad = (math.log10(high / low) if log else high - low) * 0.04 or 0.5
        ends = (math.log10(low), math.log10(high)) if log else (low, high)
        layout["xaxis"].update(
            type="log" if log else "linear",
            tickvals=list(loads),
            ticktext=[f"{x:g}" for x in loads],
            range=[ends[0] - pad, ends[1] + pad],
        )
    if not any(trace["x"] for trace in fig["data"]):
        layout["annotations"] = [_empty_note(empty)]
        layout["xaxis"]["showticklabels"] = loads is not None
        layout["yaxis"]["showticklabels"] = False
    return fig


def _threshold(value: float, label: str, *, scale: float = 1.0) -> dict[str, Any]:
    """An SLO's threshold as a horizontal line across the chart."""
    return {
        "type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": value * scale,
        "y1": value * scale, "line": {"color": "#d93025", "width": 1, "dash": "dashdot"},
        "label": {"text": label, "textposition": "end", "font": {"size": 10, "color": "#d93025"}},
    }  # fmt: skip


# -- the charts -----------------------------------------------------------------------------


class _Series(TypedDict, total=False):
    reader: Reader
    suffix: str
    secondary: bool


def _against_load(
    chart_id: str,
    card: str,
    title: str,
    y_title: str,
    reports: Sequence[tuple[SweepReport, dict[str, _Style]]],
    series: Sequence[_Series],
    *,
    scale: float = 1.0,
    ratio: bool = False,
    shapes: Sequence[dict[str, Any]] = (),
    loads: Sequence[float],
    x_title: str,
    empty: str = "no point measured yet",
) -> SweepChart:
    data: list[Trace] = []
    for report, styles in reports:
        for arm in report.sweep.arms:
            for entry in series:
                data.extend(
                    _load_traces(
                        report,
                        entry["reader"],
                        styles[arm.name],
                        arm.name,
                        scale=scale,
                        suffix=entry.get("suffix", ""),
                        secondary=entry.get("secondary", False),
                        ratio=ratio,
                    )
                )
    layout = _layout(title, x_title, y_title)
    if ratio:
        layout["yaxis"]["tickformat"] = ".0%"
        layout["yaxis"]["range"] = [0, 1.05]
        layout["yaxis"]["rangemode"] = "normal"
    if shapes:
        layout["shapes"] = list(shapes)
    figure = _finish({"data": data, "layout": layout}, loads=loads, empty=empty)
    return {"id": chart_id, "card": card, "figure": figure}


MIB: Final = 1.0 / (1 << 20)


def sweep_figures(
    report: SweepReport,
    *,
    percentile: str | None = None,
    twin: SweepReport | None = None,
) -> list[SweepChart]:
    """Every chart of a sweep, in page order; `twin`: its simulated twin's report, drawn dashed
    beside each arm's curve. `percentile` (p50/p90/p95/p99, default the sweep's): the one that
    interactivity and the latency lines read."""
    sweep = report.sweep
    p = percentile or sweep.percentile
    reports: list[tuple[SweepReport, dict[str, _Style]]] = [(report, _styles(report))]
    if twin is not None:
        twin_styles = _styles(twin, twin=True)
        # The twin's arms take the colours of the live sweep's arms of the same name.
        live = _styles(report)
        for name, style in twin_styles.items():
            if name in live:
                style["colour"] = live[name]["colour"]
        reports.append((twin, twin_styles))
    loads = sorted({*sweep.loads, *(twin.sweep.loads if twin else ())})
    x_title = _load_title(report)
    running = report.status == "running"
    empty_frontier = "no valid point yet" if running else "no valid point"
    empty = "no point measured yet" if running else "not measured: no point reported it"
    charts: list[SweepChart] = []

    # Throughput against interactivity, with each arm's Pareto frontier.
    throughputs: list[tuple[str, str, Reader, str]] = []
    if sweep.gpus:
        throughputs.append(
            ("sweep-frontier-gpu", f"Output tokens per second per GPU ({sweep.gpus} GPUs)",
             _figure("output_tokens_per_s_per_gpu"), "tok/s per GPU")
        )  # fmt: skip
    throughputs += [
        ("sweep-frontier-tokens", "Output tokens per second", _figure("output_tokens_per_s"),
         "output tok/s"),
        ("sweep-frontier-requests", "Requests per second", _figure("requests_per_s"),
         "requests / s"),
    ]  # fmt: skip
    for chart_id, title, reader, unit in throughputs:
        data: list[Trace] = []
        for rep, styles in reports:
            for arm in rep.sweep.arms:
                data.extend(
                    _frontier_traces(rep, reader, styles[arm.name], arm.name, p, f" {unit}")
                )
        layout = _layout(
            f"{title} against interactivity ({p})",
            f"interactivity: tok/s per user (1000 / ITL {p})",
            unit,
        )
        figure = _finish({"data": data, "layout": layout}, loads=None, empty=empty_frontier)
        charts.append({"id": chart_id, "card": "throughput", "figure": figure})

    slo = sweep.slo

    def curve(
        chart_id: str, card: str, title: str, y_title: str, series: list[_Series], **kw: Any
    ) -> SweepChart:
        return _against_load(
            chart_id, card, title, y_title, reports, series, loads=loads, x_title=x_title,
            empty=empty, **kw,
        )  # fmt: skip

    # Latency percentiles against load: the chosen percentile with its spread, p50 dotted.
    for name, label in (("ttft", "Time to first token"), ("itl", "Inter-token latency")):
        series: list[_Series] = [{"reader": _figure(f"{name}_{p}_ms"), "suffix": f" {p}"}]
        if p != "p50":
            series.append(
                {"reader": _figure(f"{name}_p50_ms"), "suffix": " p50", "secondary": True}
            )
        limit = getattr(slo, f"{name}_ms", None) if slo else None
        shapes = [_threshold(limit, f"SLO {limit:g} ms")] if limit else []
        charts.append(
            curve(
                f"sweep-{name}",
                "latency",
                f"{label} ({p}, p50 dotted) against load",
                "ms",
                series,
                shapes=shapes,
            )
        )

    # Goodput: requests per second meeting the SLOs, and their share.
    charts.append(
        curve(
            "sweep-goodput",
            "goodput",
            "Goodput against load" if slo else "Goodput against load (no SLO set)",
            "good requests / s",
            [{"reader": _figure("goodput_per_s")}],
        )
    )
    shapes = (
        [_threshold(slo.goodput_fraction, f"target {slo.goodput_fraction * 100:g} %")]
        if slo
        else []
    )
    charts.append(
        curve(
            "sweep-good-share",
            "goodput",
            "Share of requests meeting the SLOs",
            "good share",
            [{"reader": _figure("good_ratio")}],
            ratio=True,
            shapes=shapes,
        )
    )

    # The prefix cache.
    charts.append(
        curve(
            "sweep-prefix-hit",
            "cache",
            "Prefix-cache hit ratio against load",
            "hit ratio",
            [{"reader": _figure("prefix_cache_hit_ratio")}],
            ratio=True,
        )
    )
    charts.append(
        curve(
            "sweep-child-hit",
            "cache",
            "Children's first-turn hit ratio against load",
            "hit ratio",
            [{"reader": _figure("child_first_turn_hit_ratio")}],
            ratio=True,
        )
    )

    # Client-worker migrations and the copies they leave.
    charts.append(
        curve(
            "sweep-switches",
            "copies",
            "Client-worker switches against load",
            "switches",
            [{"reader": _figure("worker_switches")}],
        )
    )
    charts.append(
        curve(
            "sweep-orphans",
            "copies",
            "Orphaned session copies at the end (the leak)",
            "orphaned copies",
            [{"reader": _figure("orphaned_session_copies")}],
        )
    )
    charts.append(
        curve(
            "sweep-copy-memory",
            "copies",
            "Session-copy memory: at the end, peak dotted",
            "MiB",
            [
                {"reader": _figure("session_copy_bytes"), "suffix": " end"},
                {
                    "reader": _figure("peak_session_copy_bytes"),
                    "suffix": " peak",
                    "secondary": True,
                },
            ],
            scale=MIB,
        )
    )

    # Placement: where the server put each agent tree.
    charts.append(
        curve(
            "sweep-trees-split",
            "placement",
            "Trees split across server workers",
            "trees split",
            [{"reader": _figure("trees_split")}],
        )
    )
    charts.append(
        curve(
            "sweep-root-share",
            "placement",
            "Child requests on their root's worker",
            "share of child requests",
            [{"reader": _figure("child_requests_on_root_worker_ratio")}],
            ratio=True,
        )
    )
    return charts


def chart_ids(report: SweepReport) -> list[str]:
    return [chart["id"] for chart in sweep_figures(report)]


# -- several sweeps -------------------------------------------------------------------------

ARM_DASHES: Final[tuple[str, ...]] = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")

COMPARED: Final[tuple[tuple[str, str, str, str, bool], ...]] = (
    # id, title, figure, y axis, ratio
    ("sweep-cmp-tokens", "Output tokens per second against load", "output_tokens_per_s",
     "output tok/s", False),
    ("sweep-cmp-ttft", "TTFT against load", "ttft_{p}_ms", "ms", False),
    ("sweep-cmp-goodput", "Goodput against load", "goodput_per_s", "good requests / s", False),
    ("sweep-cmp-child-hit", "Children's first-turn hit ratio against load",
     "child_first_turn_hit_ratio", "hit ratio", True),
    ("sweep-cmp-orphans", "Orphaned session copies against load", "orphaned_session_copies",
     "orphaned copies", False),
)  # fmt: skip


def sweep_compare_figures(
    reports: Sequence[tuple[str, SweepReport]], *, percentile: str = "p90"
) -> list[SweepChart]:
    """Several sweeps curve against curve: `reports` as (label, report) pairs, one colour per
    sweep and a dash style per arm (by the arm's index in its sweep). The first chart is the
    frontier of each sweep's arms (output tok/s against tok/s per user at `percentile`): a
    scenario's history draws today's frontier against earlier ones there."""
    styled: list[tuple[SweepReport, dict[str, _Style]]] = []
    for i, (label, report) in enumerate(reports):
        styles: dict[str, _Style] = {}
        for j, arm in enumerate(report.sweep.arms):
            styles[arm.name] = {
                "colour": arm_colour(i),
                "dash": ARM_DASHES[j % len(ARM_DASHES)],
                "name": f"{label} · {arm.name}",
                "group": f"{i}-{arm.name}",
                "twin": False,
            }
        styled.append((report, styles))
    data: list[Trace] = []
    for report, styles in styled:
        for arm in report.sweep.arms:
            traces = _frontier_traces(
                report, _figure("output_tokens_per_s"), styles[arm.name], arm.name, percentile,
                " output tok/s",
            )  # fmt: skip
            data.extend(traces)
    layout = _layout(
        f"Pareto frontiers: output tok/s against interactivity ({percentile})",
        f"interactivity: tok/s per user (1000 / ITL {percentile})",
        "output tok/s",
    )
    charts: list[SweepChart] = [
        {
            "id": "sweep-cmp-frontier",
            "card": "compare",
            "figure": _finish({"data": data, "layout": layout}, loads=None, empty="no valid point"),
        }
    ]
    loads = sorted({load for _, report in reports for load in report.sweep.loads})
    axes = {_load_title(report) for _, report in reports}
    x_title = axes.pop() if len(axes) == 1 else "load (lanes or trees / s)"
    for chart_id, title, figure_name, y_title, ratio in COMPARED:
        name = figure_name.format(p=percentile)
        assert name in FIGURES, name
        charts.append(
            _against_load(chart_id, "compare", title.replace("TTFT", f"TTFT {percentile}"),
                          y_title, styled, [{"reader": _figure(name)}], ratio=ratio,
                          loads=loads, x_title=x_title)
        )  # fmt: skip
        charts[-1]["card"] = "compare"
    return charts
