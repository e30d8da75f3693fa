"""A run tells its story where people look (issue 16): the run log's lifecycle lines (claimed,
started, the preflight and affinity check, stopped and why, saved), and run-end webhooks
delivered to a real local HTTP server (signed, retried once, never failing the run)."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from aiperf_web.core.errors import Invalid
from aiperf_web.runs import executing
from aiperf_web.runs import services as run_services
from aiperf_web.runs.models import Run, Status
from aiperf_web.scenarios.models import Scenario
from aiperf_web.scenarios.services import scenario_webhook_set
from aiperf_web.teams.models import Team
from aiperf_web.teams.services import team_webhook_set
from tests.web.conftest import World


@dataclass
class Capture:
    """A receiver on loopback: records each POST (path, headers, raw body) and answers with
    the next of `statuses` (the last one repeats)."""

    url: str
    statuses: list[int] = field(default_factory=lambda: [200])
    seen: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
def capture() -> Iterator[Capture]:
    box = Capture(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            box.seen.append(
                {
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "body": body,
                }
            )
            status = box.statuses[min(len(box.seen), len(box.statuses)) - 1]
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    box.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield box
    server.shutdown()
    server.server_close()


def _run_simulated(world: World, **overrides: Any) -> Run:
    launched = run_services.run_launch(
        actor=world.owner,
        scenario_id=world.scenario.uuid,
        endpoint_id="simulated",
        overrides={"duration_s": 30, "snapshot_interval_s": 5, **overrides},
        enqueue=False,
    )
    executing.run_execute(run_uuid=str(launched.uuid), worker="lifecycle-test:1")
    return Run.objects.select_related("team", "scenario").get(pk=launched.pk)


def _log(run: Run) -> list[str]:
    return list(run.log_lines.order_by("id").values_list("message", flat=True))


# -- lifecycle lines --------------------------------------------------------------------------


def test_the_run_log_says_claimed_started_stopped_by_its_duration_and_saved(
    transactional_db: Any, mock_url: str
) -> None:
    world = World(mock_url)
    run = _run_simulated(world)
    assert run.status == Status.SUCCEEDED
    lines = _log(run)
    assert lines[0].startswith("claimed by worker lifecycle-test:1 after ")
    assert lines[1].startswith("started: spawn-pin routing, affinity none, 2 lanes on ")
    assert "until 30 s" in lines[1] and "simulated cluster" in lines[1]
    assert "virtual time" in lines[1]
    stopped = [line for line in lines if line.startswith("stopped: ")]
    assert stopped == ["stopped: its duration (30 s) was reached"], lines
    saved = lines[-1]
    assert saved.startswith("saved (succeeded): ") and f"{run.records_count} records" in saved
    assert lines.index(stopped[0]) == len(lines) - 2


def test_a_live_run_log_has_the_preflight_outcome_and_the_affinity_check(
    transactional_db: Any, mock_url: str
) -> None:
    world = World(mock_url)
    launched = run_services.run_launch(
        actor=world.owner,
        scenario_id=world.scenario.uuid,
        endpoint_id=world.endpoint.uuid,
        overrides={"duration_s": 1, "affinity": "dynamo-headers"},
        enqueue=False,
    )
    executing.run_execute(run_uuid=str(launched.uuid), worker="lifecycle-test:2")
    run = Run.objects.get(pk=launched.pk)
    lines = _log(run)
    text = "\n".join(lines)
    assert run.status == Status.SUCCEEDED, (run.reason, text)
    assert "against alpha-mock (" in text
    preflight = next(line for line in lines if line.startswith("preflight passed: "))
    assert "answered" in preflight and "cached tokens reported" in preflight
    assert any(line.startswith("affinity check passed: ") for line in lines), text
    order = [
        next(i for i, line in enumerate(lines) if line.startswith(prefix))
        for prefix in ("claimed", "started", "preflight", "affinity check", "stopped", "saved")
    ]
    assert order == sorted(order), text


# -- run-end webhooks ---------------------------------------------------------------------------


def test_a_run_that_ends_posts_a_signed_json_body_to_its_scenario_and_team_webhooks(
    transactional_db: Any, mock_url: str, capture: Capture, settings: Any
) -> None:
    settings.AIPERF_PUBLIC_URL = "https://perf.example.com/"
    world = World(mock_url)
    scenario_webhook_set(
        actor=world.teammate, scenario=world.scenario, url=f"{capture.url}/ci", secret="s3cret"
    )
    team_webhook_set(actor=world.owner, team=world.team, url=f"{capture.url}/chat")
    run = _run_simulated(world)
    assert run.status == Status.SUCCEEDED
    assert [hit["path"] for hit in capture.seen] == ["/ci", "/chat"]
    ci, chat = capture.seen
    assert ci["body"] == chat["body"]
    body = json.loads(ci["body"])
    assert body["event"] == "run.ended" and body["run_id"] == str(run.uuid)
    assert body["name"] == "alpha-scenario on simulated cluster"
    assert body["status"] == "succeeded" and body["team"] == "alpha"
    summary = run.summary or {}
    assert body["figures"]["requests"] == summary["requests"] > 0
    assert body["figures"]["cut_by_stop"] == 0
    assert body["figures"]["output_tokens_per_s"] == summary["output_tokens_per_s"]
    # No baseline: the run's own checks judge it (it drained, no error, nothing cut).
    assert body["verdict"]["verdict"] == "pass" and body["verdict"]["baseline_id"] is None
    assert {c["key"]: c["status"] for c in body["verdict"]["run_checks"]} == {
        "status": "pass", "drain": "pass", "error_share": "pass", "cut_by_stop_share": "pass",
        "slo_goodput": "n/a",
    }  # fmt: skip
    assert body["links"] == {
        "run": f"https://perf.example.com/runs/{run.uuid}/",
        "report": f"https://perf.example.com/reports/runs/{run.uuid}/report.html",
        "summary": f"https://perf.example.com/runs/{run.uuid}/summary.json",
    }
    expected = "sha256=" + hmac.new(b"s3cret", ci["body"], hashlib.sha256).hexdigest()
    assert ci["headers"]["x-aiperf-signature"] == expected
    assert "x-aiperf-signature" not in chat["headers"]
    assert ci["headers"]["x-aiperf-event"] == "run.ended"
    assert ci["headers"]["content-type"] == "application/json"
    lines = _log(run)
    assert f"scenario webhook {capture.url}/ci answered 200" in lines
    assert f"team webhook {capture.url}/chat answered 200" in lines
    assert "s3cret" not in json.dumps(lines) + ci["body"].decode()


def test_the_verdict_against_a_baseline_rides_in_the_webhook(
    transactional_db: Any, mock_url: str, capture: Capture
) -> None:
    world = World(mock_url)
    baseline = _run_simulated(world)
    Run.objects.filter(pk=baseline.pk).update(is_baseline=True)
    team_webhook_set(actor=world.owner, team=world.team, url=capture.url)
    run = _run_simulated(world)
    verdict = json.loads(capture.seen[-1]["body"])["verdict"]
    assert verdict["baseline_id"] == str(baseline.uuid)
    assert verdict["verdict"] in ("pass", "fail") and isinstance(verdict["regressions"], list)
    keys = {check["key"] for check in verdict["checks"]}
    assert {"ttft_ms.p99", "requests_per_s", "errors"} <= keys
    assert run.status == Status.SUCCEEDED


def test_a_failing_webhook_is_tried_twice_and_never_fails_the_run(
    transactional_db: Any, mock_url: str, capture: Capture
) -> None:
    capture.statuses = [503, 503]
    world = World(mock_url)
    team_webhook_set(actor=world.owner, team=world.team, url=capture.url)
    run = _run_simulated(world)
    assert run.status == Status.SUCCEEDED and len(capture.seen) == 2
    assert f"team webhook {capture.url} failed: HTTP 503" in _log(run)


def test_a_webhook_answering_after_one_failure_is_logged_as_the_second_try(
    transactional_db: Any, mock_url: str, capture: Capture
) -> None:
    capture.statuses = [500, 204]
    world = World(mock_url)
    team_webhook_set(actor=world.owner, team=world.team, url=capture.url)
    run = _run_simulated(world)
    assert len(capture.seen) == 2
    assert f"team webhook {capture.url} answered 204 (second try)" in _log(run)


def test_a_refused_body_is_not_sent_again_and_a_dead_receiver_fails_quietly(
    transactional_db: Any, mock_url: str, capture: Capture
) -> None:
    capture.statuses = [400]
    world = World(mock_url)
    team_webhook_set(actor=world.owner, team=world.team, url=capture.url)
    scenario_webhook_set(actor=world.owner, scenario=world.scenario, url="http://127.0.0.1:9/")
    run = _run_simulated(world)
    assert run.status == Status.SUCCEEDED and len(capture.seen) == 1
    lines = _log(run)
    assert f"team webhook {capture.url} failed: HTTP 400" in lines
    assert any(
        line.startswith("scenario webhook http://127.0.0.1:9/ failed: Connect") for line in lines
    )


# -- where a webhook may go, and who sets it -------------------------------------------------------


def test_a_webhook_url_outside_the_allowlist_is_refused_when_saved_and_when_sent(
    transactional_db: Any, mock_url: str, capture: Capture, settings: Any
) -> None:
    world = World(mock_url)
    for url, why in (
        ("http://10.1.2.3/hook", "webhook allowlist"),
        ("ftp://127.0.0.1/hook", "http:// or https://"),
        ("http://0177.0.0.1/hook", "four decimal numbers"),
    ):
        with pytest.raises(Invalid, match=why):
            team_webhook_set(actor=world.owner, team=world.team, url=url)
    assert Team.objects.get(pk=world.team.pk).webhook_url == ""
    team_webhook_set(actor=world.owner, team=world.team, url=capture.url)
    settings.AIPERF_WEBHOOK_ALLOWLIST = ["10.0.0.0/8"]  # narrowed after the URL was saved
    run = _run_simulated(world)
    assert capture.seen == []
    assert any("not in the webhook allowlist" in line for line in _log(run))


def test_a_redirect_is_not_followed(transactional_db: Any, mock_url: str, capture: Capture) -> None:
    capture.statuses = [302]
    world = World(mock_url)
    team_webhook_set(actor=world.owner, team=world.team, url=capture.url)
    run = _run_simulated(world)
    assert len(capture.seen) == 1 and f"team webhook {capture.url} failed: HTTP 302" in _log(run)


def test_team_webhooks_are_set_by_its_admins_and_scenario_webhooks_by_its_members(
    world: World, capture: Capture
) -> None:
    team_url = f"/team/{world.team.uuid}/webhook/"
    scenario_url = f"/scenarios/{world.scenario.uuid}/webhook/"
    form = {"webhook_url": capture.url, "webhook_secret": "s3cret-never-shown"}
    assert world.client("outsider").post(team_url, form).status_code == 404
    assert world.client("outsider").post(scenario_url, form).status_code == 404
    assert world.client("viewer").post(scenario_url, form).status_code == 403
    world.client("teammate").post(team_url, form)  # a member: refused with a message
    assert Team.objects.get(pk=world.team.pk).webhook_url == ""
    assert world.client("owner").post(team_url, form).status_code == 302
    assert world.client("teammate").post(scenario_url, form).status_code == 302
    team = Team.objects.get(pk=world.team.pk)
    scenario = Scenario.objects.get(pk=world.scenario.pk)
    assert team.webhook_url == scenario.webhook_url == capture.url
    assert team.webhook_secret and "s3cret-never-shown" not in team.webhook_secret
    page = world.client("owner").get("/team/").content.decode()
    assert capture.url in page and "s3cret-never-shown" not in page and "blank keeps it" in page
    # Blank secret keeps it; the checkbox removes it; a blank URL removes both.
    world.client("owner").post(team_url, {"webhook_url": capture.url})
    assert Team.objects.get(pk=world.team.pk).webhook_secret == team.webhook_secret
    world.client("owner").post(team_url, {"webhook_url": capture.url, "webhook_clear_secret": "1"})
    assert Team.objects.get(pk=world.team.pk).webhook_secret == ""
    world.client("teammate").post(scenario_url, {"webhook_url": ""})
    scenario.refresh_from_db()
    assert scenario.webhook_url == "" and scenario.webhook_secret == ""
    shown = world.client("viewer").get(f"/scenarios/{world.scenario.uuid}/").content.decode()
    assert "Run-end webhook" in shown and 'name="webhook_url"' not in shown
