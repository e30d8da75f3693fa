"""Sweeps in the service (issue 20): launched through the API, each point a normal run made by
the driver (sweeps/services.py) and executed by the real worker; arms interleave; cancel and
re-run as a whole; the team's own only; exports; refusals naming the field."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest

from aiperf_web.runs.models import Run
from aiperf_web.sweeps.models import Sweep, SweepPoint
from runner.sweep import Point, parse_sweep
from tests.web.conftest import World


def _launch(world: World, persona: str = "teammate", **body: Any) -> Any:
    return world.api(persona).post("/api/v1/sweeps", body, content_type="application/json")


def _final(sweep_id: str, wait_for: Any, timeout_s: float = 180) -> Sweep:
    def ended() -> Sweep | None:
        sweep = Sweep.objects.get(uuid=sweep_id)
        return sweep if sweep.status in ("succeeded", "failed", "cancelled") else None

    found: Sweep = wait_for(ended, timeout_s=timeout_s, every_s=0.3)
    return found


# Two arms on the simulated cluster: short points in virtual time.
_SIMULATED = {
    "concurrency": [1, 2],
    "arms": [
        {"name": "legacy", "overrides": {"policy": "legacy"}},
        {"name": "spawn-pin", "overrides": {"policy": "spawn-pin"}},
    ],
}


def test_a_sweep_launched_through_the_api_makes_a_run_per_point_arms_interleaved(
    live_world: World, wait_for: Any
) -> None:
    world = live_world
    response = _launch(
        world,
        scenario=str(world.scenario.uuid),
        endpoint="simulated",
        overrides={"duration_s": 20},
        sweep=_SIMULATED,
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["mode"] == "list" and body["axis"] == "concurrency"
    assert body["target_kind"] == "simulated" and body["loads"] == [1.0, 2.0]
    sweep = _final(body["id"], wait_for)
    assert (sweep.status, sweep.verdict) == ("succeeded", "pass"), sweep.verdict_message
    points = list(SweepPoint.objects.filter(sweep=sweep).select_related("run").order_by("seq"))
    # A1 B1 A2 B2: arms interleave load by load.
    assert [(p.arm, p.load) for p in points] == [
        ("legacy", 1.0),
        ("spawn-pin", 1.0),
        ("legacy", 2.0),
        ("spawn-pin", 2.0),
    ]
    spec = parse_sweep(sweep.spec)
    for point in points:
        run = point.run
        assert run is not None and run.status == "succeeded" and run.team_id == sweep.team_id
        assert point.valid is True and point.result is not None
        # The run's spec is the engine's own definition of the point.
        expected = spec.spec_for(Point(arm=point.arm, load=point.load, repeat=point.repeat))
        assert run.spec == expected.model_dump(mode="json")
        # Its page links back to the sweep.
        page = world.client("teammate").get(f"/runs/{run.uuid}/")
        assert f"/sweeps/{sweep.uuid}/" in page.content.decode()
    assert len(sweep.headlines) == 1 and "legacy" in sweep.headlines[0]

    detail = world.api("viewer").get(f"/api/v1/sweeps/{sweep.uuid}").json()
    assert detail["status"] == "succeeded" and detail["runs"] == 4 and detail["runs_ended"] == 4
    assert [p["run_id"] for p in detail["points"]] == [str(p.run.uuid) for p in points if p.run]
    assert {row["arm"] for row in detail["report"]["aggregates"]} == {"legacy", "spawn-pin"}
    assert set(detail["report"]["frontiers"]) == {"legacy", "spawn-pin"}
    listed = world.api("viewer").get("/api/v1/sweeps").json()
    assert [item["id"] for item in listed["items"]] == [str(sweep.uuid)]

    exported = world.api("viewer").get(f"/api/v1/sweeps/{sweep.uuid}/export?format=csv")
    assert exported.status_code == 200 and exported["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(exported.content.decode())))
    assert [(r["arm"], r["load"]) for r in rows] == [
        ("legacy", "1.0"),
        ("legacy", "2.0"),
        ("spawn-pin", "1.0"),
        ("spawn-pin", "2.0"),
    ]
    assert all(r["valid"] == "True" and r["requests_per_s"] for r in rows)
    as_json = world.api("viewer").get(f"/api/v1/sweeps/{sweep.uuid}/export?format=json")
    assert as_json.status_code == 200 and len(as_json.json()["points"]) == 4

    # Re-run: a new sweep asking for the same.
    rerun = world.api("teammate").post(f"/api/v1/sweeps/{sweep.uuid}/rerun")
    assert rerun.status_code == 201, rerun.content
    again = _final(rerun.json()["id"], wait_for)
    assert again.rerun_of_id == sweep.pk and again.request == sweep.request
    assert again.overrides == sweep.overrides and again.status == "succeeded"
    assert again.points.count() == 4


def test_cancel_ends_the_sweep_and_its_queued_and_running_point_runs(
    live_world: World, wait_for: Any
) -> None:
    world = live_world
    response = _launch(
        world,
        scenario=str(world.scenario.uuid),
        endpoint=str(world.endpoint.uuid),
        # Long live points: the sweep is cancelled during its first.
        overrides={"duration_s": 60, "speedup": 1},
        sweep={"concurrency": [1, 2, 4], "arms": _SIMULATED["arms"]},
    )
    assert response.status_code == 201, response.content
    sweep_id = response.json()["id"]

    def first_running() -> Run | None:
        return Run.objects.filter(sweep_point__sweep__uuid=sweep_id, status="running").first()

    wait_for(first_running, timeout_s=60)
    # Live: one point at a time.
    assert SweepPoint.objects.filter(sweep__uuid=sweep_id).count() == 1
    cancelled = world.api("teammate").post(f"/api/v1/sweeps/{sweep_id}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert cancelled.json()["cancel_requested"] is True

    def point_stored() -> bool:
        return SweepPoint.objects.filter(sweep__uuid=sweep_id, result__isnull=False).count() == 1

    wait_for(point_stored, timeout_s=60)
    (point,) = SweepPoint.objects.filter(sweep__uuid=sweep_id).select_related("run")
    assert point.run is not None and point.run.status == "cancelled"
    assert point.valid is False and "cancelled" in point.invalid_reason
    sweep = Sweep.objects.get(uuid=sweep_id)
    assert sweep.status == "cancelled" and sweep.verdict == ""
    # Cancelled: no point is made after it, and a second cancel changes nothing.
    assert world.api("teammate").post(f"/api/v1/sweeps/{sweep_id}/cancel").status_code == 200
    assert SweepPoint.objects.filter(sweep__uuid=sweep_id).count() == 1


def test_refusals_name_the_field_and_other_teams_sweeps_do_not_exist(world: World) -> None:
    base = {"scenario": str(world.scenario.uuid), "endpoint": "simulated"}
    cases: list[tuple[dict[str, Any], str]] = [
        ({"sweep": {"arms": [{"name": "a"}]}}, "sweep"),  # no load axis
        ({"sweep": {"concurrency": [1, 1]}}, "sweep.concurrency"),
        ({"sweep": {"concurrency": [0]}}, "sweep.concurrency.0"),
        (
            {"sweep": {"concurrency": [1], "arms": [{"name": "a", "overrides": {"seed": 3}}]}},
            "sweep.arms",
        ),
        ({"sweep": {"concurrency": [1], "mode": "slo"}}, "sweep"),
        ({"sweep": {"concurrency": [1], "base": {}}}, "sweep.base"),
        ({"sweep": {"concurrency": [1]}, "overrides": {"duration_s": -1}}, "overrides.duration_s"),
        ({"sweep": {"concurrency": [1]}, "overrides": {"workload": {}}}, "overrides.workload"),
    ]
    for extra, field in cases:
        response = _launch(world, **{**base, **extra})
        assert response.status_code == 422, (extra, response.content)
        assert field in [e["field"] for e in response.json()["errors"]], (extra, response.json())
    assert Sweep.objects.count() == 0
    # A viewer may not launch; an outsider does not see the scenario.
    assert _launch(world, "viewer", **base, sweep={"concurrency": [1]}).status_code == 403
    assert _launch(world, "outsider", **base, sweep={"concurrency": [1]}).status_code == 404

    sweep = Sweep.objects.create(
        team=world.team,
        scenario=world.scenario,
        scenario_name=world.scenario.name,
        endpoint_name="simulated cluster",
        target_kind="simulated",
        spec=parse_sweep(
            {"base": {"target": {"kind": "simulated"}}, "concurrency": [1]}
        ).model_dump(mode="json"),
        mode="list",
        axis="concurrency",
        status="succeeded",
    )
    outsider = world.api("outsider")
    for method, path in (
        ("get", f"/api/v1/sweeps/{sweep.uuid}"),
        ("get", f"/api/v1/sweeps/{sweep.uuid}/export?format=csv"),
        ("post", f"/api/v1/sweeps/{sweep.uuid}/cancel"),
        ("post", f"/api/v1/sweeps/{sweep.uuid}/rerun"),
        ("get", "/api/v1/sweeps/not-an-id"),
    ):
        assert getattr(outsider, method)(path).status_code == 404, path
    assert outsider.get("/api/v1/sweeps").json()["items"] == []
    assert world.api("viewer").post(f"/api/v1/sweeps/{sweep.uuid}/rerun").status_code == 403
    assert world.api("anonymous").get("/api/v1/sweeps").status_code == 401
    assert world.client("outsider").get(f"/sweeps/{sweep.uuid}/").status_code == 404
    # Its scenario deleted: a re-run conflicts with the stored state (409, as a run's re-run).
    Sweep.objects.filter(pk=sweep.pk).update(scenario=None)
    gone = world.api("teammate").post(f"/api/v1/sweeps/{sweep.uuid}/rerun")
    assert gone.status_code == 409, gone.content
    assert [e["field"] for e in gone.json()["errors"]] == ["scenario"]


@pytest.mark.shape_independent  # reads the published schema only
def test_the_openapi_declares_every_sweep_operation_and_its_answers(world: World) -> None:
    schema = world.api("viewer").get("/api/v1/openapi.json").json()
    paths = schema["paths"]
    expected = {
        ("/api/v1/sweeps", "get"): {"200", "401", "404", "422"},
        ("/api/v1/sweeps", "post"): {"201", "401", "403", "404", "422", "429"},
        ("/api/v1/sweeps/{sweep_id}", "get"): {"200", "401", "404", "422"},
        ("/api/v1/sweeps/{sweep_id}/cancel", "post"): {"200", "401", "403", "404", "422"},
        ("/api/v1/sweeps/{sweep_id}/rerun", "post"): {
            *("201", "401", "403", "404", "409", "422", "429")
        },
        ("/api/v1/sweeps/{sweep_id}/export", "get"): {"200", "401", "404", "422"},
    }
    for (path, method), codes in expected.items():
        assert codes <= set(paths[path][method]["responses"]), (path, method)


def test_the_simulated_twin_queues_a_whole_batch_at_once_5_points_by_2_arms(
    live_world: World, wait_for: Any
) -> None:
    world = live_world
    response = _launch(
        world,
        scenario=str(world.scenario.uuid),
        endpoint="simulated",
        # A snapshot every 10 s of run time (the scenario stores one every 0.5 s: 1,200 a point).
        overrides={"duration_s": 600, "start_window": [0, 1], "snapshot_interval_s": 10},
        sweep={"concurrency": [1, 2, 4, 8, 16], "arms": _SIMULATED["arms"]},
    )
    assert response.status_code == 201, response.content
    sweep = _final(response.json()["id"], wait_for, timeout_s=300)
    assert sweep.status == "succeeded", sweep.verdict_message
    points = list(sweep.points.select_related("run").order_by("seq"))
    assert len(points) == 10
    # One batch (mode list): every point's run was made before the first of them ended, so
    # the worker's slots ran them side by side.
    first_end = min(p.run.finished_at for p in points if p.run and p.run.finished_at)
    assert all(p.created_at <= first_end for p in points)
    assert sweep.started_at is not None and sweep.finished_at is not None
    wall_s = (sweep.finished_at - sweep.started_at).total_seconds()
    # Measured, not asserted (the machine is shared): issue 20 asks under a minute on 2 cores.
    print(f"simulated twin, 5 points x 2 arms through the service: {wall_s:.1f} s")


def test_a_point_run_ended_without_the_signal_is_picked_up_at_the_next_runs_end(
    world: World,
) -> None:
    """A point run cancelled while queued from its own page (or failed by the reaper) ends
    without the worker's run_ended: the next run that ends, any run, moves its sweep on."""
    from aiperf_web.runs.services import run_cancel
    from aiperf_web.sweeps.services import sweep_advance, sweep_on_run_ended, sweeps_stuck

    response = _launch(
        world,
        scenario=str(world.scenario.uuid),
        endpoint="simulated",
        sweep={"concurrency": [1, 2], "arms": _SIMULATED["arms"]},
    )
    assert response.status_code == 201, response.content
    sweep = Sweep.objects.get(uuid=response.json()["id"])
    sweep_advance(sweep.pk)  # what the launch's commit does (the test's transaction never commits)
    made = list(sweep.points.select_related("run").order_by("seq"))
    assert len(made) == 4 and all(p.run is not None for p in made)  # list: one batch
    first = made[0].run
    assert first is not None
    run_cancel(actor=world.teammate, run_obj=first)  # from the run's page: no signal
    assert sweeps_stuck() == [sweep.pk]
    sweep_on_run_ended(Run, run_obj=world.run)  # some other run of the team ends
    assert sweeps_stuck() == []
    point = SweepPoint.objects.get(pk=made[0].pk)
    assert point.valid is False and point.invalid_reason == "cancelled before its end"
    assert Sweep.objects.get(pk=sweep.pk).status == "running"


def test_the_sweep_end_webhook_posts_the_verdict_and_headlines(world: World) -> None:
    """At its end a sweep POSTs `sweep.ended` to its scenario's and team's webhook URLs."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from aiperf_web.sweeps.services import sweep_webhooks_send
    from aiperf_web.teams.services import team_webhook_set

    seen: list[tuple[str, dict[str, str], bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        team_webhook_set(actor=world.owner, team=world.team, url=url)
        sweep = Sweep.objects.create(
            team=world.team,
            scenario=world.scenario,
            scenario_name=world.scenario.name,
            endpoint_name="simulated cluster",
            target_kind="simulated",
            spec=parse_sweep(
                {"base": {"target": {"kind": "simulated"}}, "concurrency": [1]}
            ).model_dump(mode="json"),
            mode="list",
            axis="concurrency",
            status="succeeded",
            verdict="pass",
            verdict_message="1 points, every one valid",
            headlines=["a beats b"],
        )
        assert sweep_webhooks_send(sweep.pk) == 1
    finally:
        server.shutdown()
        server.server_close()
    ((path, headers, raw),) = seen
    body = json.loads(raw)
    assert path == "/hook" and headers["content-type"] == "application/json"
    assert (body["event"], body["sweep_id"], body["status"]) == (
        "sweep.ended",
        str(sweep.uuid),
        "succeeded",
    )
    assert body["verdict"] == "pass" and body["headlines"] == ["a beats b"]
    assert body["links"]["sweep"].endswith(f"/sweeps/{sweep.uuid}/")
    assert body["links"]["csv"].endswith(f"/api/v1/sweeps/{sweep.uuid}/export?format=csv")


def test_the_launch_form_and_the_list_pages(world: World) -> None:
    member = world.client("teammate")
    page = member.get("/sweeps/new/")
    assert page.status_code == 200 and "Launch a sweep" in page.content.decode()
    assert world.client("viewer").get("/sweeps/new/").status_code == 302
    form = {
        "scenario": str(world.scenario.uuid),
        "target": "simulated",
        "axis": "concurrency",
        "loads": "1, 2, 4",
        "mode": "list",
        "preset": "legacy-vs-spawn-pin",
        "repeats": "2",
        "overrides": '{"duration_s": 30}',
    }
    bad = member.post("/sweeps/new/", {**form, "loads": "1, 1"})
    assert bad.status_code == 200 and "a load appears twice" in bad.content.decode()
    assert member.post("/sweeps/new/", {**form, "loads": "one"}).status_code == 200
    assert Sweep.objects.count() == 0
    done = member.post("/sweeps/new/", form)
    sweep = Sweep.objects.get()
    assert done.status_code == 302 and done["Location"] == f"/sweeps/{sweep.uuid}/"
    spec = parse_sweep(sweep.spec)
    assert spec.loads == (1.0, 2.0, 4.0) and spec.repeats == 2
    assert [arm.name for arm in spec.arms] == ["legacy", "spawn-pin"]
    assert sweep.overrides == {"duration_s": 30} and spec.base.duration_s == 30
    listed = world.client("viewer").get("/sweeps/").content.decode()
    assert f"/sweeps/{sweep.uuid}/" in listed and "alpha-scenario" in listed
    assert str(sweep.uuid) not in world.client("outsider").get("/sweeps/").content.decode()
