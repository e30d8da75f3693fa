"""Runs whose client workers are processes, through the service (runs/fleet.py): the run's
task orchestrates, each client worker is a `fleet.host` task on real `celery -A aiperf_web
worker -Q hosts` processes, over real Redis, against the real mock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiperf_web.runs.models import Run, RunSample
from tests.web.conftest import World, final_run


def test_a_run_with_client_worker_processes_runs_each_worker_in_a_host_process(
    live_world: World, hosts_worker: str, wait_for: Callable[..., Any]
) -> None:
    run_id = live_world.launch_fleet_run(duration_s=4, concurrency=3)
    run = final_run(run_id, wait_for)
    assert run.status == "succeeded", run.reason
    summary = run.summary
    fleet = summary["fleet"]
    hosts = fleet["hosts"]
    assert [h["worker"] for h in hosts] == [0, 1, 2]
    # Three processes of the hosts worker, none of them the run's own.
    assert len({h["host"] for h in hosts}) == 3
    assert all(h["rss_bytes"] > 0 and h["lost_at_s"] is None for h in hosts)
    assert summary["requests"] > 0 and summary["errors"] == 0
    assert fleet["credits"] == fleet["results"] >= summary["requests"]
    assert fleet["lost"] == []
    # The live page's snapshots carry the hosts too.
    last = RunSample.objects.filter(run=run).order_by("-seq").first()
    assert last is not None and len(last.data["hosts"]) == 3
    log = "\n".join(run.log_lines.values_list("message", flat=True))
    assert "3 client workers in 3 host processes answering" in log


def test_client_worker_processes_are_refused_where_there_is_no_redis(
    world: World, settings: Any
) -> None:
    settings.AIPERF_FLEET_REDIS_URL = ""
    response = world.api("teammate").post(
        "/api/v1/runs",
        {
            "scenario": str(world.scenario.uuid),
            "endpoint": str(world.endpoint.uuid),
            "overrides": {"client_worker_processes": True},
        },
        content_type="application/json",
    )
    assert response.status_code == 422, response.content
    assert "needs Redis" in response.content.decode()
    assert not Run.objects.filter(scenario=world.scenario, status="queued").exists()


def test_client_workers_per_host_places_workers_in_fewer_host_tasks(
    live_world: World, hosts_worker: str, wait_for: Callable[..., Any]
) -> None:
    """4 client workers, 2 per host, through the API: two `fleet.host` tasks on the hosts
    worker, each process serving two workers (each with its own stream and heartbeat)."""
    run_id = live_world.launch_fleet_run(
        client_workers=4, client_workers_per_host=2, duration_s=4, concurrency=4
    )
    run = final_run(run_id, wait_for)
    assert run.status == "succeeded", run.reason
    assert run.spec["client_workers_per_host"] == 2
    hosts = run.summary["fleet"]["hosts"]
    assert [h["worker"] for h in hosts] == [0, 1, 2, 3]
    assert len({h["host"] for h in hosts}) == 2
    assert hosts[0]["host"] == hosts[1]["host"] != hosts[2]["host"] == hosts[3]["host"]
    assert all(h["rss_bytes"] > 0 and h["lost_at_s"] is None for h in hosts)
    log = "\n".join(run.log_lines.values_list("message", flat=True))
    assert "4 client workers in 2 host processes answering" in log
