"""Reports: the leak monitor's verdicts, the run report and its exports from the database, the
agent trees, compare and the regression verdict (pages and API), the paired A/B launch run for
real by the worker, the scenario history, the runs list filters."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from aiperf_web.reports.models import ABPair
from aiperf_web.reports.selectors.trees import trees_build
from aiperf_web.runs.leaks import (
    MIB,
    WINDOW_S,
    HostPoint,
    LeakPoint,
    LeakVerdict,
    leak_assess,
    leak_brief,
    leak_point,
)
from aiperf_web.runs.models import Run, RunSample, Status
from aiperf_web.runs.sink import records_insert
from aiperf_web.stack.demo import demo_bootstrap
from tests.web.conftest import World

FINAL = {"succeeded", "failed", "cancelled"}


# -- the leak monitor (pure) ---------------------------------------------------------------------


def _points(orphans_by_t: list[list[int]], step_s: float = 10.0) -> list[LeakPoint]:
    return [
        LeakPoint(t_s=i * step_s, orphans=o, copies=[5] * len(o), cached_bytes=[100] * len(o))
        for i, o in enumerate(orphans_by_t)
    ]


def test_growing_orphans_name_the_workers_the_rate_and_since_when() -> None:
    verdict = leak_assess(_points([[0, 0, 0], [0, 1, 0], [0, 3, 1], [0, 6, 2]]))
    assert verdict["level"] == "growing"
    assert verdict["growing_workers"] == [1, 2] and verdict["leaking_workers"] == [1, 2]
    assert verdict["since_t_s"] == 10.0
    assert verdict["orphans_per_min"] == pytest.approx(8 * 60 / 30)
    assert "workers 1, 2" in verdict["message"] and "+16 per minute" in verdict["message"]


def test_orphans_that_stopped_growing_are_still_a_leak() -> None:
    verdict = leak_assess(_points([[0, 2]] + [[1, 4]] * 10))
    assert verdict["level"] == "leak" and verdict["growing_workers"] == []
    assert verdict["orphaned"] == 5 and "not growing" in verdict["message"]


def test_orphans_that_grew_then_stayed_flat_read_stable_once_the_window_has_passed() -> None:
    # One snapshot a second: orphans grow for 20 s, then stay at 20. The badge said "leak
    # growing" for a minute after (issue 16); the rate is over the last WINDOW_S = 30 s.
    series = [
        LeakPoint(t_s=float(t), orphans=[0, min(t, 20)], copies=[5, 5], cached_bytes=[0, 0])
        for t in range(0, 121)
    ]
    assert WINDOW_S == 30.0

    def at(t: int) -> LeakVerdict:
        return leak_assess(series[: t + 1])

    assert at(10)["level"] == "growing" and at(10)["orphans_per_min"] == pytest.approx(60.0)
    assert at(45)["level"] == "growing"  # t = 15 to 20 of its window still grew
    assert at(45)["orphans_per_min"] == pytest.approx(5 * 60 / 30)
    for t in (50, 51, 80, 120):
        verdict = at(t)
        assert verdict["level"] == "leak" and verdict["badge"] == "leaked, stable", t
        assert verdict["orphans_per_min"] == 0 and verdict["growing_workers"] == [], t
        assert verdict["window_s"] == 30.0 and "stable" in verdict["message"], t
    assert at(45)["badge"] == "leak growing" and at(0)["badge"] == "no leak"


def test_a_thinned_series_measures_growth_from_the_next_older_point() -> None:
    # Points 40 s apart (a long run's history thinned): the window reaches the older point
    # rather than finding none and calling a growing leak flat.
    verdict = leak_assess(_points([[0], [4], [8]], step_s=40.0))
    assert verdict["level"] == "growing" and verdict["orphans_per_min"] == pytest.approx(6.0)


def test_growing_session_copies_without_orphans_are_not_a_leak() -> None:
    points = [
        LeakPoint(t_s=float(t), orphans=[0, 0], copies=[t, t], cached_bytes=[t * 10, 0])
        for t in range(0, 60, 5)
    ]
    verdict = leak_assess(points)
    assert verdict["level"] == "ok" and verdict["copies_per_min"] > 0
    assert "histories of live sessions" in verdict["message"]


def _fleet(t: int, rss_mib: list[float], orphans: list[int] | None = None) -> LeakPoint:
    """Client workers 0..n-1, each its own process `vm:10+i` holding rss_mib[i]."""
    n = len(rss_mib)
    return LeakPoint(
        t_s=float(t),
        orphans=orphans or [0] * n,
        copies=[5] * n,
        cached_bytes=[100] * n,
        hosts=[
            HostPoint(host=f"vm:{10 + i}", workers=(i,), rss_bytes=int(mib * MIB), lost=False)
            for i, mib in enumerate(rss_mib)
        ],
    )


def test_host_rss_growth_is_reported_per_process_and_in_total_beside_the_orphans() -> None:
    # One snapshot a second; worker 1's process grows 1 MiB/s, the others stay at 100 MiB.
    series = [_fleet(t, [100, 100 + t, 100]) for t in range(0, 61)]
    verdict = leak_assess(series)
    by_host = {h["host"]: h for h in verdict["hosts"]}
    assert by_host["vm:11"]["rss_mib_per_min"] == pytest.approx(60.0)  # over the last 30 s
    assert by_host["vm:11"]["rss_bytes"] == 160 * MIB and by_host["vm:11"]["workers"] == [1]
    assert by_host["vm:10"]["rss_mib_per_min"] == 0 and by_host["vm:12"]["rss_mib_per_min"] == 0
    assert "the 3 client-worker processes hold 360\u00a0MiB" in verdict["message"]
    assert verdict["rss_bytes"] == 360 * MIB and verdict["rss_mib_per_min"] == pytest.approx(60.0)
    # RSS alone does not make a leak: no orphan, no flag (the module docstring says why).
    assert verdict["level"] == "ok"
    assert verdict["figures"] == "orphaned copies 0 · process memory 360\u00a0MiB, +60\u00a0MiB/min"
    assert "fastest: the process of worker 1 (vm:11), +60\u00a0MiB/min" in verdict["message"]
    assert "growth alone is not called a leak" in verdict["message"]
    # The live page's brief keeps the fastest-growing processes first.
    assert leak_brief(verdict)["hosts"][0]["host"] == "vm:11"


def test_flat_host_rss_reads_flat_and_orphans_still_set_the_level() -> None:
    series = [_fleet(t, [200, 200], orphans=[0, t // 10]) for t in range(0, 61)]
    verdict = leak_assess(series)
    assert verdict["level"] == "growing" and verdict["growing_workers"] == [1]
    assert verdict["rss_mib_per_min"] == 0 and verdict["rss_bytes"] == 400 * MIB
    assert verdict["figures"] == "orphaned copies 6, +6/min · process memory 400\u00a0MiB, flat"
    assert "fastest" not in verdict["message"] and "not called a leak" not in verdict["message"]


def test_in_process_runs_have_no_host_figures() -> None:
    verdict = leak_assess(_points([[0, 0], [0, 1]]))
    assert verdict["hosts"] == [] and verdict["rss_bytes"] is None
    assert verdict["rss_mib_per_min"] is None and "memory" not in verdict["figures"]
    assert "Memory" not in verdict["message"]


def test_snapshot_host_rows_become_one_point_per_process() -> None:
    books = {"orphaned_copies": [0] * 4, "session_copies": [0] * 4, "cached_bytes": [0] * 4}

    def snapshot(t: int, rss: int, *, lost_at: float | None = None) -> LeakPoint:
        point = leak_point(t, {"client_workers": books, "hosts": [
            # Workers 0 and 1 share one process (client_workers_per_host = 2): counted once.
            {"worker": 0, "host": "vm:1", "rss_bytes": rss, "lost_at_s": None},
            {"worker": 1, "host": "vm:1", "rss_bytes": rss, "lost_at_s": None},
            {"worker": 2, "host": "vm:2", "rss_bytes": 50 * MIB, "lost_at_s": lost_at},
            # Not answering yet: no heartbeat, nothing to measure.
            {"worker": 3, "host": None, "rss_bytes": None, "lost_at_s": None},
        ]})  # fmt: skip
        assert point is not None
        return point

    first = snapshot(0, 100 * MIB)
    assert [(h.host, h.workers) for h in first.hosts] == [("vm:1", (0, 1)), ("vm:2", (2,))]
    verdict = leak_assess([first, snapshot(30, 130 * MIB, lost_at=20.0)])
    rows = {h["host"]: h for h in verdict["hosts"]}
    assert rows["vm:1"]["rss_mib_per_min"] == pytest.approx(60.0)
    # The lost process is listed with its last report, but gone from the total.
    assert rows["vm:2"]["lost"] is True and verdict["rss_bytes"] == 130 * MIB
    assert "the 1 client-worker process holds 130\u00a0MiB" in verdict["message"]
    assert "(the lost process of worker 2 not counted)" in verdict["message"]


def test_a_process_that_answered_mid_window_grows_from_its_first_report() -> None:
    early = [_fleet(t, [100]) for t in range(0, 20)]
    later = [_fleet(t, [100, 100 + (t - 20)]) for t in range(20, 31)]  # 1 MiB/s from t = 20
    rows = {h["host"]: h for h in leak_assess(early + later)["hosts"]}
    assert rows["vm:11"]["rss_mib_per_min"] == pytest.approx(60.0)


# -- report, trees, exports ----------------------------------------------------------------------


def _finished(world: World, *, summary: dict[str, Any], spec: dict[str, Any] | None = None,
              baseline: bool = False) -> Run:  # fmt: skip
    return Run.objects.create(
        team=world.team, scenario=world.scenario, scenario_name=world.scenario.name,
        endpoint=world.endpoint, endpoint_name=world.endpoint.name, target_kind="endpoint",
        spec={**world.scenario.spec, **(spec or {})}, status=Status.SUCCEEDED, summary=summary,
        is_baseline=baseline,
    )  # fmt: skip


def _summary(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "requests": 100, "errors": 0, "requests_per_s": 10.0, "output_tokens_per_s": 500.0,
        "prefix_cache_hit_ratio": 0.8, "sessions_multi_worker": 0, "worker_switches": 0,
        "orphaned_session_copies": 0, "early_closes": 0,
        "ttft_ms": {"p50": 20.0, "p90": 30.0, "p99": 50.0},
        "itl_ms": {"p50": 5.0, "p90": 6.0, "p99": 8.0},
        "latency_ms": {"p50": 500.0, "p90": 700.0, "p99": 900.0},
        "by_depth": {"0": {"requests": 60, "ttft_ms": {"p50": 10, "p90": 20, "p99": 30}},
                     "1": {"requests": 40, "ttft_ms": {"p50": 40, "p90": 50, "p99": 60}}},
        "drain": {"verdict": "drained", "orphaned_copies": 0, "orphaned_copies_by_worker": [0, 0],
                  "session_copies": 0, "copies_of_cut_sessions": 0, "affinity_keys_bound": 0,
                  "affinity_keys_bound_server": None, "early_closes": 0,
                  "message": "no orphaned session copies"},
    }  # fmt: skip
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return base


def _record(i: int, session: str, root: str, parent: str | None, depth: int, turn: int,
            worker: int, inference: int, cached: int) -> dict[str, Any]:  # fmt: skip
    return {
        "request_id": i, "session_id": session, "root_id": root, "parent_id": parent,
        "depth": depth, "branch_mode": "root" if depth == 0 else "spawn", "turn_index": turn,
        "client_worker": worker, "inference_worker": inference, "start_s": float(i),
        "cached_tokens": cached, "prompt_tokens": 1000, "error": None, "warmup": False,
    }  # fmt: skip


RECORDS = [
    _record(0, "r", "r", None, 0, 0, 0, 3, 0),
    _record(1, "a", "r", "r", 1, 0, 0, 3, 900),  # child first turn: cache hit on worker 3
    _record(2, "b", "r", "r", 1, 0, 1, 5, 0),  # child first turn: a miss on worker 5
    _record(3, "b", "r", "r", 1, 1, 2, 5, 950),  # ... then bounces from client worker 1 to 2
    _record(4, "r", "r", None, 0, 1, 0, 3, 990),
]


def test_the_report_and_the_api_carry_the_hosts_rss_beside_the_orphans(world: World) -> None:
    # A run whose two client workers were processes: worker 1's grows 2 MiB per second.
    run = _finished(world, summary=_summary(), spec={"client_worker_processes": True})
    for seq in range(11):
        RunSample.objects.create(run=run, seq=seq, t_s=float(seq), data={
            "t_s": float(seq), "requests": seq * 10, "recent": [],
            "client_workers": {"orphaned_copies": [0, 0], "session_copies": [1, 1],
                               "cached_bytes": [1, 1]},
            "hosts": [{"worker": 0, "host": "vm:7", "rss_bytes": 100 * MIB, "lost_at_s": None},
                      {"worker": 1, "host": "vm:8", "rss_bytes": (100 + 2 * seq) * MIB,
                       "lost_at_s": None}]})  # fmt: skip
    leak = world.api("viewer").get(f"/api/v1/runs/{run.uuid}/leak").json()
    assert leak["level"] == "ok" and leak["rss_bytes"] == 220 * MIB
    assert leak["rss_mib_per_min"] == pytest.approx(120.0)
    assert [(h["host"], h["workers"], h["rss_mib_per_min"]) for h in leak["hosts"]] == [
        ("vm:7", [0], 0.0),
        ("vm:8", [1], 120.0),
    ]
    html = world.client("viewer").get(f"/runs/{run.uuid}/").content.decode()
    assert "orphaned copies 0 · process memory 220\u00a0MiB, +120\u00a0MiB/min" in html


def test_the_tree_view_marks_bounces_and_child_first_turn_cache_hits() -> None:
    (tree,) = trees_build(RECORDS)
    nodes = {n["id"]: n for n in tree["nodes"]}
    assert tree["root"] == "r" and tree["sessions"] == 3 and tree["bounced"] == 1
    assert nodes["b"]["bounced"] and nodes["b"]["client_workers"] == [1, 2]
    assert nodes["b"]["switches"] == 1 and not nodes["a"]["bounced"]
    assert nodes["a"]["first_turn_hit"] is True and nodes["b"]["first_turn_hit"] is False
    assert nodes["a"]["inference_worker"] == 3 and nodes["b"]["inference_worker"] == 5
    # The root sits between its two children.
    assert nodes["a"]["y"] < nodes["r"]["y"] < nodes["b"]["y"]


def test_the_report_renders_from_the_database_with_drain_check_trees_and_exports(
    world: World,
) -> None:
    drain = {
        "verdict": "leaked",
        "orphaned_copies": 3,
        "orphaned_copies_by_worker": [0, 3],
        "message": "3 orphaned session copies left (worker 1: 3)",
    }
    run = _finished(world, summary=_summary(drain=drain))
    for seq in range(3):
        RunSample.objects.create(run=run, seq=seq, t_s=float(seq), data={
            "t_s": float(seq), "requests": seq * 10, "recent": [],
            "client_workers": {"orphaned_copies": [0, seq], "session_copies": [1, 1],
                               "cached_bytes": [1, 1]}})  # fmt: skip
    records_insert(run_pk=run.pk, first_seq=0, batch=RECORDS)  # type: ignore[arg-type]
    owner = world.client("owner")
    page = owner.get(f"/runs/{run.uuid}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="drain"' in html and "leaked" in html and "worker 1: 3" in html
    assert 'src="/static/plotly/plotly.min.js"' in html and "cdn" not in html.lower()
    data = json.loads(html.split('id="run-data" type="application/json">')[1].split("</script>")[0])
    assert [s["seq"] for s in data["history"]["samples"]] == [0, 1, 2]
    # The run has ended: its leak grows no more (growing is a live run's word).
    assert data["history"]["leak"]["level"] == "leak"

    trees = owner.get(f"/reports/runs/{run.uuid}/trees.json").json()
    assert trees["trees"][0]["bounced"] == 1 and trees["complete"] is True

    export = owner.get(f"/reports/runs/{run.uuid}/report.html")
    assert export.status_code == 200 and "attachment" in export["Content-Disposition"]
    text = export.content.decode()
    assert "<script src=" not in text and "https://" not in text.split("<script>")[0]
    assert "Plotly" in text and "drawRunPage(root, page)" in text and len(text) > 4_000_000
    assert "\nimport " not in text  # the modules are inlined, not imported

    assert owner.get(f"/api/v1/runs/{run.uuid}", HTTP_AUTHORIZATION="").status_code in (401, 403)
    api = world.api("viewer").get(f"/api/v1/runs/{run.uuid}")
    assert api.json()["summary"]["drain"]["verdict"] == "leaked"
    for path in (f"/runs/{run.uuid}/", f"/reports/runs/{run.uuid}/trees.json",
                 f"/reports/runs/{run.uuid}/report.html"):  # fmt: skip
        assert world.client("outsider").get(path).status_code == 404
        assert world.client("anonymous").get(path).status_code == 302


def test_compare_and_the_verdict_flag_a_regression_against_the_baseline(world: World) -> None:
    base = _finished(world, summary=_summary(), baseline=True)
    same = _finished(world, summary=_summary(ttft_ms={"p99": 52.0}))
    slower = _finished(world, summary=_summary(ttft_ms={"p99": 80.0}, requests_per_s=12.0))
    leaky = _finished(
        world,
        summary=_summary(
            orphaned_session_copies=4,
            drain={"verdict": "leaked", "orphaned_copies": 4, "orphaned_copies_by_worker": [4, 0]},
        ),
    )
    api = world.api("viewer")

    ok = api.get(f"/api/v1/runs/{same.uuid}/verdict").json()
    assert ok["verdict"] == "pass" and ok["baseline"] == str(base.uuid)
    bad = api.get(f"/api/v1/runs/{slower.uuid}/verdict").json()
    assert bad["verdict"] == "fail" and bad["regressions"] == ["TTFT p99"]
    checks = {c["key"]: c for c in bad["checks"]}
    assert checks["requests_per_s"]["status"] == "improved"
    assert checks["ttft_ms.p99"]["delta_pct"] == 60.0
    leak = api.get(f"/api/v1/runs/{leaky.uuid}/verdict").json()
    assert leak["verdict"] == "fail"
    assert leak["regressions"] == ["Orphaned session copies"]
    assert leak["reasons"][0].startswith(
        "Drain check: 4 orphaned session copies left (worker 0: 4)"
    )
    # The baseline itself has none to compare with: its own checks judge it.
    none = api.get(f"/api/v1/runs/{base.uuid}/verdict").json()
    assert none["verdict"] == "pass" and none["baseline"] is None and none["checks"] == []
    explicit = api.get(f"/api/v1/runs/{base.uuid}/verdict?baseline={slower.uuid}").json()
    # Against the slower run, the baseline's TTFT is better but its throughput worse.
    assert explicit["baseline"] == str(slower.uuid)
    assert explicit["regressions"] == ["Requests per second"]

    cmp = api.get(f"/api/v1/compare?runs={base.uuid},{slower.uuid}").json()
    assert [r["id"] for r in cmp["runs"]] == [str(base.uuid), str(slower.uuid)]
    ttft = next(m for m in cmp["metrics"] if m["key"] == "ttft_ms.p99")
    assert [c["value"] for c in ttft["cells"]] == [50.0, 80.0]
    assert ttft["cells"][1]["status"] == "regressed"
    assert api.get(f"/api/v1/compare?runs={base.uuid}").status_code == 422
    assert (
        world.api("outsider").get(f"/api/v1/compare?runs={base.uuid},{same.uuid}").status_code
        == 404
    )
    assert world.api("outsider").get(f"/api/v1/runs/{same.uuid}/verdict").status_code == 404

    page = world.client("viewer").get(f"/reports/compare/?runs={base.uuid},{slower.uuid}")
    assert page.status_code == 200 and b"delta-table" in page.content
    assert world.client("viewer").get("/reports/compare/?runs=nope").status_code == 400
    history = world.client("viewer").get(f"/reports/scenarios/{world.scenario.uuid}/history/")
    assert history.status_code == 200 and b"Latest run's verdict" in history.content
    assert (
        world.client("outsider")
        .get(f"/reports/scenarios/{world.scenario.uuid}/history/")
        .status_code
        == 404
    )


def test_the_runs_list_filters_by_policy_and_scope(world: World) -> None:
    legacy = _finished(world, summary=_summary(), spec={"policy": "legacy", "scope": "lineage"})
    pinned = _finished(
        world, summary=_summary(), spec={"policy": "spawn-pin", "scope": "conversation"}
    )
    page = world.client("owner").get("/runs/?policy=legacy")
    assert (
        str(legacy.uuid).encode() in page.content and str(pinned.uuid).encode() not in page.content
    )
    page = world.client("owner").get("/runs/?scope=conversation")
    assert (
        str(pinned.uuid).encode() in page.content and str(legacy.uuid).encode() not in page.content
    )
    items = world.api("owner").get("/api/v1/runs?policy=spawn-pin").json()["items"]
    ids = {i["id"] for i in items}
    assert str(pinned.uuid) in ids and str(legacy.uuid) not in ids
    assert world.client("owner").get("/runs/?policy=bogus").status_code == 200  # form error, no 500


def test_a_viewer_cannot_launch_an_ab_pair(world: World) -> None:
    response = world.api("viewer").post(
        "/api/v1/ab", {"scenario": str(world.scenario.uuid), "knob": "policy"},
        content_type="application/json",
    )  # fmt: skip
    assert response.status_code == 403
    bad = world.api("owner").post(
        "/api/v1/ab", {"scenario": str(world.scenario.uuid), "knob": "policy", "value_a": "x"},
        content_type="application/json",
    )  # fmt: skip
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "value_a"
    assert ABPair.objects.count() == 0 and Run.objects.count() == 1


def test_a_paired_ab_runs_one_after_the_other_and_the_leak_shows_in_legacy_only(
    live_world: World, mock_url: str, wait_for: Callable[..., Any]
) -> None:
    boot = demo_bootstrap(mock_url=mock_url)
    from django.test import Client

    from aiperf_web.teams.services import api_token_create

    api = Client(
        HTTP_AUTHORIZATION=f"Bearer {api_token_create(user=boot.scenario.created_by, name='ab')[1]}"
    )
    created = api.post(
        "/api/v1/ab",
        {"scenario": str(boot.scenario.uuid), "endpoint": "simulated", "knob": "policy",
         "overrides": {"duration_s": 600, "concurrency": 256}},
        content_type="application/json",
    )  # fmt: skip
    assert created.status_code == 201, created.content
    pair = created.json()
    a = Run.objects.get(uuid=pair["run_a"])
    b = Run.objects.get(uuid=pair["run_b"])
    assert (a.spec["policy"], b.spec["policy"]) == ("legacy", "spawn-pin")
    assert a.spec["seed"] == b.spec["seed"] and a.spec["workload"] == b.spec["workload"]

    def done() -> bool:
        return all(Run.objects.get(pk=r.pk).status in FINAL for r in (a, b))

    try:
        wait_for(done, timeout_s=120, every_s=0.2)
    except AssertionError:
        states = [(r.status, r.reason) for r in Run.objects.filter(pk__in=[a.pk, b.pk])]
        raise AssertionError(f"the pair did not finish: {states}") from None
    a.refresh_from_db()
    b.refresh_from_db()
    assert (a.status, b.status) == ("succeeded", "succeeded"), (a.reason, b.reason)
    assert b.started_at is not None and a.finished_at is not None
    assert b.started_at >= a.finished_at  # one after the other
    assert a.summary["drain"]["verdict"] == "leaked" and b.summary["drain"]["verdict"] == "drained"

    cmp = api.get(f"/api/v1/compare?runs={a.uuid},{b.uuid}").json()
    assert [r["leak"]["level"] != "ok" for r in cmp["runs"]] == [True, False]
    web = Client()
    web.force_login(boot.scenario.created_by)
    page = web.get(pair["compare_url"])
    assert page.status_code == 302 and str(b.uuid) in page["Location"]


def test_agent_trees_lay_out_a_grandchild_whose_parent_sent_nothing() -> None:
    from aiperf_web.reports.selectors.trees import trees_build

    def record(session: str, parent: str | None, depth: int) -> dict[str, Any]:
        return {
            "root_id": "r", "session_id": session, "parent_id": parent, "depth": depth,
            "branch_mode": "spawn" if parent else None, "start_s": float(depth),
            "turn_index": 0, "client_worker": 0,
        }  # fmt: skip

    # "c" (the root's child) has no records; its child "g" has.
    (tree,) = trees_build([record("r", None, 0), record("g", "c", 2)])
    assert {n["id"] for n in tree["nodes"]} == {"r", "g"}
    assert all("y" in n for n in tree["nodes"])
