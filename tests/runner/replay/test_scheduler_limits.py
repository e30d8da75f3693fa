"""The scheduler's clock stays finite and its memory bounded whatever the arrival process
draws (issue 13 item 4: gamma arrivals at burstiness 1e-320 ran on a NaN clock; a rate of
1e308 grew the queue of waiting arrivals without end)."""

from __future__ import annotations

import math

import pytest

from runner.errors import SpecError
from runner.replay import scheduler as scheduler_module
from runner.replay.scheduler import MIN_BURSTINESS, ReplayConfig, ReplayScheduler
from runner.trace.model import Session, Tree
from tests.runner.factories import tree, turns
from tests.runner.replay.driver import Recorder, run


def _trees() -> list[Tree]:
    return [tree(Session("root", tuple(turns(2))))]


def test_a_gamma_shape_too_small_for_finite_draws_is_refused() -> None:
    with pytest.raises(SpecError, match=r"burstiness must be >= 0\.01"):
        ReplayConfig(timing="rate", rate_per_s=1.0, arrival="gamma", burstiness=1e-320)


def test_the_burstiest_gamma_allowed_keeps_a_finite_clock_and_reaches_the_duration() -> None:
    config = ReplayConfig(
        timing="rate",
        rate_per_s=1000.0,
        arrival="gamma",
        burstiness=MIN_BURSTINESS,
        duration_s=30.0,
        concurrency=10_000,
    )
    issued, scheduler, _ = run(_trees(), config, latency_s=0.5)
    assert issued and all(math.isfinite(c.issued_at_s) for c in issued)
    assert max(c.issued_at_s for c in issued) < 30.0
    assert scheduler.stopped_at_s == 30.0


def test_an_arrival_drawn_off_the_clock_is_dropped_not_scheduled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = ReplayConfig(timing="rate", rate_per_s=1.0, duration_s=60.0)
    scheduler = ReplayScheduler(_trees(), config)
    monkeypatch.setattr(scheduler, "_interval_s", lambda: math.nan)
    scheduler.start(0.0, Recorder())
    scheduler.pop_due(0.0)  # the first arrival; the next one is drawn as NaN
    due = scheduler.next_due()
    assert due is None or math.isfinite(due)


def test_arrivals_waiting_for_a_slot_are_bounded_and_the_rest_counted_unstarted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(scheduler_module, "MAX_WAITING_ARRIVALS", 100)
    config = ReplayConfig(
        timing="rate", rate_per_s=1000.0, arrival="constant", concurrency=1, duration_s=60.0
    )
    scheduler = ReplayScheduler(_trees(), config)
    scheduler.start(0.0, Recorder())
    scheduler.pop_due(10.0)  # nothing returns: 10,000 arrivals, one slot
    assert len(scheduler._waiting) == 100
    assert scheduler.arrivals_unstarted >= 9_800
