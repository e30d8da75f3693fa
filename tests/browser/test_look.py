"""How the pages look (issue 16 items 6 and 7): the favicon, dark mode for a browser that
prefers it (pages and plotly charts), and the runs table's important columns on a phone."""

from __future__ import annotations

import re
from typing import Any

from tests.browser.conftest import Site, login


def _finished_runs(site: Site) -> list[Any]:
    from aiperf_web.runs.models import Run, Status

    runs = []
    for i, policy in enumerate(("legacy", "spawn-pin")):
        summary = {
            "requests": 120 + i, "errors": 0, "requests_per_s": 2.0,
            "ttft_ms": {"p50": 12.5, "p90": 20.0, "p99": 30.0}, "prefix_cache_hit_ratio": 0.9,
            "worker_switches": i, "orphaned_session_copies": i,
        }  # fmt: skip
        run = Run.objects.create(
            team=site.team, scenario=site.scenario, scenario_name=site.scenario.name,
            endpoint=site.endpoint, endpoint_name=site.endpoint.name, target_kind="endpoint",
            spec={**site.scenario.spec, "policy": policy}, status=Status.SUCCEEDED,
            summary=summary,
        )  # fmt: skip
        runs.append(run)
    return runs


def _luminance(css_colour: str) -> float:
    """0 (black) to 1 (white) for an 'rgb(r, g, b)' or 'rgba(...)' computed colour."""
    r, g, b = (float(v) for v in re.findall(r"[\d.]+", css_colour)[:3])
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


def test_a_phone_sees_status_scenario_throughput_ttft_and_created(site: Site, browser: Any) -> None:
    _finished_runs(site)
    ctx = browser.new_context(viewport={"width": 390, "height": 844})
    page = ctx.new_page()
    login(page, site)
    page.goto(site.url("/runs/"))
    card = page.locator("section.card:has(table.list th:text-is('Created'))").first
    right = card.evaluate("el => el.getBoundingClientRect().left + el.clientWidth")
    for head in ("Status", "Scenario", "req/s", "TTFT p50 ms", "Created"):
        th = card.locator(f"th:text-is('{head}')")
        assert th.is_visible(), head
        box = th.bounding_box()
        assert box is not None and box["x"] + box["width"] <= right + 0.5, (head, box, right)
    # The first row's values are on screen too, not scrolled off to the right.
    cells = card.locator("tbody tr").first.locator("td:visible")
    last = cells.nth(cells.count() - 1).bounding_box()
    assert last is not None and last["x"] + last["width"] <= right + 0.5
    assert "2026" in cells.nth(cells.count() - 1).inner_text() or cells.count() >= 5
    ctx.close()


def test_dark_mode_follows_the_browser_and_reaches_the_charts(site: Site, browser: Any) -> None:
    _finished_runs(site)
    for scheme in ("light", "dark"):
        ctx = browser.new_context(viewport={"width": 1366, "height": 900}, color_scheme=scheme)
        page = ctx.new_page()
        login(page, site)
        icon = page.locator("link[rel=icon]").get_attribute("href")
        assert icon is not None and icon.endswith(".svg")
        answer = page.request.get(site.url(icon))
        assert answer.ok and b"<svg" in answer.body()
        page.goto(site.url(f"/reports/scenarios/{site.scenario.uuid}/history/"))
        page.wait_for_function("() => document.querySelector('#trend .xtick text') !== null")
        body = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
        card = page.evaluate(
            "() => getComputedStyle(document.querySelector('.card')).backgroundColor"
        )
        tick = page.evaluate(
            "() => getComputedStyle(document.querySelector('#trend .xtick text')).fill"
        )
        if scheme == "dark":
            assert _luminance(body) < 0.15 and _luminance(card) < 0.2
            assert _luminance(tick) > 0.6  # axis labels readable on the dark card
        else:
            assert _luminance(body) > 0.9 and _luminance(tick) < 0.5
        ctx.close()


def test_a_click_on_a_column_sorts_the_trace_pages_agents(site: Site, context: Any) -> None:
    from aiperf_web.scenarios.services import trace_upload
    from tests.fixtures import DAG_SPAWN

    trace = trace_upload(actor=site.admin, team=site.team, filename=DAG_SPAWN.name,
                         chunks=[DAG_SPAWN.read_bytes()], name="spawn-fixture")  # fmt: skip
    page = context.new_page()
    login(page, site)
    page.goto(site.url(f"/traces/{trace.uuid}/"))

    def turns() -> list[int]:
        cells = page.locator("#agent-table tbody tr td:nth-child(5)").all_inner_texts()
        return [int(c) for c in cells]

    first = turns()
    assert len(first) > 1 and first == sorted(first, reverse=True)  # as the server sent them
    head = page.locator("#agent-table th:text-is('Turns')")
    head.click()
    assert head.get_attribute("aria-sort") == "descending" and turns() == first
    head.click()
    assert head.get_attribute("aria-sort") == "ascending" and turns() == sorted(first)
    page.locator("#agent-table th:text-is('Depth')").click()
    depths = [int(c) for c in page.locator("#agent-table tbody td:nth-child(4)").all_inner_texts()]
    assert depths == sorted(depths, reverse=True)
