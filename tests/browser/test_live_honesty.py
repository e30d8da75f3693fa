"""What the run page says is never wrong (issue 27 items 4-7), walked in Chromium at laptop and
phone widths, light and dark: charts say they wait for data instead of blank panels, no
percentile comes from an empty interval, one time range for every series, legends list only
drawn lines, a finished run's leak is in the past tense, a failed run shows its failure and no
empty charts; the client and a simulated cluster are named when they limit a run; the agent
trees over time; the launch form greys out what does not apply. Screenshots of each state go
to tests/browser/artifacts/ (live-honesty-*.png)."""

from __future__ import annotations

import time
from typing import Any

from tests.browser.conftest import ARTIFACTS, Site, login
from tests.browser.test_dashboard import _launch, _wait

SHAPES = {"laptop": (1366, 900), "phone": (390, 844)}


def _ended(url: str, timeout_s: float = 90) -> str:
    """Wait (in the database: the page reloads itself when the run ends) for the run of a run
    page's URL to end; its status."""
    from aiperf_web.runs.models import FINAL, Run

    run_id = url.rstrip("/").rsplit("/", 1)[1]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = Run.objects.filter(uuid=run_id).values_list("status", flat=True).first()
        if status in FINAL:
            return str(status)
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} did not end within {timeout_s} s")


def _shots(browser: Any, context: Any, url: str, name: str, wait: str) -> None:
    """The page at both widths in light and dark, full page, for a person to look at."""
    for shape, (w, h) in SHAPES.items():
        for scheme in ("light", "dark"):
            ctx = browser.new_context(
                viewport={"width": w, "height": h}, color_scheme=scheme,
                storage_state=context.storage_state(),
            )  # fmt: skip
            errors: list[str] = []
            page = ctx.new_page()
            page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
            page.goto(url)
            _wait(page, wait, 30)
            page.evaluate("() => window.aiperfRun && window.aiperfRun.view.draw(true)")
            page.wait_for_timeout(300)
            page.screenshot(path=str(ARTIFACTS / f"live-honesty-{name}-{shape}-{scheme}.png"),
                            full_page=True)  # fmt: skip
            ctx.close()
            assert not errors, (shape, scheme, errors)


def test_the_launch_form_greys_out_what_does_not_apply(site: Site, context: Any) -> None:
    page = context.new_page()
    login(page, site)
    page.goto(site.url("/runs/new/"))
    actions = page.locator("#id_affinity_actions")
    # The demo scenario keys sessions by X-Dynamo headers: no session_control goes out.
    assert actions.is_disabled()
    assert actions.locator("option[value='']").inner_text() == "not sent with dynamo-headers"
    assert "scenario: bind" not in page.content()
    per_host = page.locator("#id_client_workers_per_host")
    assert per_host.is_disabled()
    page.locator("#id_client_worker_processes").check()
    assert per_host.is_enabled()
    page.locator("#id_client_worker_processes").uncheck()
    assert per_host.is_disabled()
    if page.locator("#id_affinity option[value='dynamo-nvext']").count():
        page.select_option("#id_affinity", "dynamo-nvext")
        assert actions.is_enabled()
        assert not actions.locator("option[value='']").inner_text().startswith("not sent")


def test_live_figures_wait_for_data_and_never_overclaim(
    site: Site, context: Any, browser: Any
) -> None:
    page = context.new_page()
    login(page, site)
    run_id = _launch(page, site, policy="legacy", duration_s="12")
    _wait(page, "window.aiperfRun && document.body.dataset.status === 'running'", 40)
    # Every chart is drawn or says it waits: no blank white panel, no bare axes.
    states = page.evaluate(
        """() => [...document.querySelectorAll('.chart')].filter(e => !e.hidden).map(e => ({
             id: e.id, drawn: !!e.querySelector('.main-svg'),
             says: e.children.length ? '' : getComputedStyle(e, '::before').content}))"""
    )
    assert states
    for s in states:
        assert s["drawn"] or "waiting for data" in s["says"], s
    _wait(page, "window.aiperfRun.view.lastSeq >= 2", 30)

    # The client past 85 % CPU in three snapshots in a row: the page says the client limits
    # the run. An interval that answered nothing: no percentile (a gap, '—'), never 0.
    warned = page.evaluate(
        """() => {
          const view = window.aiperfRun.view;
          const empty = {p50: 0, p90: 0, p99: 0};
          for (let i = 1; i <= 3; i++) {
            view.push({seq: 1e6 + i, t_s: 900 + i, data: {t_s: 900 + i, requests: 0,
              itl_ms: empty, ttft_ms: empty, latency_ms: empty,
              client: {cpu_pct: 96, loop_lag_ms: 12},
              recent: [{t_s: 899 + i, requests: 0, errors: 0, output_tokens: 0,
                        ttft_ms: empty, itl_ms: empty, latency_ms: empty}]}});
            view.draw(true);
          }
          const ttft = document.getElementById('chart-ttft').data;
          return {note: document.getElementById('client-limit').hidden ? '' :
                    document.getElementById('client-limit').textContent,
                  itl: document.querySelector('[data-kpi="itl_ms.p50"]').textContent,
                  cpu: document.querySelector('[data-kpi="client_cpu"]').textContent,
                  last: ttft.map(t => t.y[t.y.length - 1])};
        }"""
    )
    assert warned["note"].startswith("The client, not the server, limits this run now")
    assert "96 % of a core" in warned["note"] and warned["cpu"] == "96 %"
    assert warned["itl"] == "—"
    assert all(v is None for v in warned["last"]), warned["last"]

    # The run ends: the page reloads into its report.
    assert _ended(page.url) == "succeeded"
    page.goto(site.url(f"/runs/{run_id}/"))
    _wait(page, "window.aiperfRun && window.aiperfRun.view.lastSeq >= 0", 20)
    leak = page.locator("#leak").inner_text()
    assert "leak growing" not in leak and "are growing" not in leak and "/min" not in leak
    assert "grow by" not in leak
    # One time range for every series, the leak's orphans included; legends list drawn lines.
    ranges = page.evaluate(
        """() => {
          const view = window.aiperfRun.view;
          for (const s of view.series) if (s.chart.el) s.chart.el.scrollIntoView();
          view.draw(true);
          return view.series.filter(s => s.chart.plotted)
            .map(s => [s.spec.id, JSON.stringify(s.chart.el.layout.xaxis.range)]);
        }"""
    )
    ids = [i for i, _ in ranges]
    assert "chart-orphans" in ids and "chart-ttft" in ids and "chart-client-load" in ids, ids
    assert len({r for _, r in ranges}) == 1, ranges
    legends = page.evaluate(
        """() => ['chart-sm-kv', 'chart-sm-queue'].map(id => document.getElementById(id))
             .filter(e => e && e.data).flatMap(e => e.data.filter(t => t.showlegend !== false)
             .map(t => t.name))"""
    )
    assert legends and not any(n.startswith("w ") for n in legends), legends
    _shots(browser, context, site.url(f"/runs/{run_id}/"), "report",
           "window.aiperfRun && window.aiperfRun.view.lastSeq >= 0")  # fmt: skip


def test_a_failed_run_shows_its_failure_not_green_badges_or_empty_charts(
    site: Site, context: Any, browser: Any
) -> None:
    from aiperf_web.endpoints.models import Endpoint

    Endpoint.objects.create(team=site.team, name="unreachable", base_url="http://127.0.0.1:9",
                            model="m", server_kind="openai")  # fmt: skip
    page = context.new_page()
    login(page, site)
    page.goto(site.url("/runs/new/"))
    page.select_option("#id_scenario", str(site.scenario.uuid))
    page.select_option("#id_target", label="unreachable — http://127.0.0.1:9")
    page.select_option("#id_affinity", "none")
    page.click("form button.primary")
    page.wait_for_url("**/runs/*/")
    url = page.url
    assert _ended(url) == "failed"
    page.goto(url)
    assert page.locator("#failure").is_visible()
    assert "failed before its first snapshot" in page.locator("#failure").inner_text()
    assert page.locator("#leak").count() == 0 and page.locator(".chart").count() == 0
    assert "no leak" not in page.locator("main").inner_text()
    assert page.locator("#status-reason").inner_text().startswith("cannot reach")
    _shots(browser, context, url, "failed", "!!document.getElementById('failure')")


def test_a_simulated_cluster_that_queued_is_named_and_the_trees_show_over_time(
    site: Site, context: Any, browser: Any
) -> None:
    page = context.new_page()
    login(page, site)
    page.goto(site.url("/runs/new/"))
    page.select_option("#id_scenario", str(site.scenario.uuid))
    page.select_option("#id_target", "simulated")
    page.select_option("#id_policy", "legacy")
    page.fill("#id_duration_s", "30")
    page.click("form button.primary")
    page.wait_for_url("**/runs/*/")
    url = page.url
    assert _ended(url) == "succeeded"
    page.goto(url)
    limit = page.locator("#saturation").inner_text()
    assert "The simulated cluster is the bottleneck" in limit and "virtual time" in limit

    _wait(page, "document.getElementById('timelines').dataset.ready === '1'", 30)
    got = page.evaluate(
        """() => ({
          trees: document.querySelectorAll('#trees .tree').length,
          timelines: document.querySelectorAll('#timelines .timeline').length,
          bars: document.querySelectorAll('#timelines .bars path').length,
          titles: [...document.querySelectorAll('#trees .gtitle')].map(t => t.textContent),
          legend: document.getElementById('trees-legend').textContent,
          clipped: [...document.querySelectorAll('#trees .tree')].flatMap(box => {
            const edge = box.querySelector('.main-svg').getBoundingClientRect().right;
            return [...box.querySelectorAll('.textpoint text')]
              .filter(t => t.getBoundingClientRect().right > edge + 0.5).map(t => t.textContent);
          }),
        })"""
    )
    assert got["trees"] >= 2 and got["timelines"] == got["trees"], got
    assert got["bars"] > got["trees"], got
    assert len(set(got["titles"])) == len(got["titles"]) == got["trees"], got["titles"]
    assert "client worker" in got["legend"] and not got["clipped"], got
    page.click("[data-tree-mode=inference]")
    _wait(page, "document.getElementById('trees-legend').textContent.includes('inference')", 10)
    _shots(browser, context, url, "simulated",
           "document.getElementById('timelines').dataset.ready === '1'")  # fmt: skip
