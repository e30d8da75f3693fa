"""A run's end as the service stores and tells it comes from the engine's `ended_by` in one
place (runs.executing.run_outcome): its status, the row's reason and the log's stop line.
Each mapping here through a real run executed inline on the simulated cluster; the watcher's
cancel and time limit through the real watcher thread."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.utils import timezone

from aiperf_web.runs import executing
from aiperf_web.runs import services as run_services
from aiperf_web.runs.models import Run, Status
from runner import EndedBy, Ending
from runner import run as engine_run
from tests.web.conftest import World


def test_the_engine_reasons_and_the_service_facts_map_to_one_outcome_each() -> None:
    outcome = executing.run_outcome
    done = Ending(EndedBy.DURATION, "its duration (30 s) was reached")
    assert outcome(done) == executing.Outcome(
        Status.SUCCEEDED, "", "info", "stopped: its duration (30 s) was reached"
    )
    assert outcome(done, cut_by_stop=2).line == (
        "stopped: its duration (30 s) was reached; 2 requests in flight were cut by the stop "
        "(not errors)"
    )
    early = Ending(EndedBy.COMPLETED, "the workload ran out at 5.0 s", early=True)
    assert outcome(early).status == Status.SUCCEEDED
    assert outcome(early).reason == "the workload ran out at 5.0 s"
    failing = Ending(EndedBy.FAILURES_IN_A_ROW, "50 requests in a row failed (last: connect)")
    assert outcome(failing) == executing.Outcome(
        Status.FAILED,
        "50 requests in a row failed (last: connect)",
        "error",
        "stopped: failed (50 requests in a row failed (last: connect))",
    )
    cancelled = Ending.cancelled()
    assert outcome(cancelled).status == Status.CANCELLED
    # What only the service knows comes first: the engine saw a stop either way.
    assert outcome(cancelled, timed_out=True).reason == "stopped at the run's time limit"
    assert outcome(done, cancel_requested=True).status == Status.CANCELLED
    stored = outcome(done, storing_failed="disk full")
    assert (stored.status, stored.reason) == (Status.FAILED, "storing results failed: disk full")


def _launch(world: World, **overrides: Any) -> Run:
    return run_services.run_launch(
        actor=world.owner,
        scenario_id=world.scenario.uuid,
        endpoint_id="simulated",
        overrides={"snapshot_interval_s": 5, **overrides},
        enqueue=False,
    )


def _execute(run: Run) -> Run:
    executing.run_execute(run_uuid=str(run.uuid), worker="outcome-test:1")
    return Run.objects.get(pk=run.pk)


def _stopped(run: Run) -> list[tuple[str, str]]:
    return [
        (level, message)
        for level, message in run.log_lines.order_by("id").values_list("level", "message")
        if message.startswith("stopped: ")
    ]


def test_a_workload_that_runs_out_first_succeeds_and_the_row_says_it_ended_early(
    transactional_db: Any, mock_url: str
) -> None:
    # Schedule timing starts each of the scenario's trees once, at its recorded start.
    world = World(mock_url)
    run = _execute(_launch(world, timing="schedule", concurrency=None, duration_s=36000))
    assert run.status == Status.SUCCEEDED
    assert run.reason.startswith("the workload ran out at ")
    assert run.reason.endswith("before its duration (36000 s)")
    assert run.summary["ended_by"]["by"] == "completed" and run.summary["ended_by"]["early"]
    assert _stopped(run) == [("info", f"stopped: {run.reason}")]


def test_a_run_the_engine_stops_is_failed_with_its_reason(
    transactional_db: Any, mock_url: str
) -> None:
    # An instant cluster under a workload that never waits: the simulated clock stands still
    # (a synthetic workload put in the stored spec: a scenario's runs take its workload).
    run = _launch(World(mock_url), duration_s=60, speedup=1e6, target={"time_scale": 0})
    spec = dict(run.spec)
    spec["workload"] = {
        "synthetic": {
            "trees": 2,
            "think_time_median_s": 0,
            "max_think_time_s": 0,
            "subagent_think_time_median_s": 0,
        }
    }
    Run.objects.filter(pk=run.pk).update(spec=spec)
    run = _execute(run)
    assert run.status == Status.FAILED, run.reason
    assert run.reason.startswith("the simulated clock stood still at ")
    assert run.summary["ended_by"]["by"] == "clock_stalled"
    [(level, line)] = _stopped(run)
    assert level == "error" and line.startswith("stopped: failed (the simulated clock stood")


def _engine_after_the_watcher_stops(seen: list[str]) -> Any:
    """The engine, started once the watcher has set the stop (it then ends `cancelled`)."""

    def engine(spec: Any, *, stop: threading.Event, **kwargs: Any) -> Any:
        assert stop.wait(30), "the watcher never set the stop"
        result = engine_run(spec, stop=stop, **kwargs)
        seen.append(result.ended_by.by)
        return result

    return engine


def test_a_cancel_request_seen_by_the_watcher_cancels_the_run(
    transactional_db: Any, mock_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _launch(World(mock_url), duration_s=3600)
    Run.objects.filter(pk=run.pk).update(cancel_requested_at=timezone.now())
    seen: list[str] = []
    monkeypatch.setattr(executing, "run", _engine_after_the_watcher_stops(seen))
    run = _execute(run)
    assert seen == [EndedBy.CANCELLED]
    assert (run.status, run.reason) == (Status.CANCELLED, "cancelled")
    assert _stopped(run) == [("warning", "stopped: cancelled")]


def test_a_run_stopped_at_its_time_limit_fails_and_says_so(
    transactional_db: Any, mock_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The watcher's limit is the task's minus 60 s: half a second here.
    monkeypatch.setattr(executing, "run_time_limit_s", lambda spec: 60.5)
    seen: list[str] = []
    monkeypatch.setattr(executing, "run", _engine_after_the_watcher_stops(seen))
    run = _execute(_launch(World(mock_url), duration_s=3600))
    assert seen == [EndedBy.CANCELLED]  # the engine saw a stop; the service knows which
    assert (run.status, run.reason) == (Status.FAILED, "stopped at the run's time limit")
    assert _stopped(run) == [("error", "stopped: failed (stopped at the run's time limit)")]


def test_a_run_another_ended_first_keeps_that_verdict_in_its_log(
    transactional_db: Any, mock_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    reaped = "worker w stopped responding (no heartbeat for over 15 s)"

    def engine(spec: Any, **kwargs: Any) -> Any:
        result = engine_run(spec, **kwargs)
        Run.objects.filter(uuid=run.uuid).update(status=Status.FAILED, reason=reaped)
        return result

    run = _launch(World(mock_url), duration_s=30)
    monkeypatch.setattr(executing, "run", engine)
    run = _execute(run)
    assert (run.status, run.reason) == (Status.FAILED, reaped)
    assert _stopped(run) == [("error", f"stopped: failed ({reaped})")]
