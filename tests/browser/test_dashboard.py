"""The dashboard in a real browser, on the production configuration (see conftest): launch
the demo against the built-in mock and watch it live, reload mid-run, cancel a run, read the
report with its tree view and downloads, and launch a paired A/B whose comparison shows the
legacy run leaking and the spawn-pin one not."""

from __future__ import annotations

import itertools
import json
import re
import time
from pathlib import Path
from typing import Any

from aiperf_web.runs.models import Run, RunSample
from tests.browser.conftest import VIEWER_PASSWORD, Site, login

FINAL = ("succeeded", "failed", "cancelled")


def _launch(page: Any, site: Site, **knobs: str) -> str:
    page.goto(site.url("/runs/new/"))
    page.select_option("#id_scenario", str(site.scenario.uuid))
    page.select_option("#id_target", str(site.endpoint.uuid))
    for name, value in knobs.items():
        field = page.locator(f"#id_{name}")
        if field.evaluate("e => e.tagName") == "SELECT":
            field.select_option(value)
        elif field.evaluate("e => e.type") == "checkbox":
            field.set_checked(value == "on")
        else:
            field.fill(value)
    page.click("form button.primary")
    page.wait_for_url(re.compile(r".*/runs/[0-9a-f-]{36}/$"))
    return page.url.rstrip("/").rsplit("/", 1)[1]


def _wait(page: Any, expression: str, timeout_s: float = 60) -> Any:
    # As a function: an expression string is eval'd in the page, which the pages' CSP forbids.
    return page.wait_for_function(f"() => ({expression})", timeout=timeout_s * 1000).json_value()


def _chart_points(page: Any, chart: str) -> int:
    return int(page.evaluate(f"document.getElementById('{chart}').data[0].x.length"))


def _drawn_series(page: Any) -> dict[str, Any]:
    """Draw whatever is pending, then read the per-sample chart and the last seq ingested."""
    return dict(
        page.evaluate(
            """() => {
          document.getElementById('chart-orphans').scrollIntoView();
          aiperfRun.view.draw(true);
          const ttft = document.getElementById('chart-ttft').data[0].x;
          return {seq: aiperfRun.view.lastSeq,
                  sample_t: Array.from(document.getElementById('chart-orphans').data[0].x),
                  point_t: Array.from(ttft)};
        }"""
        )
    )


def test_a_run_is_watched_live_reloaded_without_gaps_and_reported(
    site: Site, context: Any, tmp_path: Path
) -> None:
    page = context.new_page()
    login(page, site)
    # 16 s: the live checks and the reload below take ~7 s of it on a loaded 2-core machine.
    run_id = _launch(page, site, policy="legacy", duration_s="16")
    # Queued or running at once, then live.
    assert page.locator("#status-badge").inner_text() in ("queued", "running")
    _wait(page, "document.getElementById('live-state').textContent === 'live'", 20)
    _wait(page, "window.aiperfRun.view.lastSeq >= 2", 45)

    # The charts gain points while the run goes; the worker table and the migrations counter
    # follow the latest snapshot.
    # (Charts out of view keep their points until they are scrolled to: look at this one.)
    page.locator("#chart-ttft").scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    before = _chart_points(page, "chart-ttft")
    _wait(page, f"document.getElementById('chart-ttft').data[0].x.length > {before}", 20)
    _wait(page, "document.querySelectorAll('#workers-body tr').length === 8", 10)
    completed_before = page.evaluate(
        "Array.from(document.querySelectorAll('#workers-body tr')).map(r => r.cells[6].textContent)"
    )
    _wait(
        page,
        f"JSON.stringify(Array.from(document.querySelectorAll('#workers-body tr'))"
        f".map(r => r.cells[6].textContent)) !== {json.dumps(json.dumps(completed_before))}",
        20,
    )
    shown = page.evaluate(
        "[document.getElementById('migrations-total').textContent,"
        " String(aiperfRun.view.latest.data.migrations_total)]"
    )
    assert shown[0].replace(",", "") == shown[1]

    # Reload mid-run: the server renders the history, the socket resumes after it.
    page.reload()
    _wait(page, "document.getElementById('live-state').textContent === 'live'", 20)
    first_seq = page.evaluate("aiperfRun.view.lastSeq")
    _wait(page, f"window.aiperfRun.view.lastSeq >= {first_seq + 2}", 30)
    drawn = _drawn_series(page)
    run = Run.objects.get(uuid=run_id)
    stored = list(
        RunSample.objects.filter(run=run, seq__lte=drawn["seq"])
        .order_by("seq")
        .values_list("t_s", flat=True)
    )
    assert drawn["sample_t"] == stored  # every stored sample, once, in order: no gap, no dup
    points = drawn["point_t"]
    assert points == sorted(set(points)) and len(points) >= 5
    gaps = [b - a for a, b in itertools.pairwise(points)]
    assert max(gaps) <= 1.5 * min(gaps), f"a hole in the interval points: {gaps}"

    # The run ends: the page turns into the report from the database.
    page.wait_for_function(
        "() => document.body.dataset.status === 'succeeded' || document.getElementById('report')",
        timeout=60_000,
    )
    page.wait_for_selector("#report", timeout=30_000)
    page.wait_for_selector("#trees[data-ready='1'] .tree .main-svg", timeout=30_000)
    assert page.locator("#drain").is_visible()
    run.refresh_from_db()
    assert run.status == "succeeded" and run.summary is not None
    page.click("[data-tree-mode=inference]")
    page.wait_for_selector("#trees .tree .main-svg")

    with page.expect_download() as download:
        page.click("#export-records")
    lines = Path(download.value.path()).read_text().splitlines()
    assert len(lines) == run.summary["requests"] > 0
    assert {"session_id", "client_worker", "ttft_ms"} <= set(json.loads(lines[0]))

    with page.expect_download() as download:
        page.click("#export-html")
    report = tmp_path / "report.html"
    download.value.save_as(report)
    offline = context.browser.new_context()
    offline.set_offline(True)
    sheet = offline.new_page()
    errors: list[str] = []
    sheet.on("pageerror", lambda e: errors.append(str(e)))
    sheet.goto(report.as_uri())
    sheet.wait_for_function("() => document.body.dataset.drawn === '1'", timeout=30_000)
    assert sheet.locator("#chart-ttft .main-svg").count() >= 1
    assert sheet.locator("#trees .tree").count() >= 1
    assert not errors, errors
    offline.close()


def test_a_run_is_cancelled_from_its_page_and_a_viewer_can_only_watch(
    site: Site, context: Any, browser: Any
) -> None:
    page = context.new_page()
    login(page, site)
    run_id = _launch(page, site, duration_s="120")
    _wait(page, "window.aiperfRun.view.lastSeq >= 1", 45)

    viewer_ctx = browser.new_context()
    watcher = viewer_ctx.new_page()
    login(watcher, site, "viewer", VIEWER_PASSWORD)
    watcher.goto(site.url(f"/runs/{run_id}/"))
    _wait(watcher, "document.getElementById('live-state').textContent === 'live'", 20)
    assert watcher.locator("#cancel").count() == 0
    seq = watcher.evaluate("aiperfRun.view.lastSeq")
    _wait(watcher, f"window.aiperfRun.view.lastSeq > {seq}", 20)  # watching live
    # The viewer's POST (with the CSRF token the page carries) is refused.
    refused = watcher.evaluate(
        f"""() => fetch('/runs/{run_id}/cancel/', {{method: 'POST', headers: {{'X-CSRFToken':
             document.querySelector('[name=csrfmiddlewaretoken]').value}}}}).then(r => r.status)"""
    )
    assert refused == 403

    asked = time.monotonic()
    page.click("#cancel")
    page.wait_for_function("() => document.body.dataset.status === 'cancelled' || "
                           "document.getElementById('status-badge').textContent === 'cancelled'",
                           timeout=15_000)  # fmt: skip
    took = time.monotonic() - asked
    # The viewer's page learns it too, over its socket.
    _wait(watcher, "document.getElementById('status-badge').textContent === 'cancelled'", 15)
    viewer_ctx.close()
    page.wait_for_selector("#report", timeout=30_000)
    run = Run.objects.get(uuid=run_id)
    assert run.status == "cancelled" and took < 10
    assert run.summary is not None and run.summary["requests"] > 0  # partial results kept
    assert page.locator("[data-kpi=requests]").first.inner_text() != "—"

    # An anonymous browser gets no socket.
    anon = browser.new_context()
    stranger = anon.new_page()
    stranger.goto(site.url("/accounts/login/"))
    opened = stranger.evaluate(
        f"""() => new Promise(done => {{
             const ws = new WebSocket(`ws://${{location.host}}/ws/runs/{run_id}/`);
             ws.onopen = () => done('open'); ws.onclose = () => done('closed');
             ws.onmessage = () => done('message'); }})"""
    )
    assert opened == "closed"
    anon.close()


def test_a_paired_ab_opens_into_the_comparison_and_flags_legacy_only(
    site: Site, context: Any
) -> None:
    page = context.new_page()
    login(page, site)
    page.goto(site.url(f"/reports/ab/new/?scenario={site.scenario.uuid}"))
    page.select_option("#id_target", "simulated")
    page.check("input[name=knob][value=policy]")
    page.fill("#id_duration_s", "600")
    page.fill("#id_concurrency", "256")
    page.click("#ab-form button.primary")
    page.wait_for_url(re.compile(r".*/reports/compare/\?runs=.*"))
    # Both runs finish (one after the other); the page reloads itself into the result.
    page.wait_for_function(
        "() => document.querySelectorAll('.compared-run[data-rendered-status=succeeded]')"
        ".length === 2",
        timeout=90_000,
    )
    cards = page.locator(".compared-run")
    assert cards.count() == 2
    legacy, pinned = cards.nth(0), cards.nth(1)
    assert "legacy" in legacy.locator("h2").inner_text()
    assert "spawn-pin" in pinned.locator("h2").inner_text()
    assert legacy.locator("[data-leak]").get_attribute("data-leak") in ("leak", "growing")
    assert pinned.locator("[data-leak]").get_attribute("data-leak") == "ok"
    rows = page.locator("#delta-table tbody tr")
    orphans = rows.filter(has_text="Orphaned session copies").locator("td")
    assert int(orphans.nth(1).inner_text().split()[0]) > 0
    assert orphans.nth(2).inner_text().split()[0] == "0"
    assert page.locator("#cmp-orphans .main-svg").count() >= 1

    # The runs list flags the legacy run, not the spawn-pin one.
    legacy_id = legacy.get_attribute("data-run-id")
    pinned_id = pinned.get_attribute("data-run-id")
    page.goto(site.url("/runs/"))
    assert "leaked" in page.locator(f"tr[data-run-id='{legacy_id}']").last.inner_text()
    assert "leaked" not in page.locator(f"tr[data-run-id='{pinned_id}']").last.inner_text()
