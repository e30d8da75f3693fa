"""Template tags of the run page's charts: the cells of one card, and the declared list as data
for the page's script (aiperf_web/live/charts.py)."""

from __future__ import annotations

from django import template
from django.utils.html import json_script
from django.utils.safestring import SafeString

from aiperf_web.live.charts import ChartSpec, charts_in, charts_of_page

register = template.Library()


@register.simple_tag
def charts_of_card(card: str) -> list[ChartSpec]:
    return charts_in(card)


@register.simple_tag
def chart_specs(compare: bool = False) -> SafeString:
    """The declared charts as <script type="application/json" id="chart-specs">."""
    return json_script(charts_of_page(compare=compare), "chart-specs")
