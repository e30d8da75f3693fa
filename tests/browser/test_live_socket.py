"""The run page's socket in a real browser against the production configuration: a viewer whose
membership is revoked is closed with the code runs/messages.py declares final, and the page
stops (says so, opens no second socket); a run with nothing measured says so, in no green."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from django.utils import timezone

from aiperf_web.runs.models import Run, Status
from aiperf_web.teams.models import Membership
from tests.browser.conftest import VIEWER_PASSWORD, Site, login


def _unmeasured_run(site: Site) -> Run:
    """Running as far as the database says, with no sample yet and a heartbeat the reaper
    leaves alone for the test's length (no worker runs it)."""
    now = timezone.now()
    return Run.objects.create(
        team=site.team, scenario=site.scenario, scenario_name=site.scenario.name,
        endpoint=site.endpoint, endpoint_name=site.endpoint.name, target_kind="endpoint",
        spec=site.scenario.spec, status=Status.RUNNING, started_at=now,
        heartbeat_at=now + timedelta(hours=1),
    )  # fmt: skip


def test_a_revoked_viewer_is_refused_for_good_and_nothing_measured_is_not_green(
    site: Site, context: Any
) -> None:
    run = _unmeasured_run(site)
    try:
        page = context.new_page()
        sockets: list[str] = []
        page.on("websocket", lambda ws: sockets.append(ws.url) if str(run.uuid) in ws.url else None)
        login(page, site, "viewer", VIEWER_PASSWORD)
        page.goto(site.url(f"/runs/{run.uuid}/"))
        page.wait_for_function(
            "() => document.getElementById('live-state').textContent === 'live'", timeout=20_000
        )
        # The history the socket sent has no client-worker figure: no verdict, no green.
        badge = page.locator("#leak-badge")
        assert badge.inner_text() == "nothing measured yet"
        classes = (page.locator("#leak").get_attribute("class") or "").split()
        assert "leak-unmeasured" in classes and "leak-ok" not in classes

        Membership.objects.filter(team=site.team, user=site.viewer).delete()
        page.wait_for_function(
            "() => document.getElementById('live-state').textContent === 'live updates refused'",
            timeout=20_000,
        )
        # Final: no reconnect (its backoff's first try would come within about 1.25 s; the old
        # page reconnected once on 1008 and only stopped at the 4404 that second socket got).
        time.sleep(4)
        assert page.locator("#live-state").inner_text() == "live updates refused"
        assert len(sockets) == 1, sockets
    finally:
        Run.objects.filter(pk=run.pk).update(status=Status.CANCELLED, finished_at=timezone.now())
