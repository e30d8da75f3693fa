"""The live run page as its charts behave (issue 16): the header follows the run's row without a
reload, the time-series charts zoom together and show one instant on hover, and a phone gets
charts without the toolbar over their titles and with whole-number ticks where counts are whole."""

from __future__ import annotations

import re
from typing import Any

from tests.browser.conftest import Site, login
from tests.browser.test_dashboard import _launch, _wait


def test_the_header_follows_the_run_and_the_charts_zoom_and_hover_together(
    site: Site, context: Any, browser: Any
) -> None:
    page = context.new_page()
    login(page, site)
    run_id = _launch(page, site, policy="legacy", duration_s="40")
    # Queued or running at first; then running, with its start time, and the launch's notice
    # and the "no snapshot yet" line gone, with no reload.
    _wait(page, "document.getElementById('status-badge').textContent === 'running'", 30)
    _wait(page, "document.getElementById('started-at').textContent !== '—'", 10)
    _wait(page, "window.aiperfRun.view.lastSeq >= 4", 45)
    assert page.evaluate("() => performance.getEntriesByType('navigation').length") == 1
    assert page.locator(".messages").count() == 0
    assert page.locator("#status-text").inner_text() == "running"
    no_samples = page.locator("#no-samples")
    assert no_samples.count() == 0 or not no_samples.is_visible()

    # Zoom one chart (as a drag does): the others take the same range as they come into view.
    page.locator("#chart-throughput").scroll_into_view_if_needed()
    page.evaluate(
        "() => Plotly.relayout(document.getElementById('chart-throughput'),"
        " {'xaxis.range[0]': 1, 'xaxis.range[1]': 3})"
    )
    for other in ("chart-tokens", "chart-ttft", "chart-errors"):
        _wait(
            page,
            f"JSON.stringify(document.getElementById('{other}').layout.xaxis.range) === '[1,3]'",
            10,
        )
    # Double-click (autorange) gives every chart the run's range back.
    page.evaluate(
        "() => Plotly.relayout(document.getElementById('chart-tokens'), {'xaxis.autorange': true})"
    )
    _wait(page, "document.getElementById('chart-throughput').layout.xaxis.range[0] === 0", 10)

    # Hover one: the others show the same instant, and the readout names it on both clocks.
    box = page.locator("#chart-throughput .nsewdrag").first.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] / 2)
    page.mouse.move(box["x"] + box["width"] * 0.35, box["y"] + box["height"] / 2)
    _wait(page, "!document.getElementById('crosshair').hidden", 5)
    readout = page.locator("#crosshair").inner_text()
    assert re.fullmatch(r"run time \d+\.\d s · \d\d:\d\d:\d\d UTC", readout), readout
    _wait(page, "document.querySelectorAll('#chart-tokens .hoverlayer > *').length > 0", 5)

    # A phone: no toolbar over the titles; the heatmap's colour bar and the inference chart count
    # in whole numbers.
    phone = browser.new_context(
        viewport={"width": 390, "height": 844}, storage_state=context.storage_state()
    )
    small = phone.new_page()
    small.goto(site.url(f"/runs/{run_id}/"))
    _wait(small, "window.aiperfRun && window.aiperfRun.view.lastSeq >= 0", 20)
    for chart in ("chart-heatmap", "chart-inference", "chart-throughput"):
        small.locator(f"#{chart}").scroll_into_view_if_needed()
        _wait(small, f"!!document.querySelector('#{chart} .main-svg')", 20)
        assert small.locator(f"#{chart} .modebar").count() == 0
    _wait(small, "document.querySelectorAll('#chart-inference .ytick text').length > 0", 20)
    ticks = small.evaluate(
        """() => [...document.querySelectorAll(
                   '#chart-inference .yaxislayer-above .ytick text, #chart-heatmap .cbaxis text')]
                 .map(t => t.textContent).filter(t => /^[\\d.,−-]+$/.test(t))"""
    )
    assert ticks and all(re.fullmatch(r"[\d,]+", t) for t in ticks), ticks
    phone.close()


def test_a_run_of_client_worker_processes_shows_each_process_with_its_workers(
    site: Site, context: Any, browser: Any
) -> None:
    """Launched from the form with the processes box ticked and 2 client workers per host: the
    page lists each host process (host:pid, RSS, CPU) with the workers it serves (in flight,
    copies, sent, state) instead of one process's RSS, and a phone reads it without
    scrolling sideways."""
    page = context.new_page()
    login(page, site)
    run_id = _launch(
        page,
        site,
        client_worker_processes="on",
        client_workers="4",
        client_workers_per_host="2",
        duration_s="8",
    )
    _wait(page, "document.querySelectorAll('#hosts-body tr.worker-row').length === 4", 60)
    assert page.locator("#hosts").is_visible() and not page.locator("#one-process").is_visible()
    processes = page.locator("#hosts-body tr.host-row")
    assert processes.count() == 2
    names = set()
    for i in range(2):
        name = processes.nth(i).locator(".host-name").inner_text()
        assert re.fullmatch(r".+:\d+", name), name  # host:pid
        names.add(name)
        figs = processes.nth(i).locator(".host-figs").inner_text()
        assert re.fullmatch(r"RSS [\d.]+ MiB · CPU [\d.]+ s · 2 client workers", figs), figs
    assert len(names) == 2
    workers = page.locator("#hosts-body tr.worker-row")
    for i in range(4):
        cells = workers.nth(i).locator("td")
        assert cells.nth(0).inner_text() == str(i)
        assert cells.nth(5).inner_text() == "answering"
    # Rows in order: a process, its two workers, the next process, its two.
    kinds = page.eval_on_selector_all("#hosts-body tr", "rows => rows.map(r => r.className)")
    assert kinds == ["host-row", "worker-row", "worker-row"] * 2, kinds

    phone = browser.new_context(
        viewport={"width": 390, "height": 844}, storage_state=context.storage_state()
    )
    small = phone.new_page()
    small.goto(site.url(f"/runs/{run_id}/"))
    _wait(small, "document.querySelectorAll('#hosts-body tr.worker-row').length === 4", 30)
    small.locator("#hosts").scroll_into_view_if_needed()
    wrap = small.locator("#hosts .table-scroll")
    assert wrap.evaluate("e => e.scrollWidth <= e.clientWidth + 1"), "the table scrolls sideways"
    phone.close()
    _wait(page, "document.getElementById('status-badge').textContent === 'succeeded'", 60)
