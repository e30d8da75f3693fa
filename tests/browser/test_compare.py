"""Compare and history that say what differs (issue 27 item 2) and noise-aware verdicts (issue
20 item 6), in a real browser at a laptop's and a phone's width, light and dark: column heads
from the fields that differ, the chosen reference, "within noise" with repeats and "no
repeats" for a single pair, the table that says it scrolls on a phone, the history's lines.
Screenshots go to tests/browser/artifacts/compare-*.png."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.browser.conftest import ARTIFACTS, Site, login


def _run(site: Site, *, spec: dict[str, Any], ttft_p50: float, orphans: int = 0) -> Any:
    from aiperf_web.runs.models import Run, Status

    summary = {
        "requests": 200, "errors": 0, "requests_per_s": 12.0, "output_tokens_per_s": 600.0,
        "prefix_cache_hit_ratio": 0.8, "worker_switches": 0,
        "orphaned_session_copies": orphans,
        "ttft_ms": {"p50": ttft_p50, "p90": ttft_p50 * 2, "p99": ttft_p50 * 3},
        "itl_ms": {"p50": 5.0, "p90": 6.0, "p99": 8.0},
        "latency_ms": {"p50": 500.0, "p90": 700.0, "p99": 900.0},
        "goodput": {"slo_ms": {"ttft": 500.0}, "good_requests": 180, "good_ratio": 0.9,
                    "goodput_per_s": 10.8},
    }  # fmt: skip
    return Run.objects.create(
        team=site.team, scenario=site.scenario, scenario_name=site.scenario.name,
        endpoint=site.endpoint, endpoint_name=site.endpoint.name, target_kind="endpoint",
        spec={**site.scenario.spec, "slo_ttft_ms": 500.0, **spec}, status=Status.SUCCEEDED,
        summary=summary,
    )  # fmt: skip


def _context(browser: Any, width: int, height: int, scheme: str) -> tuple[Any, list[str]]:
    ctx = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
    errors: list[str] = []
    ctx.on("weberror", lambda e: errors.append(str(e.error)))
    return ctx, errors


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize(("width", "height"), [(1366, 900), (390, 844)])
def test_compare_heads_columns_by_what_differs_and_the_reference_is_chosen(
    site: Site, browser: Any, width: int, height: int, scheme: str
) -> None:
    runs = [_run(site, spec={"concurrency": c}, ttft_p50=10.0 * c) for c in (8, 16, 32, 64)]
    ctx, errors = _context(browser, width, height, scheme)
    page = ctx.new_page()
    login(page, site)
    ids = ",".join(str(r.uuid) for r in runs)
    page.goto(site.url(f"/reports/compare/?runs={ids}"))
    heads = page.locator("#delta-table thead th").all_inner_texts()
    assert [h.split("\n")[0] for h in heads[1:]] == ["A: c=8", "B: c=16", "C: c=32", "D: c=64"]
    assert not any("spawn-pin" in h or "lineage" in h for h in heads)
    shared = page.locator("#same-for-all").inner_text()
    assert shared.startswith("all runs: scenario ") and "c=" not in shared
    assert page.locator("#slo-row").is_visible()
    # One run each: nothing is called worse, and the page says why.
    assert page.locator("#delta-table .delta-worse").count() == 0
    assert "no repeats to judge noise" in page.locator("#colour-note").inner_text()
    sentences = page.locator("#pair-sentences li").all_inner_texts()
    assert len(sentences) == 3 and sentences[0].startswith("c=16 against c=8: TTFT p50 +100 %")
    # The charts' traces (their legends and hover names) carry the same heads.
    page.wait_for_function("() => (document.getElementById('cmp-ttft').data || []).length === 4")
    names = page.evaluate("() => document.getElementById('cmp-ttft').data.map(t => t.name)")
    assert names == ["A: c=8", "B: c=16", "C: c=32", "D: c=64"]
    wrap = page.locator("#delta-scroll")
    overflows = wrap.evaluate("el => el.scrollWidth > el.clientWidth + 1")
    if width < 500:
        # A phone: the table scrolls in its box and says so above it.
        assert overflows and page.locator("#scroll-hint").is_visible()
    else:
        assert not overflows and not page.locator("#scroll-hint").is_visible()
    page.screenshot(path=str(ARTIFACTS / f"compare-{width}-{scheme}.png"), full_page=True)
    for name, box in (("differs", "#what-differs"), ("table", "section.card:has(#delta-table)")):
        page.locator(box).screenshot(path=str(ARTIFACTS / f"compare-{name}-{width}-{scheme}.png"))

    # Choose c=32 as the reference: the page reloads against it.
    page.select_option("#ref-select", str(runs[2].uuid))
    page.wait_for_url(re.compile(rf".*ref={runs[2].uuid}.*"))
    assert "change against C: c=32" in page.locator("h2", has_text="Figures").inner_text()
    heads = page.locator("#delta-table thead th").all_inner_texts()
    assert heads[1].startswith("C: c=32") and "reference" in heads[1]
    assert (
        page.locator("#pair-sentences li")
        .first.inner_text()
        .startswith("c=8 against c=32: TTFT p50 −75 %")
    )
    # The run report's latency table: in a box that scrolls sideways (edge shadows), never cut.
    page.goto(site.url(f"/runs/{runs[0].uuid}/"))
    box = page.locator("#latency-scroll")
    assert box.evaluate("el => getComputedStyle(el).overflowX") == "auto"
    table_right = page.locator("#latency-table").evaluate("el => el.getBoundingClientRect().right")
    fits = box.evaluate("el => el.scrollWidth <= el.clientWidth + 1")
    assert fits or table_right > width  # wider than the screen only inside its scrolling box
    page.locator("#report").screenshot(path=str(ARTIFACTS / f"report-{width}-{scheme}.png"))
    assert errors == []
    ctx.close()


@pytest.mark.parametrize(("width", "height", "scheme"), [(1366, 900, "light"), (390, 844, "dark")])
def test_repeats_call_an_overlapping_difference_within_noise_never_red(
    site: Site, browser: Any, width: int, height: int, scheme: str
) -> None:
    # Two legacy and two spawn-pin runs: TTFT ranges overlap, orphans are apart.
    legacy = [_run(site, spec={"policy": "legacy"}, ttft_p50=p, orphans=o)
              for p, o in ((20.0, 150), (26.0, 160))]  # fmt: skip
    pinned = [_run(site, spec={"policy": "spawn-pin"}, ttft_p50=p) for p in (24.0, 30.0)]
    ctx, errors = _context(browser, width, height, scheme)
    page = ctx.new_page()
    login(page, site)
    ids = ",".join(str(r.uuid) for r in (*legacy, *pinned))
    page.goto(site.url(f"/reports/compare/?runs={ids}"))
    row = page.locator('#delta-table tr[data-key="ttft_ms.p50"]')
    verdicts = row.locator("td[data-verdict]").evaluate_all(
        "cells => cells.map(c => c.dataset.verdict)"
    )
    assert verdicts == ["reference", "repeat", "within noise", "within noise"]
    assert "within noise" in row.inner_text() and row.locator(".delta-worse").count() == 0
    orphans = page.locator('#delta-table tr[data-key="orphaned_session_copies"]')
    assert orphans.locator(".delta-better").count() == 2
    sentence = page.locator("#pair-sentences li").inner_text()
    assert sentence.startswith(
        "spawn-pin against legacy: 155 → 0 orphaned copies (better, beyond noise), "
        "TTFT p50 +17 % (within noise)"
    ) and sentence.endswith("(2 runs each).")
    page.screenshot(path=str(ARTIFACTS / f"compare-noise-{width}-{scheme}.png"), full_page=True)
    page.locator("section.card:has(#delta-table)").screenshot(
        path=str(ARTIFACTS / f"compare-noise-table-{width}-{scheme}.png")
    )

    # The history draws one line per configuration that differs: legacy and spawn-pin.
    _run(site, spec={"policy": "spawn-pin", "concurrency": 8}, ttft_p50=9.0)
    page.goto(site.url(f"/reports/scenarios/{site.scenario.uuid}/history/"))
    page.wait_for_function("() => document.querySelectorAll('#trend-legend span').length >= 3")
    legend = page.locator("#trend-legend span").all_inner_texts()
    assert {item.rsplit(" (", 1)[0] for item in legend} >= {
        "legacy · c=64", "spawn-pin · c=64", "spawn-pin · c=8"
    }  # fmt: skip
    assert page.locator("#history-same").inner_text().startswith("all runs: scenario ")
    page.screenshot(path=str(ARTIFACTS / f"history-{width}-{scheme}.png"), full_page=True)
    page.locator("section.card:has(#trend)").screenshot(
        path=str(ARTIFACTS / f"history-trend-{width}-{scheme}.png")
    )
    assert errors == []
    ctx.close()
