"""Every finished run has a verdict (issue 27 item 1): its own checks (status, drain check,
error share, share cut by the stop, SLO goodput) fail a run without a baseline, and a
baseline's regression checks join them. The verdict shows on the run page, the runs list, the
API (its own route and the run detail) and the run-end webhook; a legacy run on the built-in
mock that leaks fails, a spawn-pin run does not, through the real worker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.test import Client

from aiperf_web.reports.webhooks import run_webhook_body
from aiperf_web.runs.models import Run, Status
from aiperf_web.runs.verdict import (
    RunCheck,
    run_checks,
    run_verdict,
    runs_verdicts,
    scenario_baseline,
)
from aiperf_web.stack.demo import demo_bootstrap
from aiperf_web.teams.services import api_token_create
from tests.web.conftest import World, final_run

DRAINED = {"verdict": "drained", "orphaned_copies": 0, "orphaned_copies_by_worker": [0, 0, 0]}
LEAKED = {"verdict": "leaked", "orphaned_copies": 5, "orphaned_copies_by_worker": [0, 3, 0, 2]}


def _summary(**over: Any) -> dict[str, Any]:
    return {"requests": 200, "errors": 0, "cut_by_stop": 0, "drain": DRAINED,
            "goodput": {"slo_ms": {}, "good_requests": 200, "good_ratio": 1.0}, **over}  # fmt: skip


def _checks(summary: dict[str, Any] | None, status: str = "succeeded",
            reason: str = "") -> dict[str, RunCheck]:  # fmt: skip
    return {c["key"]: c for c in run_checks(status=status, reason=reason, summary=summary)}


# -- each rule of the run's own checks -------------------------------------------------------


def test_a_leaked_drain_check_fails_naming_the_orphaned_copies_of_each_worker() -> None:
    drain = _checks(_summary(drain=LEAKED))["drain"]
    assert drain["status"] == "fail" and drain["value"] == 5
    assert drain["message"].startswith("5 orphaned session copies left")
    assert "(worker 1: 3, worker 3: 2)" in drain["message"]


def test_a_leak_on_many_workers_names_the_first_few_and_counts_the_rest() -> None:
    drain = {"verdict": "leaked", "orphaned_copies": 64, "orphaned_copies_by_worker": [1] * 64}
    message = _checks(_summary(drain=drain))["drain"]["message"]
    assert "worker 7: 1 and 56 more workers)" in message and "worker 8:" not in message


def test_a_drained_run_passes_the_drain_check() -> None:
    drain = _checks(_summary())["drain"]
    assert drain["status"] == "pass" and drain["message"] == "no orphaned session copy left"


def test_errors_fail_over_their_limit_counted_over_the_requests_that_ran_their_course(
    settings: Any,
) -> None:
    settings.AIPERF_VERDICT_MAX_ERROR_PCT = 1.0
    # 2 errors of 190 finished (10 cut by the stop): 1.05 %, over 1 %.
    over = _checks(_summary(errors=2, cut_by_stop=10))["error_share"]
    assert over["status"] == "fail" and over["value"] == 1.05 and over["limit"] == 1.0
    assert over["message"] == "2 of 190 finished requests (1.1 %), over the 1 % limit"
    under = _checks(_summary(errors=2))["error_share"]
    assert under["status"] == "pass" and under["value"] == 1.0
    settings.AIPERF_VERDICT_MAX_ERROR_PCT = 5.0
    assert _checks(_summary(errors=2, cut_by_stop=10))["error_share"]["status"] == "pass"


def test_a_run_in_which_no_request_ran_its_course_fails() -> None:
    check = _checks(_summary(requests=4, cut_by_stop=4))["error_share"]
    assert check["status"] == "fail" and "measured nothing" in check["message"]


def test_requests_cut_by_the_stop_fail_over_their_share_and_say_what_to_change(
    settings: Any,
) -> None:
    settings.AIPERF_VERDICT_MAX_CUT_PCT = 10.0
    over = _checks(_summary(cut_by_stop=21))["cut_by_stop_share"]
    assert over["status"] == "fail" and over["value"] == 10.5
    assert over["message"].startswith("21 of 200 requests (10.5 %), over the 10 % limit")
    assert "longer duration or a lower concurrency" in over["message"]
    assert _checks(_summary(cut_by_stop=20))["cut_by_stop_share"]["status"] == "pass"


def test_slo_goodput_is_checked_only_where_the_spec_sets_slos(settings: Any) -> None:
    settings.AIPERF_VERDICT_MIN_GOOD_PCT = 90.0
    assert _checks(_summary())["slo_goodput"]["status"] == "n/a"
    slos = {"ttft_ms": 500.0, "latency_ms": 2000.0}
    low = _checks(_summary(goodput={"slo_ms": slos, "good_requests": 170, "good_ratio": 0.85}))
    assert low["slo_goodput"]["status"] == "fail" and low["slo_goodput"]["value"] == 85.0
    assert low["slo_goodput"]["message"] == (
        "only 85.0 % of finished requests met every SLO (TTFT ≤ 500 ms, "
        "latency ≤ 2,000 ms), under the 90 % required"
    )
    good = _checks(_summary(goodput={"slo_ms": slos, "good_requests": 190, "good_ratio": 0.95}))
    assert good["slo_goodput"]["status"] == "pass"


def test_a_failed_or_cancelled_run_fails_on_its_status_even_without_a_summary() -> None:
    failed = _checks(None, status="failed", reason="endpoint unreachable: connection refused")
    assert list(failed) == ["status"]
    assert failed["status"]["message"] == "the run failed: endpoint unreachable: connection refused"
    cancelled = _checks(_summary(), status="cancelled")["status"]
    assert cancelled["status"] == "fail" and "cancelled" in cancelled["message"]
    assert _checks(_summary())["status"]["status"] == "pass"


def test_a_summary_from_before_a_figure_existed_leaves_its_check_not_applicable() -> None:
    checks = _checks({"requests": 10, "errors": 0})
    assert checks["drain"]["status"] == "n/a" and checks["cut_by_stop_share"]["status"] == "n/a"
    assert checks["error_share"]["status"] == "pass"


def test_regressions_read_as_a_person_writes_figures() -> None:
    base = Run(status=Status.SUCCEEDED, summary=_summary(latency_ms={"p99": 4271.02}))
    slow = Run(status=Status.SUCCEEDED, summary=_summary(latency_ms={"p99": 14527.8}))
    verdict = run_verdict(run_obj=slow, baseline=base)
    assert verdict["reasons"] == [
        "Latency p99 regressed: 14,528 ms against 4,271 ms on the baseline (+240.2 %)"
    ]
    assert verdict["message"] == "Fail: " + verdict["reasons"][0] + "."


# -- the verdict where people look -------------------------------------------------------------


def _finished(world: World, *, summary: dict[str, Any] | None, status: str = Status.SUCCEEDED,
              baseline: bool = False, reason: str = "") -> Run:  # fmt: skip
    return Run.objects.create(
        team=world.team, scenario=world.scenario, scenario_name=world.scenario.name,
        endpoint=world.endpoint, endpoint_name=world.endpoint.name, target_kind="endpoint",
        spec=world.scenario.spec, status=status, summary=summary, is_baseline=baseline,
        reason=reason,
    )  # fmt: skip


def test_a_leaking_run_fails_without_a_baseline_in_the_api_the_run_page_and_the_list(
    world: World,
) -> None:
    leaky = _finished(world, summary=_summary(drain=LEAKED, orphaned_session_copies=5))
    api = world.api("viewer")
    verdict = api.get(f"/api/v1/runs/{leaky.uuid}/verdict").json()
    assert verdict["verdict"] == "fail" and verdict["baseline"] is None
    assert verdict["reasons"][0].startswith("Drain check: 5 orphaned session copies left")
    assert verdict["checks"] == [] and verdict["regressions"] == []
    assert {c["key"] for c in verdict["run_checks"]} == {
        "status", "drain", "error_share", "cut_by_stop_share", "slo_goodput",
    }  # fmt: skip
    assert api.get(f"/api/v1/runs/{leaky.uuid}").json()["verdict"] == verdict

    page = world.client("viewer").get(f"/runs/{leaky.uuid}/").content.decode()
    card = page.split('id="verdict"')[1].split("</section>")[0]
    assert 'id="verdict-badge">fail<' in card
    assert "Drain check: 5 orphaned session copies left (worker 1: 3, worker 3: 2)" in card
    assert "<td>5 orphaned session copies left (worker 1: 3, worker 3: 2)" in card

    listing = world.client("viewer").get("/runs/").content.decode()
    row = listing.split(f'<tr data-run-id="{leaky.uuid}">')[1].split("</tr>")[0]
    assert 'class="verdict-pill v-fail"' in row and "Fail: Drain check: 5 orphaned" in row


def test_a_clean_run_passes_and_says_it_had_no_baseline(world: World) -> None:
    clean = _finished(world, summary=_summary())
    verdict = world.api("viewer").get(f"/api/v1/runs/{clean.uuid}/verdict").json()
    assert verdict["verdict"] == "pass" and verdict["reasons"] == []
    assert "No baseline to compare its figures with" in verdict["message"]
    page = world.client("viewer").get(f"/runs/{clean.uuid}/").content.decode()
    assert 'id="verdict-badge">pass<' in page


def test_a_run_that_has_not_ended_is_pending_and_shows_no_verdict(world: World) -> None:
    running = _finished(world, summary=None, status=Status.RUNNING)
    verdict = world.api("viewer").get(f"/api/v1/runs/{running.uuid}/verdict").json()
    assert verdict["verdict"] == "pending" and verdict["run_checks"] == []
    assert (
        'id="verdict"' not in world.client("viewer").get(f"/runs/{running.uuid}/").content.decode()
    )


def test_a_baselines_regressions_join_the_runs_own_checks(world: World) -> None:
    _finished(
        world, summary=_summary(ttft_ms={"p99": 50.0}, prefix_cache_hit_ratio=0.8), baseline=True
    )
    both = _finished(
        world, summary=_summary(ttft_ms={"p99": 80.0}, errors=10, prefix_cache_hit_ratio=0.652)
    )
    verdict = world.api("viewer").get(f"/api/v1/runs/{both.uuid}/verdict").json()
    assert verdict["verdict"] == "fail"
    assert verdict["regressions"] == ["TTFT p99", "Prefix-cache hit ratio", "Errors"]
    assert verdict["reasons"] == [
        "Errors: 10 of 200 finished requests (5.0 %), over the 1 % limit",
        "TTFT p99 regressed: 80 ms against 50 ms on the baseline (+60 %)",
        "Prefix-cache hit ratio regressed: 65.2 % against 80.0 % on the baseline (-14.8 points)",
        "Errors regressed: 10 against 0 on the baseline",
    ]


def test_the_list_judges_each_run_against_the_baseline_the_api_uses_in_one_query(
    world: World, django_assert_num_queries: Any
) -> None:
    old_base = _finished(world, summary=_summary(requests_per_s=10.0), baseline=True)
    new_base = _finished(world, summary=_summary(requests_per_s=20.0), baseline=True)
    slow = _finished(world, summary=_summary(requests_per_s=12.0))
    runs = [slow, new_base, old_base, world.run]
    with django_assert_num_queries(1):
        verdicts = runs_verdicts(runs)
    for run, verdict in zip(runs, verdicts, strict=True):
        base = scenario_baseline(run_obj=run)
        assert verdict["baseline"] == (str(base.uuid) if base else None), run
    # Against the newest baseline (20 req/s) the slow run regressed; the newest baseline is
    # judged against the one before it.
    assert verdicts[0]["regressions"] == ["Requests per second"]
    assert verdicts[1]["baseline"] == str(old_base.uuid)


def test_the_run_end_webhook_carries_the_verdict_and_its_reasons(world: World) -> None:
    failed = _finished(
        world, summary=None, status=Status.FAILED, reason="endpoint unreachable: refused"
    )
    body = run_webhook_body(run_obj=failed)["verdict"]
    assert body["verdict"] == "fail"
    assert body["reasons"] == ["the run failed: endpoint unreachable: refused"]
    assert [c["key"] for c in body["run_checks"]] == ["status"]


# -- real runs on the built-in mock, through the worker --------------------------------------


def _launch(api: Client, boot: Any, **overrides: Any) -> str:
    created = api.post(
        "/api/v1/runs",
        {"scenario": str(boot.scenario.uuid), "endpoint": str(boot.endpoint.uuid),
         "overrides": {"duration_s": 5, **overrides}},
        content_type="application/json",
    )  # fmt: skip
    assert created.status_code == 201, created.content
    return str(created.json()["id"])


def test_a_leaking_legacy_demo_run_fails_naming_the_leak_and_spawn_pin_does_not(
    live_world: World, mock_url: str, wait_for: Callable[..., Any]
) -> None:
    # The demo as `make run` makes it, on the built-in mock (real HTTP), for 5 s: no baseline.
    boot = demo_bootstrap(mock_url=mock_url)
    token = api_token_create(user=boot.scenario.created_by, name="verdict")[1]
    api = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    legacy_id = _launch(api, boot, policy="legacy")
    pinned_id = _launch(api, boot, policy="spawn-pin")
    legacy = final_run(legacy_id, wait_for, timeout_s=180)
    pinned = final_run(pinned_id, wait_for, timeout_s=180)
    assert (legacy.status, pinned.status) == ("succeeded", "succeeded"), (
        legacy.reason, pinned.reason,
    )  # fmt: skip
    assert legacy.summary["drain"]["verdict"] == "leaked", legacy.summary["drain"]
    orphans = legacy.summary["drain"]["orphaned_copies"]

    verdict = api.get(f"/api/v1/runs/{legacy_id}/verdict").json()
    assert verdict["verdict"] == "fail" and verdict["baseline"] is None
    assert verdict["reasons"][0].startswith(
        f"Drain check: {orphans} orphaned session copies left (worker "
    )
    assert run_webhook_body(run_obj=legacy)["verdict"]["reasons"] == verdict["reasons"]

    other = api.get(f"/api/v1/runs/{pinned_id}/verdict").json()
    assert other["verdict"] == "pass", other["reasons"]
    drain = next(c for c in other["run_checks"] if c["key"] == "drain")
    assert drain["status"] == "pass"
