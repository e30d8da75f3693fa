"""Template filters over reports.wording: `{{ key|figure_label }}`, `{{ value|figure_value:key }}`,
`{{ key|is_ratio }}`, `{{ ratio|pct }}`."""

from __future__ import annotations

from typing import Any

from django import template

from aiperf_web.reports import wording

register = template.Library()


@register.filter
def figure_label(key: str) -> str:
    return wording.figure_label(str(key))


@register.filter
def figure_value(value: Any, key: str) -> str:
    return wording.figure_text(str(key), value)


@register.filter
def is_ratio(key: str) -> bool:
    return wording.is_ratio(str(key))


@register.filter
def pct(value: Any) -> str:
    return wording.percent(value)


@register.filter
def pts(delta: Any) -> str:
    """A change of a ratio in percentage points: 0.012 -> '+1.2 pts'."""
    if isinstance(delta, bool) or not isinstance(delta, int | float):
        return "—"
    return f"{100.0 * delta:+.1f} pts"
