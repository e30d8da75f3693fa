"""The sweep page in a real browser (issue 20 item 4): a short simulated sweep runs through the
real worker while the page is open, and its curves, progress and point table grow without a
reload; then the finished page at a laptop's and a phone's width, light and dark: titles,
units and legends drawn, the table scrolling sideways inside its box on a phone with a hint
saying so, nothing wider than the screen. Screenshots go to tests/browser/artifacts/."""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

import pytest

from tests.browser.conftest import ARTIFACTS, Site, login
from tests.browser.test_dashboard import _wait

SWEEP = {
    "concurrency": [1, 2, 4, 8, 16],
    "arms": [
        {"name": "legacy", "overrides": {"policy": "legacy"}},
        {"name": "spawn-pin", "overrides": {"policy": "spawn-pin"}},
    ],
    "slo": {"ttft_ms": 3000, "goodput_fraction": 0.5},
}
CHARTS = ("sweep-frontier-tokens", "sweep-ttft", "sweep-orphans", "sweep-child-hit")


def _launch(site: Site, settings: Any) -> Any:
    from aiperf_web.runs.services import SIMULATED
    from aiperf_web.scenarios.services import scenario_create
    from aiperf_web.stack.demo import DEMO_SPEC
    from aiperf_web.sweeps.services import sweep_launch

    # The demo's experiment on the seeded synthetic agentic workload: its subagents bounce
    # under legacy, so the two arms' curves part (orphans and switches grow with load under
    # legacy, 0 under spawn-pin) and the screenshots show both.
    scenario = scenario_create(
        actor=site.admin,
        team=site.team,
        name="sweep-synthetic",
        spec={**DEMO_SPEC, "speedup": 1, "workload": {"synthetic": {"seed": 0}}},
        trace_ids=[],
    )

    # This process makes the first points' runs: onto the queue the server's worker reads.
    settings.AIPERF_RUNS_QUEUE = f"runs-browser-{os.getpid()}"
    return sweep_launch(
        actor=site.admin,
        scenario_id=scenario.uuid,
        endpoint_id=SIMULATED,
        sweep=SWEEP,
        # Few snapshots: each is a stored sample, and the live curves here are the points.
        overrides={"duration_s": 600, "snapshot_interval_s": 30},
    )


def _drawn(page: Any, chart_id: str) -> int:
    """Points drawn on a chart (every trace)."""
    return int(
        page.evaluate(
            "(id) => (document.getElementById(id).data || [])"
            ".reduce((n, t) => n + (t.x ? t.x.length : 0), 0)",
            chart_id,
        )
    )


@pytest.mark.timeout(720)
def test_the_curves_grow_while_the_sweep_runs_then_read_at_every_width(
    site: Site, browser: Any, settings: Any
) -> None:
    ctx = browser.new_context(viewport={"width": 1366, "height": 900})
    errors: list[str] = []
    ctx.on("weberror", lambda e: errors.append(str(e.error)))
    page = ctx.new_page()
    login(page, site)
    sweep = _launch(site, settings)
    page.goto(site.url(f"/sweeps/{sweep.uuid}/"))
    _wait(page, "document.body.dataset.drawn === '1'")
    page.evaluate("() => { window.__notReloaded = true; }")
    total = 2 * 5
    seen: set[int] = set()
    drawn: list[int] = []
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        ended = int(page.locator("#sweep").get_attribute("data-runs-ended") or 0)
        seen.add(ended)
        drawn.append(_drawn(page, "sweep-orphans"))
        if page.locator("#sweep").get_attribute("data-active") == "" and ended == total:
            break
        time.sleep(0.3)
    assert page.evaluate("() => window.__notReloaded === true"), "the page reloaded"
    assert max(seen) == total, seen
    # It filled in point by point: at least one state between none and all was drawn.
    assert any(0 < k < total for k in seen), seen
    assert drawn[-1] > drawn[0] and drawn == sorted(drawn), drawn
    assert page.locator("#sweep-status").inner_text() == "succeeded"
    assert page.locator("#points-table tbody tr").count() == total
    assert page.locator("#points-table a[href^='/runs/']").count() == total
    assert "legacy vs spawn-pin" in page.locator("#headline-list").inner_text()
    ctx.close()
    assert errors == []

    _look_report(site, browser, sweep)
    # An earlier sweep of the scenario (a copy of this one's points, one load fewer): the
    # history draws today's frontier against it.
    earlier = _copy(sweep, drop_load=16.0)
    for scheme in ("light", "dark"):
        for name, (width, height) in (("laptop", (1366, 768)), ("phone", (390, 844))):
            _look(site, browser, sweep, scheme=scheme, name=name, width=width, height=height)
            _look_history(site, browser, sweep, earlier, scheme=scheme, name=name, width=width,
                          height=height)  # fmt: skip


def _look_report(site: Site, browser: Any, sweep: Any) -> None:
    """The offline report, opened with the network cut: every curve drawn from what is inside."""
    ctx = browser.new_context(viewport={"width": 1366, "height": 768})
    page = ctx.new_page()
    login(page, site)
    response = page.request.get(site.url(f"/sweeps/{sweep.uuid}/report.html"))
    assert response.ok and "attachment" in response.headers["content-disposition"]
    saved = ARTIFACTS / "sweep-report.html"
    saved.write_bytes(response.body())
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    fetched: list[str] = []
    ctx.route("http*://**/*", lambda route: (fetched.append(route.request.url), route.abort()))
    page.goto(saved.as_uri())
    _wait(page, "document.body.dataset.drawn === '1'")
    drawn = page.evaluate(
        "() => [...document.querySelectorAll('.chart')].filter(el => el.data).length"
    )
    assert drawn == page.locator(".chart").count() >= 12
    page.screenshot(path=str(ARTIFACTS / "sweep-report-laptop-light.png"), full_page=True)
    ctx.close()
    assert errors == [] and fetched == []


def _copy(sweep: Any, *, drop_load: float) -> Any:
    from datetime import timedelta

    from aiperf_web.sweeps.models import Sweep, SweepPoint

    points = list(SweepPoint.objects.filter(sweep=sweep).exclude(load=drop_load))
    copy = Sweep.objects.get(pk=sweep.pk)
    copy.pk = None
    copy.id = None
    copy.uuid = uuid.uuid4()
    copy.save()
    Sweep.objects.filter(pk=copy.pk).update(created_at=sweep.created_at - timedelta(days=1))
    for point in points:
        point.pk = None
        point.sweep = copy
        point.run = None
        point.save()
    return copy


def _look_history(
    site: Site,
    browser: Any,
    sweep: Any,
    earlier: Any,
    *,
    scheme: str,
    name: str,
    width: int,
    height: int,
) -> None:
    ctx = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
    errors: list[str] = []
    ctx.on("weberror", lambda e: errors.append(str(e.error)))
    page = ctx.new_page()
    login(page, site)
    page.goto(site.url(f"/sweeps/history/{sweep.scenario.uuid}/"))
    _wait(page, "document.body.dataset.drawn === '1'")
    listed = page.locator("#compared-sweeps li").evaluate_all(
        "items => items.map(li => li.dataset.sweepId)"
    )
    assert listed == [str(sweep.uuid), str(earlier.uuid)]  # newest first
    frontier = page.locator("#sweep-cmp-frontier")
    legend = frontier.locator(".legend").text_content() or ""
    assert "#1" in legend and "#2" in legend, legend
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    page.screenshot(path=str(ARTIFACTS / f"sweep-history-{name}-{scheme}.png"), full_page=True)
    ctx.close()
    assert errors == []


def _look(
    site: Site, browser: Any, sweep: Any, *, scheme: str, name: str, width: int, height: int
) -> None:
    ctx = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
    errors: list[str] = []
    ctx.on("weberror", lambda e: errors.append(str(e.error)))
    page = ctx.new_page()
    login(page, site)
    page.goto(site.url(f"/sweeps/{sweep.uuid}/"))
    _wait(page, "document.body.dataset.drawn === '1'")
    for chart_id in CHARTS:
        chart = page.locator(f"#{chart_id}")
        chart.scroll_into_view_if_needed()
        # Title, both axis titles and a legend entry per arm, as plotly drew them.
        assert (chart.locator(".gtitle").text_content() or "").strip(), chart_id
        assert (chart.locator(".xtitle").text_content() or "").strip(), chart_id
        assert (chart.locator(".ytitle").text_content() or "").strip(), chart_id
        legend = chart.locator(".legend").text_content() or ""
        assert "legacy" in legend and "spawn-pin" in legend, (chart_id, legend)
        box = chart.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 1
    # Nothing wider than the screen: the table scrolls inside its own box.
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    scroll = page.locator("#points-scroll")
    wide = page.evaluate(
        "() => { const b = document.getElementById('points-scroll');"
        " return b.scrollWidth > b.clientWidth + 1; }"
    )
    assert page.locator("#points-hint").is_visible() == wide
    if name == "phone":
        assert wide, "the point table fits a phone? then the hint test is moot"
        box = scroll.bounding_box()
        assert box is not None and box["x"] + box["width"] <= width
    if scheme == "dark":
        background = page.locator(".card").first.evaluate(
            "el => getComputedStyle(el).backgroundColor"
        )
        assert background == "rgb(23, 28, 38)", background
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"sweep-page-{name}-{scheme}.png"), full_page=True)
    # The parts to look at closely: the header, the first curves and the table.
    for part in ("sweep-header", "card-throughput", "card-copies", "sweep-points"):
        shot = ARTIFACTS / f"sweep-{part}-{name}-{scheme}.png"
        page.locator(f"#{part}").screenshot(path=str(shot))
    ctx.close()
    assert errors == []
