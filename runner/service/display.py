"""What the service command line prints for people: aligned tables, the one-line live progress
of a run, its key figures and a comparison. Pure functions of the API's answers (no I/O), so
the wording is tested without a server."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runner.service.shapes import Compare, Progress, Run, RunDetail

__all__ = ["compare_table", "figures_line", "progress_line", "run_title", "table"]

BAR_WIDTH = 24
# Columns the live line's text takes beside the bar, with room for figures to grow.
_FIGURES_ROOM = 90


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Columns aligned on the widest cell; None shows as "-"."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return " ".join(str(value).split())  # a name with a line break stays on its row


def run_title(run: Run) -> str:
    return f"run {run.id} ({run.scenario.name} on {run.endpoint.name})"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms" if value >= 10 else f"{value:.2g} ms"


def progress_line(run: RunDetail, *, width: int | None = None) -> str:
    """The live line: a bar of the nearest stop condition, time and ETA, and the figures that
    tell a run is healthy (requests, errors, TTFT p50) and whether it leaks (orphaned session
    copies, worker switches). A queued run says why it waits instead. Within `width` (a
    terminal's) the bar narrows, then goes, before a figure is cut."""
    if run.status == "queued":
        if run.waiting is None:
            return "queued"
        return f"queued, place {run.waiting.place} in line: {run.waiting.message}"
    p = run.progress
    if p is None:
        return f"{run.status}: no figures yet (the first comes within a few seconds)"
    fraction = min(1.0, max(0.0, p.progress or 0.0))
    clock = "" if p.t_s is None else f" {p.t_s:.0f}s"
    if run.ended:
        when = f" {run.status}"
    elif fraction >= 1:
        when = " ending"  # the stop was reached: requests in flight finish, the drain check runs
    else:
        when = "" if p.eta_s is None else f" eta {p.eta_s:.0f}s"
    rest = f"{fraction:6.1%}{clock}{when} | {_figures(p)}"
    # The bar's width follows the terminal's alone, so it does not jump as figures grow.
    bar_width = BAR_WIDTH if width is None else max(0, min(BAR_WIDTH, width - _FIGURES_ROOM))
    if bar_width < 8:
        return rest.lstrip()
    filled = int(fraction * bar_width)
    return f"[{'#' * filled}{'-' * (bar_width - filled)}] {rest}"


def _figures(p: Progress) -> str:
    ttft = (p.ttft_ms or {}).get("p50")
    # Short labels (those of `replay`'s progress line): the line must fit 80 columns.
    return (
        f"req {_cell(p.requests)}  err {_cell(p.errors)}  TTFT p50 {_ms(ttft)}  "
        f"orphans {_cell(p.orphaned_session_copies)}  switches {_cell(p.worker_switches)}"
    )


def figures_line(run: Run) -> str:
    """A finished run's key figures from its summary (the same ones as the live line)."""
    s: dict[str, Any] = run.summary or {}
    if not s:
        return "no summary" + (f": {run.reason}" if run.reason else "")
    ttft = s.get("ttft_ms") or {}
    return (
        f"requests {_cell(s.get('requests'))}  errors {_cell(s.get('errors'))}  "
        f"TTFT p50 {_ms(ttft.get('p50'))} p99 {_ms(ttft.get('p99'))}  "
        f"orphaned copies {_cell(s.get('orphaned_session_copies'))}  "
        f"switches {_cell(s.get('worker_switches'))}"
    )


def compare_table(compare: Compare) -> str:
    """One row per figure, one column per run (the first is the reference: each other cell
    carries its change against it, and "~" when that change is within noise), headed by what
    differs between the runs; then what they all share and one sentence per configuration."""
    headers = [
        "figure",
        *(
            f"{r.letter}: {r.head}" if r.head and r.letter else _column(r.id, r.policy, r.scope)
            for r in compare.runs
        ),
    ]
    rows: list[list[object]] = []
    for metric in compare.metrics:
        row: list[object] = [f"{metric.label} ({metric.unit})" if metric.unit else metric.label]
        for i, cell in enumerate(metric.cells):
            text = _cell(cell.value)
            if i and cell.delta_pct is not None:
                text += f" ({cell.delta_pct:+.1f} %)"
                if cell.verdict == "within noise":
                    text += " ~"
            row.append(text)
        rows.append(row)
    legend = "\n".join(
        f"  {(r.letter + ' ') if r.letter else ''}{r.id[:8]}: {r.scenario} on {r.target}, "
        f"policy {r.policy or '-'}, affinity {r.affinity or '-'}, scope {r.scope or '-'}, "
        f"{r.status}"
        for r in compare.runs
    )
    said = [compare.same_for_all] if compare.same_for_all else []
    said += compare.sentences
    return table(headers, rows) + "\n" + legend + "".join(f"\n{line}" for line in said)


def _column(run_id: str, policy: str | None, scope: str | None) -> str:
    return f"{run_id[:8]} {policy or '?'}/{scope or '?'}"
