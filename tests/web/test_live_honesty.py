"""Live figures that never mislead (issue 27 item 4) and the launch form's words (item 7): the
leak monitor projects no rate from a few seconds and speaks in the past tense once the run has
ended; the launch form says what affinity_actions the endpoint will get and greys out "client
workers per host" while client worker processes are off."""

from __future__ import annotations

import re
from typing import Any

import pytest

from aiperf_web.runs.forms import actions_label
from aiperf_web.runs.leaks import MIN_RATE_WINDOW_S, LeakPoint, leak_assess
from tests.web.conftest import World


def _series(orphans: list[int], copies: list[int], step_s: float) -> list[LeakPoint]:
    return [
        LeakPoint(t_s=i * step_s, orphans=[o], copies=[c], cached_bytes=[0])
        for i, (o, c) in enumerate(zip(orphans, copies, strict=True))
    ]


def test_five_seconds_of_copies_are_not_projected_to_a_minute() -> None:
    verdict = leak_assess(_series([0] * 6, [0, 20, 40, 60, 80, 88], step_s=1.0))
    assert not verdict["rated"]
    assert "per minute (" not in verdict["message"] and "grow by" not in verdict["message"]
    assert "+88 in the last 5 s" in verdict["message"]
    assert f"a rate per minute after {MIN_RATE_WINDOW_S:g} s" in verdict["message"]


def test_a_rate_per_minute_once_the_window_is_long_enough() -> None:
    verdict = leak_assess(_series([0] * 31, list(range(0, 62, 2)), step_s=1.0))
    assert verdict["rated"]
    assert "Session copies grow by 120 per minute" in verdict["message"]


def test_orphans_of_the_first_seconds_are_counted_not_projected() -> None:
    verdict = leak_assess(_series([0, 1, 3], [5, 6, 8], step_s=2.0))
    assert verdict["level"] == "growing"
    assert (
        "+3 in the last 4 s" in verdict["message"] and "per minute over" not in verdict["message"]
    )
    assert verdict["figures"] == "orphaned copies 3, +3 in 4 s"


def test_a_finished_run_never_says_its_leak_is_growing() -> None:
    series = _series(list(range(0, 40)), [10] * 40, step_s=1.0)
    live = leak_assess(series)
    assert live["level"] == "growing" and "are growing" in live["message"]
    ended = leak_assess(series, ended=True)
    assert ended["level"] == "leak" and ended["badge"] == "leaked"
    assert "growing on" not in ended["message"] and "is growing" not in ended["message"]
    assert ended["message"].startswith("Leaked: the run left 39 orphaned session copies")
    assert "still growing at its end" in ended["message"]
    assert "/min" not in ended["figures"] and "flat" not in ended["figures"]


def test_a_finished_run_without_orphans_says_how_its_copies_grew_in_the_past_tense() -> None:
    ended = leak_assess(_series([0] * 31, list(range(0, 62, 2)), step_s=1.0), ended=True)
    assert ended["level"] == "ok"
    assert "grew by 120 per minute" in ended["message"] and "grow by" not in ended["message"]


def test_the_actions_label_says_what_the_endpoint_will_get() -> None:
    assert actions_label(affinity="dynamo-headers", scenario="bind", endpoint=None) == (
        "not sent with dynamo-headers"
    )
    assert actions_label(affinity="dynamo-nvext", scenario="bind", endpoint="open") == (
        "endpoint: open (its connection test)"
    )
    assert actions_label(affinity="dynamo-nvext", scenario="bind", endpoint=None) == (
        "scenario: bind"
    )


@pytest.mark.django_db
def test_the_launch_form_greys_out_what_does_not_apply(world: World) -> None:
    from aiperf_web.scenarios.models import Scenario

    Scenario.objects.filter(pk=world.scenario.pk).update(
        spec={**world.scenario.spec, "affinity": "dynamo-headers", "affinity_actions": "bind"}
    )
    page = world.client("owner").get(f"/runs/new/?scenario={world.scenario.uuid}")
    form: Any = page.context["form"]
    actions = form["affinity_actions"]
    assert dict(actions.field.choices)[""] == "not sent with dynamo-headers"
    assert actions.field.widget.attrs.get("disabled") is True
    assert form["client_workers_per_host"].field.widget.attrs.get("disabled") is True
    html = page.content.decode()
    assert "scenario: bind" not in html
    (per_host,) = re.findall(r"<input[^>]*id_client_workers_per_host[^>]*>", html)
    assert " disabled" in per_host
    (select,) = re.findall(r"<select[^>]*id_affinity_actions[^>]*>", html)
    assert " disabled" in select
