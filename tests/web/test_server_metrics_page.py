"""The run page's Server metrics card: the summary's figures in the report, each scrape once
in the stored history the live charts are drawn from, and why a run has none."""

from __future__ import annotations

import json
from typing import Any

from aiperf_web.live.selectors import run_history
from aiperf_web.runs.models import Run, RunSample, Status
from tests.web.conftest import World


def _run(world: World, *, summary: dict[str, Any] | None, target: dict[str, Any]) -> Run:
    """A finished run (with a summary) or a running one (without). A finished run gets the one
    snapshot every run that answered has: the page draws its cards from snapshots."""
    run = Run.objects.create(
        team=world.team, scenario=world.scenario, scenario_name=world.scenario.name,
        endpoint=world.endpoint, endpoint_name=world.endpoint.name, target_kind="endpoint",
        spec={**world.scenario.spec, "target": target, "duration_s": 10},
        status=Status.SUCCEEDED if summary else Status.RUNNING, summary=summary,
    )  # fmt: skip
    if summary:
        RunSample.objects.create(run=run, seq=0, t_s=1.0, data={"t_s": 1.0, "recent": []})
    return run


def _view(t_s: float, kv: list[float]) -> dict[str, Any]:
    return {
        "available": True, "kind": "vllm", "t_s": t_s,
        "figures": {"kv_usage": sum(kv) / len(kv), "queue_depth": 3, "running": 9},
        "workers": {"ids": [str(i) for i in range(len(kv))], "kv_usage": kv,
                    "queue_depth": [1, 2], "running": [4, 5]},
        "workers_total": len(kv),
    }  # fmt: skip


SUMMARY = {
    "requests": 50,
    "server_metrics": {
        "available": True, "kind": "vllm", "url": "http://127.0.0.1:8100/metrics",
        "interval_s": 2.0, "scrapes": 6, "failures": 1,
        "figures": {
            "kv_usage": {"min": 0.1, "mean": 0.25, "max": 0.5, "last": 0.2},
            "queue_depth": {"min": 0, "mean": 1.5, "max": 4, "last": 0},
            "requests_total": {"min": 0, "mean": 20, "max": 50, "last": 50},
        },
        "workers": {"ids": ["0", "1"], "kv_usage": [0.1, 0.3], "kv_usage_mean": [0.2, 0.3],
                    "requests_total": [20, 30]},
        "series": {"t_s": [0, 2, 4], "kv_usage": [0.1, 0.5, 0.2]},
    },
}  # fmt: skip


def test_the_report_lists_the_servers_figures_and_keeps_its_series_out_of_all_figures(
    world: World,
) -> None:
    target = {"kind": "endpoint", "url": world.endpoint.base_url, "model": "m"}
    run = _run(world, summary=SUMMARY, target=target)
    html = world.client("owner").get(f"/runs/{run.uuid}/").content.decode()
    card = html.split('id="server-metrics"')[1].split("</section>")[0]
    assert "vllm" in card and "http://127.0.0.1:8100/metrics" in card and "6 scrapes" in card
    assert "1 failed" in card
    table = html.split('id="sm-summary"')[1].split("</details>")[0]
    assert "KV-cache use, % (mean of workers)" in table
    assert ">25<" in table and ">50<" in table  # mean 0.25 as 25 %, 50 requests served
    assert "server_metrics.series" not in html  # not dumped into "All figures"


def test_the_history_carries_each_scrape_once_and_only_the_charted_worker_arrays(
    world: World,
) -> None:
    target = {"kind": "endpoint", "url": world.endpoint.base_url, "model": "m"}
    run = _run(world, summary=None, target=target)
    # Snapshots every second, a scrape every two: each scrape is in two snapshots.
    for seq in range(4):
        view = _view(float(seq - seq % 2), [0.1 * seq, 0.2])
        RunSample.objects.create(run=run, seq=seq, t_s=float(seq), data={
            "t_s": float(seq), "recent": [], "server_metrics": view})  # fmt: skip
    history = run_history(run_obj=run)
    carried = [s["data"].get("server_metrics") for s in history["samples"]]
    assert [v["t_s"] if v else None for v in carried] == [0.0, None, 2.0, None]
    assert set(carried[0]["workers"]) == {"ids", "kv_usage", "queue_depth"}
    assert history["latest"]["data"]["server_metrics"]["workers"]["running"] == [4, 5]
    page = world.client("owner").get(f"/runs/{run.uuid}/").content.decode()
    assert f"Scraping <code>{world.endpoint.base_url}/metrics</code> every 2 s" in page


def test_a_run_says_why_it_has_no_server_metrics(world: World) -> None:
    target = {"kind": "endpoint", "url": world.endpoint.base_url, "model": "m"}
    reason = "GET http://x/metrics: HTTP 404, the server has no metrics page"
    unavailable = {"available": False, "reason": reason, "url": "http://x/metrics"}
    run = _run(world, summary={"requests": 5, "server_metrics": unavailable}, target=target)
    html = world.client("owner").get(f"/runs/{run.uuid}/").content.decode()
    assert "<b>Unavailable</b>: " + reason in html
    off = _run(world, summary={"requests": 5}, target={**target, "metrics_url": "off"})
    assert (
        "Not scraped: metrics_url is off"
        in world.client("owner").get(f"/runs/{off.uuid}/").content.decode()
    )
    simulated = _run(world, summary={"requests": 5}, target={"kind": "simulated"})
    page = world.client("owner").get(f"/runs/{simulated.uuid}/").content.decode()
    assert "A simulated run: the engine scrapes live endpoints only." in page
    data = json.loads(page.split('id="run-data" type="application/json">')[1].split("</script>")[0])
    assert all("server_metrics" not in s["data"] for s in data["history"]["samples"])
