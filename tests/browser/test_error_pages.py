"""Error pages in the site's dress (issue 27 item 3), in a real browser: an unknown path, and a
run id that is no run, at a laptop's and a phone's width, light and dark, show the site's
navigation whole on screen, what was not found, and a way back that works."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser.conftest import Site, login

NAV = ["Runs", "Launch", "Sweeps", "Scenarios", "Traces", "Endpoints", "Team"]


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize(("width", "height"), [(1366, 768), (390, 844)])
def test_an_unknown_path_shows_the_navigation_and_leads_back(
    site: Site, browser: Any, width: int, height: int, scheme: str
) -> None:
    ctx = browser.new_context(viewport={"width": width, "height": height}, color_scheme=scheme)
    errors: list[str] = []
    ctx.on("weberror", lambda e: errors.append(str(e.error)))
    page = ctx.new_page()
    login(page, site)
    for path, heading in (
        ("/no/such/page/", "Page not found"),
        ("/runs/not-a-run/", "Run not found"),
    ):
        response = page.goto(site.url(path))
        assert response is not None and response.status == 404, path
        nav = page.locator("header.top nav")
        assert nav.is_visible(), path
        assert nav.locator("a").all_inner_texts() == NAV, path
        for link in nav.locator("a").all():
            box = link.bounding_box()
            # Each link wholly on screen: the phone's header wraps, it does not clip.
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, path
        assert page.locator("#error-page h1").inner_text() == heading
        assert path in page.locator(".error-path").inner_text()
        if scheme == "dark":
            # The page follows the browser's dark mode like the rest of the site.
            background = page.locator("#error-page").evaluate(
                "el => getComputedStyle(el).backgroundColor"
            )
            assert background == "rgb(23, 28, 38)", background
    page.locator("#error-back").click()
    page.wait_for_url(site.url("/runs/"))
    assert page.locator("h1").first.inner_text().startswith("Runs")
    assert errors == []
    ctx.close()
