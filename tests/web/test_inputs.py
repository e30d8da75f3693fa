"""Bad input anywhere gets a 4xx naming the problem, never a 500 and never a half-saved object;
secrets stay secret; the pieces behave as their docstrings promise."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.utils import timezone

from aiperf_web.endpoints.models import Endpoint
from aiperf_web.runs.claiming import run_claim, runs_reap_stale
from aiperf_web.runs.models import Run, RunSample, Status
from aiperf_web.scenarios.models import Scenario, Trace
from aiperf_web.teams.models import ApiToken
from tests.fixtures import DAG_FORK_FANOUT
from tests.web.conftest import World

JSON = "application/json"


def _errors(response: object) -> dict[str, str]:
    body = response.json()  # type: ignore[attr-defined]
    return {e["field"]: e["message"] for e in body["errors"]}


def test_bad_run_overrides_are_422_naming_the_field(world: World) -> None:
    api = world.api("owner")
    base = {"scenario": str(world.scenario.uuid), "endpoint": str(world.endpoint.uuid)}
    for overrides, field in (
        ({"duration_s": -1}, "overrides.duration_s"),
        ({"concurrency": "many"}, "overrides.concurrency"),
        ({"policy": "sticky"}, "overrides.policy"),
        ({"no_such_knob": 1}, "overrides.no_such_knob"),
        ({"start_window": [0.9, 0.1]}, "overrides.start_window"),
        ({"timing": "rate"}, "overrides"),
        ({"target": {"url": "http://127.0.0.1:9"}}, "overrides.target.url"),
        ({"target": {"metrics_url": "ftp://x"}}, "overrides.target.metrics_url"),
        # Scrapes are outbound traffic: the endpoint's allowlist applies.
        (
            {"target": {"metrics_url": "http://10.9.8.7:9090/metrics"}},
            "overrides.target.metrics_url",
        ),
        ({"workload": {"traces": ["/etc/passwd"]}}, "overrides.workload"),
    ):
        response = api.post("/api/v1/runs", {**base, "overrides": overrides}, content_type=JSON)
        assert response.status_code == 422, (overrides, response.content)
        assert any(f.startswith(field) for f in _errors(response)), (field, _errors(response))
    assert Run.objects.filter(team=world.team).count() == 1  # only the fixture's


def test_malformed_bodies_are_4xx_json(world: World) -> None:
    api = world.api("owner")
    assert api.post("/api/v1/runs", "{not json", content_type=JSON).status_code in (400, 422)
    assert api.post("/api/v1/runs", [], content_type=JSON).status_code == 422
    missing = api.post("/api/v1/runs", {}, content_type=JSON)
    assert missing.status_code == 422 and "scenario" in _errors(missing)
    for bad in ("nope", "00000000-0000-0000-0000-000000000000"):
        response = api.post("/api/v1/runs", {"scenario": bad}, content_type=JSON)
        assert response.status_code == 404, bad
    assert api.get("/api/v1/runs?limit=0").status_code == 422
    assert api.get("/api/v1/runs?status=bogus").status_code == 422
    assert api.get("/api/v1/runs?created_from=yesterday").status_code == 422
    assert api.get("/api/v1/runs/not-a-uuid").status_code == 404


def test_an_endpoint_of_another_team_cannot_be_used_even_by_id(world: World) -> None:
    theirs = Endpoint.objects.create(
        team=world.other_team, name="theirs", base_url="http://127.0.0.1:1", model="m"
    )
    response = world.api("owner").post(
        "/api/v1/runs",
        {"scenario": str(world.scenario.uuid), "endpoint": str(theirs.uuid)},
        content_type=JSON,
    )
    assert response.status_code == 404


def test_a_scenario_that_would_not_validate_is_not_saved(world: World) -> None:
    api = world.api("owner")
    response = api.post(
        "/api/v1/scenarios",
        {"name": "bad", "spec": {"concurrency": 0}, "traces": [str(world.trace.uuid)]},
        content_type=JSON,
    )
    assert response.status_code == 422 and any("concurrency" in f for f in _errors(response))
    assert not Scenario.objects.filter(name="bad").exists()
    good = api.post(
        "/api/v1/scenarios",
        {"name": "synthetic", "spec": {"duration_s": 5}, "tags": ["x"]},
        content_type=JSON,
    )
    assert good.status_code == 201, good.content
    assert good.json()["spec"]["duration_s"] == 5


def test_a_broken_trace_upload_names_the_line_and_saves_nothing(world: World) -> None:
    before = Trace.objects.count()
    broken = (
        b'{"session_id": "a", "turns": [{"messages": [{"role": "user", "content": "hi"}]}]}\n'
        b'{"session_id": "b", "turns": [\n'
    )
    response = world.api("owner").post(
        "/api/v1/traces", {"file": SimpleUploadedFile("broken.dag.jsonl", broken)}
    )
    assert response.status_code == 422, response.content
    message = _errors(response)["file"]
    assert "broken.dag.jsonl" in message and ":2" in message
    assert "/tmp" not in message
    assert Trace.objects.count() == before


def test_an_uploaded_trace_is_validated_and_stored_with_its_statistics(world: World) -> None:
    sample = DAG_FORK_FANOUT.read_bytes()
    response = world.api("teammate").post(
        "/api/v1/traces", {"file": SimpleUploadedFile("fanout.dag.jsonl", sample), "name": "fanout"}
    )
    assert response.status_code == 201, response.content
    stats = response.json()["stats"]
    assert response.json()["format"] == "dag_jsonl"
    assert stats["fork_children"] > 0 and stats["requests"] > 0


def test_the_upload_page_shows_the_loader_error_next_to_the_field(world: World) -> None:
    response = world.client("owner").post(
        "/traces/",
        {"action": "upload", "upload-file": SimpleUploadedFile("x.jsonl", b"not json at all\n")},
    )
    assert response.status_code == 200
    assert b'class="error"' in response.content and b"x.jsonl" in response.content


def test_endpoint_keys_are_encrypted_and_outside_hosts_refused(world: World) -> None:
    stored = Endpoint.objects.get(pk=world.endpoint.pk).api_key_encrypted
    assert stored and "sk-alpha-secret" not in stored
    response = world.api("owner").post(
        "/api/v1/endpoints",
        {"name": "far", "base_url": "http://10.9.8.7:8000", "model": "m"},
        content_type=JSON,
    )
    assert response.status_code == 422 and "allowlist" in _errors(response)["base_url"]
    bad_url = world.api("owner").post(
        "/api/v1/endpoints", {"name": "x", "base_url": "ftp://x", "model": "m"}, content_type=JSON
    )
    assert bad_url.status_code == 422 and "base_url" in _errors(bad_url)


def test_test_connection_reports_the_preflight_message(world: World) -> None:
    ok = world.api("owner").post(f"/api/v1/endpoints/{world.endpoint.uuid}/test").json()
    assert ok["ok"] is True
    Endpoint.objects.filter(pk=world.endpoint.pk).update(model="missing-model")
    failed = world.api("owner").post(f"/api/v1/endpoints/{world.endpoint.uuid}/test").json()
    assert failed["ok"] is False and "missing-model" in failed["message"]


def test_api_tokens_are_hashed_revocable_and_record_their_last_use(world: World) -> None:
    raw = world.tokens["owner"]
    token = ApiToken.objects.get(user=world.owner)
    assert raw not in (token.digest, token.prefix) and token.last_used_at is None
    assert world.api("owner").get("/api/v1/teams").status_code == 200
    token.refresh_from_db()
    assert token.last_used_at is not None
    client = world.client("owner")
    assert client.post(f"/team/tokens/{token.uuid}/revoke/").status_code == 302
    assert world.api("owner").get("/api/v1/teams").status_code == 401


def test_a_token_created_on_the_team_page_is_shown_once(world: World) -> None:
    client = world.client("teammate")
    client.post("/team/tokens/new/", {"name": "ci"})
    first = client.get("/team/").content.decode()
    token = ApiToken.objects.get(user=world.teammate, name="ci")
    assert token.prefix in first and "aip_" in first.split("not shown again", 1)[1][:400]
    assert "not shown again" not in client.get("/team/").content.decode()


def test_create_api_token_prints_a_working_token(world: World) -> None:
    out = io.StringIO()
    call_command("create_api_token", "viewer", stdout=out)
    from django.test import Client

    client = Client(HTTP_AUTHORIZATION=f"Bearer {out.getvalue().strip()}")
    assert client.get("/api/v1/scenarios").status_code == 200


def test_only_admins_manage_members_and_a_team_keeps_an_admin(world: World) -> None:
    url = f"/team/{world.team.uuid}/members/"
    assert (
        world.client("teammate").post(url, {"username": "outsider", "role": "viewer"}).status_code
        == 403
    )
    world.client("owner").post(url, {"username": "outsider", "role": "viewer"})
    assert world.team.memberships.filter(user=world.outsider, role="viewer").exists()
    world.client("owner").post(url, {"username": "owner", "role": "member"})
    assert world.team.memberships.get(user=world.owner).role == "admin"


def test_the_claim_succeeds_for_exactly_one_worker(world: World) -> None:
    run = Run.objects.create(
        team=world.team, scenario_name="s", endpoint_name="e", target_kind="simulated", spec={}
    )
    assert run_claim(run_uuid=str(run.uuid), worker="a") is True
    assert run_claim(run_uuid=str(run.uuid), worker="b") is False
    run.refresh_from_db()
    assert run.status == Status.RUNNING and run.worker == "a"


def test_a_run_whose_worker_went_silent_is_marked_failed(world: World) -> None:
    run = Run.objects.create(
        team=world.team,
        scenario_name="s",
        endpoint_name="e",
        target_kind="simulated",
        spec={},
        status=Status.RUNNING,
        heartbeat_at=timezone.now() - timedelta(minutes=5),
    )
    fresh = Run.objects.create(
        team=world.team,
        scenario_name="s",
        endpoint_name="e",
        target_kind="simulated",
        spec={},
        status=Status.RUNNING,
        heartbeat_at=timezone.now(),
    )
    RunSample.objects.create(run=run, seq=0, t_s=1.0, data={})
    assert runs_reap_stale(older_than_s=60) == 1
    run.refresh_from_db()
    fresh.refresh_from_db()
    assert run.status == Status.FAILED and "stopped responding" in run.reason
    assert run.samples_count == 1
    assert fresh.status == Status.RUNNING


def test_cancelling_a_queued_run_ends_it_at_once(world: World) -> None:
    created = (
        world.api("owner")
        .post(
            "/api/v1/runs",
            {"scenario": str(world.scenario.uuid), "endpoint": "simulated"},
            content_type=JSON,
        )
        .json()
    )
    body = world.api("owner").post(f"/api/v1/runs/{created['id']}/cancel").json()
    assert body["status"] == "cancelled"
    assert run_claim(run_uuid=created["id"], worker="late") is False


def test_run_list_filters_and_paginates(world: World) -> None:
    api = world.api("owner")
    for i in range(3):
        api.post(
            "/api/v1/runs",
            {"scenario": str(world.scenario.uuid), "endpoint": "simulated", "tags": [f"t{i}"]},
            content_type=JSON,
        )
    assert api.get("/api/v1/runs?status=queued").json()["count"] == 3
    assert api.get("/api/v1/runs?tag=t1").json()["count"] == 1
    assert api.get("/api/v1/runs?endpoint=simulated").json()["count"] == 3
    page = api.get("/api/v1/runs?limit=2&offset=2").json()
    assert page["count"] == 4 and len(page["items"]) == 2
    assert world.client("owner").get("/runs/?status=queued&tag=t2").status_code == 200


def test_records_jsonl_streams_counted_requests_unless_warmup_is_asked_for(world: World) -> None:
    api = world.api("owner")
    counted = b"".join(api.get(f"/api/v1/runs/{world.run.uuid}/records.jsonl").streaming_content)
    everything = b"".join(
        api.get(
            f"/api/v1/runs/{world.run.uuid}/records.jsonl?include_warmup=true"
        ).streaming_content
    )
    assert len(counted.splitlines()) == 2 and len(everything.splitlines()) == 3
    csv = api.get(f"/api/v1/runs/{world.run.uuid}/summary.csv").content.decode()
    assert "ttft_ms.p50,1.0" in csv


def test_the_launch_form_shows_spec_errors_next_to_the_field(world: World) -> None:
    response = world.client("owner").post(
        "/runs/new/",
        {
            "scenario": str(world.scenario.uuid),
            "target": str(world.endpoint.uuid),
            "concurrency": "0",
        },
    )
    assert response.status_code == 200
    assert b"has-error" in response.content
    assert Run.objects.filter(team=world.team).count() == 1


def test_the_launch_form_queues_a_run(world: World) -> None:
    response = world.client("teammate").post(
        "/runs/new/",
        {
            "scenario": str(world.scenario.uuid),
            "target": "simulated",
            "duration_s": "30",
            "policy": "legacy",
        },
    )
    assert response.status_code == 302
    run = Run.objects.exclude(pk=world.run.pk).get()
    assert run.status == Status.QUEUED and run.spec["policy"] == "legacy"
    assert run.spec["target"]["kind"] == "simulated"


def test_the_scenario_form_saves_every_knob_through_the_run_spec(world: World) -> None:
    client = world.client("owner")
    form = client.get("/scenarios/new/").context["form"]
    from runner import RunSpec

    assert set(RunSpec.model_fields) - {"workload", "target"} <= set(form.fields)
    data = {k: v for k, v in form.initial.items() if not isinstance(v, bool) or v}
    data.update(name="from-form", traces=[str(world.trace.uuid)], policy="legacy", duration_s="45")
    data = {k: (v if isinstance(v, list) else str(v)) for k, v in data.items()}
    response = client.post("/scenarios/new/", data)
    assert response.status_code == 302, response.context["form"].errors if response.context else ""
    scenario = Scenario.objects.get(name="from-form")
    assert scenario.spec["policy"] == "legacy" and scenario.spec["duration_s"] == 45
    bad = client.post("/scenarios/new/", {**data, "name": "bad-form", "start_window": "x:y"})
    assert bad.status_code == 200 and not Scenario.objects.filter(name="bad-form").exists()


@pytest.mark.parametrize("path", ["/health/", "/api/v1/openapi.json"])
def test_public_routes_answer_without_login(client: object, path: str) -> None:
    assert client.get(path).status_code == 200  # type: ignore[attr-defined]


def test_launch_form_choices_left_blank_keep_the_scenarios_values(world: World) -> None:
    Scenario.objects.filter(pk=world.scenario.pk).update(
        spec={
            **world.scenario.spec,
            "policy": "legacy",
            "affinity": "dynamo-nvext",
            "scope": "lineage",
        }
    )
    form = world.client("owner").get("/runs/new/").context["form"]
    assert form.fields["policy"].choices[0][0] == ""
    response = world.client("owner").post(
        "/runs/new/",
        {
            "scenario": str(world.scenario.uuid),
            "target": "simulated",
            "policy": "",
            "affinity": "",
            "scope": "",
        },
    )
    assert response.status_code == 302
    run = Run.objects.exclude(pk=world.run.pk).get()
    assert (run.spec["policy"], run.spec["affinity"], run.spec["scope"]) == (
        "legacy",
        "dynamo-nvext",
        "lineage",
    )


def test_records_stream_chunk_by_chunk_under_asgi(world: World) -> None:
    from asgiref.sync import async_to_sync
    from django.test import AsyncClient

    from aiperf_web.runs.sink import records_insert

    records_insert(
        run_pk=world.run.pk,
        first_seq=3,
        batch=[{"request_id": i, "warmup": False} for i in range(4, 4500)],  # type: ignore[misc]
    )
    client = AsyncClient()
    auth = {"Authorization": f"Bearer {world.tokens['owner']}"}

    async def fetch() -> tuple[bool, list[bytes]]:
        response = await client.get(f"/api/v1/runs/{world.run.uuid}/records.jsonl", headers=auth)
        assert response.status_code == 200, response.content
        return response.is_async, [chunk async for chunk in response.streaming_content]

    is_async, chunks = async_to_sync(fetch)()
    assert is_async and len(chunks) == 3  # 2000-row chunks, never the whole set at once
    lines = b"".join(chunks).splitlines()
    assert len(lines) == 2 + 4496
