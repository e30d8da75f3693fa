"""Hardening (issue 13 item 7): plain role messages, one log line per 403, a throttled login,
security headers on every page, secret endpoint headers, and live sockets that close when
their viewer loses access."""

from __future__ import annotations

import logging

import pytest

from tests.web.conftest import World


def test_a_member_refused_an_admin_action_is_told_it_needs_the_admin_role(
    world: World,
) -> None:
    response = world.client("teammate").post(
        f"/team/{world.team.uuid}/members/", {"username": "viewer", "role": "member"}
    )
    assert response.status_code == 403
    text = response.content.decode()
    assert "admin or admin" not in text
    assert "your role in team alpha is member; this needs the admin role" in text


def test_a_viewer_refused_a_member_action_is_told_member_or_admin(world: World) -> None:
    response = world.client("viewer").post(f"/runs/{world.run.uuid}/rerun/")
    assert response.status_code == 403
    assert "needs member or admin" in response.content.decode()


def test_a_403_logs_one_line_without_a_traceback(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="django.request"):
        assert world.client("viewer").post(f"/runs/{world.run.uuid}/rerun/").status_code == 403
    records = [r for r in caplog.records if r.name == "django.request"]
    assert len(records) == 1
    record = records[0]
    assert record.exc_info is None and not record.exc_text
    line = logging.Formatter().format(record)
    assert "\n" not in line
    assert f"/runs/{world.run.uuid}/rerun/" in line and "needs member or admin" in line
