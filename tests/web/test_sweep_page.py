"""The sweep page (aiperf_web/sweeps/pages.py, page.py, consumers.py): header, headlines,
curves and points from stored point results; its socket refusing strangers and sending the
page again when the driver says a point ended; the offline report; compare and history.

The points are a real simulated sweep's (runner.sweep.run_sweep, about a second), stored as
the sweeps app stores them; the driver that makes them through the worker has its own tests
(S1's), and the browser test drives a whole sweep through a real worker."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from django.utils import timezone

from aiperf_web.asgi import application
from aiperf_web.runs.models import Run, Status
from aiperf_web.sweeps.models import Sweep, SweepPoint, SweepStatus
from aiperf_web.sweeps.publisher import publish_sweep_update
from aiperf_web.sweeps.services import sweeps_stuck
from runner.sweep import SweepReport, parse_sweep, run_sweep
from tests.web.conftest import World
from tests.web.wsclient import WebsocketCommunicator

ORIGIN = (b"origin", b"http://127.0.0.1:8000")


@pytest.fixture(scope="module")
def report() -> SweepReport:
    sweep = parse_sweep(
        {
            "base": {"target": {"kind": "simulated"}, "duration_s": 30, "start_window": [0, 1]},
            "concurrency": [1, 2, 4],
            "arms": [
                {"name": "legacy", "overrides": {"policy": "legacy"}},
                {"name": "spawn-pin", "overrides": {"policy": "spawn-pin"}},
            ],
            "slo": {"ttft_ms": 3000, "goodput_fraction": 0.5},
        }
    )
    return run_sweep(sweep, processes=1)


def _store(world: World, report: SweepReport, *, ended: int, status: str, **kw: Any) -> Sweep:
    sweep = Sweep.objects.create(
        team=world.team,
        scenario=world.scenario,
        scenario_name=world.scenario.name,
        endpoint=None,
        endpoint_name="simulated cluster",
        target_kind="simulated",
        spec=report.sweep.model_dump(mode="json"),
        request={"concurrency": [1, 2, 4]},
        mode="list",
        axis="concurrency",
        status=status,
        started_at=timezone.now(),
        **kw,
    )
    for seq, result in enumerate(report.points):
        _point(sweep, seq, result, ended=seq < ended)
    assert sweep.pk not in sweeps_stuck()  # a live worker's pickup leaves it alone
    return sweep


def _point(sweep: Sweep, seq: int, result: Any, *, ended: bool) -> SweepPoint:
    return SweepPoint.objects.create(
        sweep=sweep,
        seq=seq,
        arm=result.point.arm,
        load=result.point.load,
        repeat=result.point.repeat,
        phase=result.point.phase,
        valid=result.valid if ended else None,
        invalid_reason=result.invalid_reason or "",
        result=result.model_dump(mode="json") if ended else None,
        ended_at=timezone.now() if ended else None,
        run=None if ended else _running(sweep),
    )


def _running(sweep: Sweep) -> Run:
    """A point's run in flight, as the driver makes it: without one, an open point would be
    stuck (sweeps_stuck), and the pickup of any live Celery worker on this database (another
    test's) would move the sweep on under the test. Claimed, with no heartbeat yet: the
    stale-run reaper judges only heartbeats it has seen."""
    return Run.objects.create(
        team=sweep.team,
        scenario=sweep.scenario,
        scenario_name=sweep.scenario_name,
        endpoint_name=sweep.endpoint_name,
        target_kind=sweep.target_kind,
        spec={},
        status=Status.RUNNING,
    )


def _end(sweep: Sweep, seq: int, report: SweepReport) -> None:
    result = report.points[seq]
    SweepPoint.objects.filter(sweep=sweep, seq=seq).update(
        valid=result.valid, result=result.model_dump(mode="json"), ended_at=timezone.now()
    )


def _cookie(client: Client) -> list[tuple[bytes, bytes]]:
    return [ORIGIN, (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())]


def _run(body: Callable[[], Awaitable[None]]) -> None:
    async_to_sync(body)()


def test_the_page_shows_header_headlines_curves_and_a_row_per_point(
    transactional_db: Any, mock_url: str, report: SweepReport
) -> None:
    world = World(mock_url)
    sweep = _store(world, report, ended=len(report.points), status=SweepStatus.SUCCEEDED)
    html = world.client("owner").get(f"/sweeps/{sweep.uuid}/").content.decode()
    assert "alpha-scenario" in html and "simulated cluster" in html
    assert "c=1, c=2, c=4" in html  # the axis
    assert "TTFT ≤ 3000 ms for 50 % of requests" in html
    assert f"{len(report.points)} points run" in html
    for headline in report.headlines:
        assert headline.text.replace("'", "&#x27;") in html
    for chart_id in ("sweep-frontier-tokens", "sweep-ttft", "sweep-orphans", "sweep-root-share"):
        assert f'id="{chart_id}"' in html
    rows = re.findall(r'<tr data-seq="(\d+)" data-ended="1"', html)
    assert len(rows) == len(report.points)
    assert 'id="sweep-data"' in html  # the figures for sweep.js
    # The percentile switch redraws the table's heads and the curves at that percentile.
    p50 = world.client("owner").get(f"/sweeps/{sweep.uuid}/?p=p50").content.decode()
    assert "TTFT p50 ms" in p50 and "TTFT p90 ms" not in p50
    # Another team's sweep is not found, as an unknown one.
    assert world.client("outsider").get(f"/sweeps/{sweep.uuid}/").status_code == 404
    assert world.client("owner").get("/sweeps/not-a-sweep/").status_code == 404


def test_a_running_sweep_says_which_point_and_its_socket_sends_each_ended_point(
    transactional_db: Any, mock_url: str, report: SweepReport
) -> None:
    world = World(mock_url)
    sweep = _store(world, report, ended=2, status=SweepStatus.RUNNING)
    total = len(report.points)
    html = world.client("owner").get(f"/sweeps/{sweep.uuid}/").content.decode()
    assert f"point 3 of {total}" in html
    owner = _cookie(world.client("owner"))
    outsider = _cookie(world.client("outsider"))

    async def body() -> None:
        refused = WebsocketCommunicator(application, f"/ws/sweeps/{sweep.uuid}/", headers=outsider)
        connected, code = await refused.connect()
        assert not connected and code == 4404
        anonymous = WebsocketCommunicator(application, f"/ws/sweeps/{sweep.uuid}/", [ORIGIN])
        connected, code = await anonymous.connect()
        assert not connected and code == 4401

        ws = WebsocketCommunicator(application, f"/ws/sweeps/{sweep.uuid}/?p=p95", headers=owner)
        connected, _ = await ws.connect()
        assert connected
        first = await ws.receive_json_from(timeout=20)
        assert first["type"] == "sweep" and first["runs_ended"] == 2
        assert first["percentile"] == "p95"
        assert 'data-ended="1"' in first["html"]["points"]
        tokens = next(c for c in first["charts"] if c["id"] == "sweep-orphans")
        drawn = sum(len(t["x"]) for t in tokens["figure"]["data"])

        # The driver stores the third point's result and says so.
        await _async(_end)(sweep, 2, report)
        await _async(publish_sweep_update)(sweep.uuid)
        update = await ws.receive_json_from(timeout=20)
        assert update["runs_ended"] == 3
        assert f"point 4 of {total}" in update["html"]["header"]
        orphans = next(c for c in update["charts"] if c["id"] == "sweep-orphans")
        assert sum(len(t["x"]) for t in orphans["figure"]["data"]) == drawn + 1

        # The sweep ends: the socket says so (the page stops listening).
        await _async(Sweep.objects.filter(pk=sweep.pk).update)(status=SweepStatus.SUCCEEDED)
        await _async(publish_sweep_update)(str(sweep.uuid))
        final = await ws.receive_json_from(timeout=20)
        assert final["active"] is False and final["status"] == "succeeded"
        await ws.disconnect()

    _run(body)


def _async(fn: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    from channels.db import database_sync_to_async

    return database_sync_to_async(fn)  # type: ignore[no-any-return]


def test_the_offline_report_holds_every_curve_and_plotly(
    transactional_db: Any, mock_url: str, report: SweepReport
) -> None:
    world = World(mock_url)
    sweep = _store(world, report, ended=len(report.points), status=SweepStatus.SUCCEEDED)
    response = world.client("viewer").get(f"/sweeps/{sweep.uuid}/report.html")
    assert response.status_code == 200
    assert "attachment" in response["Content-Disposition"]
    html = response.content.decode()
    assert "Plotly" in html and "/static/" not in html  # nothing to fetch
    for chart_id in ("sweep-frontier-tokens", "sweep-frontier-requests", "sweep-ttft",
                     "sweep-itl", "sweep-goodput", "sweep-good-share", "sweep-prefix-hit",
                     "sweep-child-hit", "sweep-switches", "sweep-orphans", "sweep-copy-memory",
                     "sweep-trees-split", "sweep-root-share"):  # fmt: skip
        assert f'id="{chart_id}"' in html
    assert world.client("outsider").get(f"/sweeps/{sweep.uuid}/report.html").status_code == 404


def test_compare_and_history_draw_sweeps_curve_against_curve(
    transactional_db: Any, mock_url: str, report: SweepReport
) -> None:
    world = World(mock_url)
    first = _store(world, report, ended=len(report.points), status=SweepStatus.SUCCEEDED)
    second = _store(world, report, ended=4, status=SweepStatus.RUNNING)
    owner = world.client("owner")
    html = owner.get(f"/sweeps/compare/?ids={first.uuid},{second.uuid}").content.decode()
    assert 'id="sweep-cmp-frontier"' in html and 'id="sweep-cmp-orphans"' in html
    assert html.count('data-sweep-id="') == 2
    assert owner.get(f"/sweeps/compare/?ids={first.uuid}").status_code == 404
    # The history page's check boxes send ids=a&ids=b.
    ticked = owner.get(f"/sweeps/compare/?ids={first.uuid}&ids={second.uuid}").content.decode()
    assert ticked.count('data-sweep-id="') == 2
    outsider = world.client("outsider")
    assert outsider.get(f"/sweeps/compare/?ids={first.uuid},{second.uuid}").status_code == 404
    scenario_page = owner.get(f"/scenarios/{world.scenario.uuid}/").content.decode()
    assert f'href="/sweeps/history/{world.scenario.uuid}/"' in scenario_page
    history = owner.get(f"/sweeps/history/{world.scenario.uuid}/").content.decode()
    assert history.count('data-sweep-id="') == 2
    assert "sweep history" in history
    # Newest first: the running one is #1.
    assert history.index(str(second.uuid)) < history.index(str(first.uuid))


REQUEST = {
    "concurrency": [1, 2, 4],
    "arms": [
        {"name": "legacy", "overrides": {"policy": "legacy"}},
        {"name": "spawn-pin", "overrides": {"policy": "spawn-pin"}},
    ],
    "slo": {"ttft_ms": 3000, "goodput_fraction": 0.5},
}


def test_the_simulated_twin_is_launched_from_the_page_and_drawn_dashed(
    transactional_db: Any, mock_url: str, report: SweepReport
) -> None:
    world = World(mock_url)
    live = _store(
        world,
        report,
        ended=len(report.points),
        status=SweepStatus.SUCCEEDED,
    )
    Sweep.objects.filter(pk=live.pk).update(
        target_kind="endpoint",
        endpoint=world.endpoint,
        endpoint_name=world.endpoint.name,
        request=REQUEST,
        overrides={"duration_s": 30},
    )
    page = world.client("owner").get(f"/sweeps/{live.uuid}/").content.decode()
    assert "Run the simulated twin" in page and "\\u00b7 simulated twin" not in page
    # A viewer may look, not launch.
    assert world.client("viewer").post(f"/sweeps/{live.uuid}/twin/").status_code == 403
    response = world.client("teammate").post(f"/sweeps/{live.uuid}/twin/")
    assert response.status_code == 302 and response["Location"] == f"/sweeps/{live.uuid}/"
    twin = Sweep.objects.exclude(pk=live.pk).get()
    assert twin.target_kind == "simulated" and twin.request == REQUEST
    # Its points end (as the worker would store them): drawn dashed beside the live curves.
    results = {(r.point.arm, r.point.load, r.point.repeat): r for r in report.points}
    for point in SweepPoint.objects.filter(sweep=twin):
        result = results[(point.arm, point.load, point.repeat)]
        SweepPoint.objects.filter(pk=point.pk).update(
            valid=True, result=result.model_dump(mode="json"), ended_at=timezone.now()
        )
    page = world.client("owner").get(f"/sweeps/{live.uuid}/").content.decode()
    assert "Run the simulated twin" not in page
    assert f'href="/sweeps/{twin.uuid}/"' in page  # the header links it
    assert "legacy \\u00b7 simulated twin" in page  # its traces, in the figures' JSON
    # The twin's own page has no twin.
    twin_page = world.client("owner").get(f"/sweeps/{twin.uuid}/").content.decode()
    assert "Run the simulated twin" not in twin_page


def test_csv_and_json_exports_from_the_page(
    transactional_db: Any, mock_url: str, report: SweepReport
) -> None:
    world = World(mock_url)
    sweep = _store(world, report, ended=len(report.points), status=SweepStatus.SUCCEEDED)
    viewer = world.client("viewer")
    page = viewer.get(f"/sweeps/{sweep.uuid}/").content.decode()
    assert f'href="/sweeps/{sweep.uuid}/export.csv"' in page
    text = viewer.get(f"/sweeps/{sweep.uuid}/export.csv").content.decode()
    lines = text.strip().splitlines()
    assert lines[0].startswith("arm,load,label,")
    assert len(lines) == 1 + len(report.aggregates)
    body = viewer.get(f"/sweeps/{sweep.uuid}/export.json").json()
    assert len(body["points"]) == len(report.points)
    assert body["frontiers"].keys() == report.frontiers.keys()
    assert viewer.get(f"/sweeps/{sweep.uuid}/export.xml").status_code == 404
    assert world.client("outsider").get(f"/sweeps/{sweep.uuid}/export.csv").status_code == 404


def test_the_sweep_socket_closes_when_the_viewers_membership_is_revoked(
    transactional_db: Any, mock_url: str, report: SweepReport, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aiperf_web.sweeps import consumers
    from aiperf_web.teams.models import Membership

    monkeypatch.setattr(consumers, "ACCESS_CHECK_S", 0.5)
    world = World(mock_url)
    sweep = _store(world, report, ended=1, status=SweepStatus.RUNNING)
    teammate = _cookie(world.client("teammate"))

    async def body() -> None:
        ws = WebsocketCommunicator(application, f"/ws/sweeps/{sweep.uuid}/", headers=teammate)
        connected, _ = await ws.connect()
        assert connected
        assert (await ws.receive_json_from(timeout=20))["type"] == "sweep"
        await _async(Membership.objects.filter(user=world.teammate, team=world.team).delete)()
        while True:  # a re-read may still be under way: then its message, then the close
            out = await ws.receive_output(timeout=10)
            if out["type"] == "websocket.close":
                assert out["code"] == 1008
                break
        await ws.disconnect()

    _run(body)


def test_the_drivers_announcement_reaches_the_page_socket(
    transactional_db: Any, mock_url: str, report: SweepReport, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sweeps.signals.sweep_changed (sent by the driver after each stored change) is what
    nudges the page's sockets: SweepsConfig.ready connects publisher.on_sweep_changed."""
    from aiperf_web.sweeps import consumers
    from aiperf_web.sweeps.signals import sweep_changed

    monkeypatch.setattr(consumers, "RECHECK_S", 3600.0)  # only a nudge can bring the update

    world = World(mock_url)
    sweep = _store(world, report, ended=1, status=SweepStatus.RUNNING)
    owner = _cookie(world.client("owner"))

    async def body() -> None:
        ws = WebsocketCommunicator(application, f"/ws/sweeps/{sweep.uuid}/", headers=owner)
        connected, _ = await ws.connect()
        assert connected
        assert (await ws.receive_json_from(timeout=20))["runs_ended"] == 1
        await _async(_end)(sweep, 1, report)
        await _async(sweep_changed.send)(sender=Sweep, sweep_uuid=str(sweep.uuid))
        update = await ws.receive_json_from(timeout=20)
        assert update["runs_ended"] == 2
        await ws.disconnect()

    _run(body)
