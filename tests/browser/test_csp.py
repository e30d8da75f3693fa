"""The pages under their Content-Security-Policy (core/headers.py): a live run, its report,
the runs list, the launch form and the API docs load with no policy violation and no script
error in real Chromium."""

from __future__ import annotations

import re
from typing import Any

from tests.browser.conftest import Site, login


def test_the_pages_run_under_their_content_security_policy(site: Site, context: Any) -> None:
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
    page.on(
        "console",
        lambda m: (
            problems.append(f"console: {m.text}")
            if "Content Security Policy" in m.text or "Refused to" in m.text
            else None
        ),
    )
    login(page, site)
    response = page.goto(site.url("/runs/new/"))
    assert response is not None and "script-src 'self'" in response.headers.get(
        "content-security-policy", ""
    )
    page.select_option("#id_scenario", str(site.scenario.uuid))
    page.select_option("#id_target", str(site.endpoint.uuid))
    page.fill("#id_duration_s", "6")
    page.click("form button.primary")
    page.wait_for_url(re.compile(r".*/runs/[0-9a-f-]{36}/$"))
    # The live socket (connect-src) and plotly (script-src, its inline styles) both work.
    page.wait_for_function(
        "() => window.aiperfRun && window.aiperfRun.view.lastSeq >= 1", timeout=45000
    )
    page.locator("#chart-ttft").scroll_into_view_if_needed()
    page.wait_for_function(
        "() => document.getElementById('chart-ttft').data !== undefined", timeout=20000
    )
    run_url = page.url
    for path in ("/runs/", "/api/v1/docs"):
        page.goto(site.url(path))
        page.wait_for_load_state("networkidle")
    page.goto(run_url)
    page.wait_for_load_state("networkidle")
    assert problems == []
