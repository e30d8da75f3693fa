"""Every stored text a person types has a stated limit (issue 26 item 5), enforced in the API
schema (422 naming the field and the limit, and the OpenAPI schema's maxLength), in the forms
(a form error) and in the service every write goes through; lists never carry a run's whole
notes (cut, and saying so), the run's own answer does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from aiperf_web.core import limits
from aiperf_web.core.errors import Invalid
from aiperf_web.endpoints.models import Endpoint
from aiperf_web.runs import services as run_services
from aiperf_web.runs.models import Run
from aiperf_web.scenarios.models import Scenario, Trace
from aiperf_web.teams.models import ApiToken
from aiperf_web.teams.services import team_create
from tests.fixtures import DAG_FORK_FANOUT
from tests.web.conftest import World


def _post(world: World, path: str, body: dict[str, Any], *, method: str = "post") -> Any:
    return getattr(world.api("owner"), method)(
        path, json.dumps(body), content_type="application/json"
    )


def _refused(response: Any, field: str, limit: int) -> None:
    """422 whose errors name `field` with a message stating `limit`."""
    assert response.status_code == 422, response.content
    errors = {e["field"]: e["message"] for e in response.json()["errors"]}
    assert field in errors, errors
    assert str(limit) in errors[field], errors


# -- the API ---------------------------------------------------------------------------------


def test_a_launch_with_notes_past_the_limit_is_422_naming_it_and_stores_nothing(
    world: World,
) -> None:
    body = {"scenario": str(world.scenario.uuid), "endpoint": "simulated"}
    # The reported case: a 9.9 MB note, under the 10 MB body cap, was stored twice.
    _refused(_post(world, "/api/v1/runs", {**body, "notes": "x" * 9_900_000}), "notes", 10_000)
    _refused(_post(world, "/api/v1/runs", {**body, "notes": "x" * 10_001}), "notes", 10_000)
    assert Run.objects.filter(team=world.team).count() == 1  # only the fixture's
    at_limit = _post(world, "/api/v1/runs", {**body, "notes": "x" * limits.NOTES_CHARS})
    assert at_limit.status_code == 201, at_limit.content
    assert len(at_limit.json()["notes"]) == limits.NOTES_CHARS


@pytest.mark.parametrize(
    ("body", "field", "limit"),
    [
        ({"notes": "n" * 10_001}, "notes", 10_000),
        ({"tags": ["t"] * 21}, "tags", 20),
        ({"tags": ["t" * 41]}, "tags.0", 40),
    ],
)
def test_editing_a_run_past_a_limit_is_422_and_changes_nothing(
    world: World, body: dict[str, Any], field: str, limit: int
) -> None:
    _refused(_post(world, f"/api/v1/runs/{world.run.uuid}", body, method="patch"), field, limit)
    world.run.refresh_from_db()
    assert world.run.notes == "" and world.run.tags == ""


def test_the_baseline_flag_is_a_json_boolean_not_a_number(world: World) -> None:
    # The schema says boolean: 0 and 1 were taken as false and true.
    response = _post(world, f"/api/v1/runs/{world.run.uuid}", {"is_baseline": 0}, method="patch")
    assert response.status_code == 422
    assert "is_baseline" in {e["field"] for e in response.json()["errors"]}


def test_run_lists_cut_long_notes_and_say_so_the_run_itself_has_them_whole(world: World) -> None:
    long_notes = "first words " + "y" * (limits.NOTES_CHARS - 12)
    run_services.run_update(actor=world.owner, run_obj=world.run, notes=long_notes)
    api = world.api("owner")
    short = _post(world, "/api/v1/runs", {"scenario": str(world.scenario.uuid), "notes": "brief"})
    assert short.status_code == 201

    items = {i["id"]: i for i in api.get("/api/v1/runs?limit=50").json()["items"]}
    listed = items[str(world.run.uuid)]
    assert listed["notes"] == long_notes[: limits.NOTES_LIST_CHARS]
    assert listed["notes_truncated"] is True
    assert items[short.json()["id"]]["notes"] == "brief"
    assert items[short.json()["id"]]["notes_truncated"] is False

    whole = api.get(f"/api/v1/runs/{world.run.uuid}").json()
    assert whole["notes"] == long_notes and whole["notes_truncated"] is False


def test_a_list_of_runs_with_the_longest_notes_stays_small(world: World) -> None:
    # The reported list: 50 runs answered 19.9 MB. Each now carries at most 200 characters of
    # notes, whatever the run holds.
    for _ in range(5):
        created = _post(
            world,
            "/api/v1/runs",
            {"scenario": str(world.scenario.uuid), "notes": "z" * limits.NOTES_CHARS},
        )
        assert created.status_code == 201
    body = world.api("owner").get("/api/v1/runs?limit=50").content
    assert b"z" * (limits.NOTES_LIST_CHARS + 1) not in body
    assert body.count(b"z" * limits.NOTES_LIST_CHARS) == 5


def _endpoint(**changes: Any) -> dict[str, Any]:
    return {"name": "e2", "base_url": "http://127.0.0.1:8100", "model": "m", **changes}


@pytest.mark.parametrize(
    ("path", "body", "field", "limit"),
    [
        ("/api/v1/endpoints", _endpoint(name="n" * 101), "name", 100),
        ("/api/v1/endpoints", _endpoint(base_url="http://h/" + "p" * 500), "base_url", 500),
        ("/api/v1/endpoints", _endpoint(model="m" * 201), "model", 200),
        ("/api/v1/endpoints", _endpoint(api_key="k" * 4097), "api_key", 4096),
        (
            "/api/v1/endpoints",
            _endpoint(extra_headers={"X-A": "v" * 8193}),
            "extra_headers.X-A",
            8192,
        ),
        (
            "/api/v1/endpoints",
            _endpoint(secret_headers={f"X-{n}": "v" for n in range(65)}),
            "secret_headers",
            64,
        ),
        ("/api/v1/scenarios", {"name": "s" * 101}, "name", 100),
        ("/api/v1/scenarios", {"name": "s", "description": "d" * 5001}, "description", 5000),
        ("/api/v1/scenarios", {"name": "s", "tags": ["t"] * 21}, "tags", 20),
    ],
)
def test_every_stored_text_of_the_api_has_a_limit_it_names(
    world: World, path: str, body: dict[str, Any], field: str, limit: int
) -> None:
    _refused(_post(world, path, body), field, limit)
    assert Endpoint.objects.filter(team=world.team).count() == 1
    assert Scenario.objects.filter(team=world.team).count() == 1


def test_a_trace_name_past_its_limit_is_422(world: World) -> None:
    upload = SimpleUploadedFile("t.jsonl", DAG_FORK_FANOUT.read_bytes())
    response = world.api("owner").post("/api/v1/traces", {"file": upload, "name": "n" * 201})
    _refused(response, "name", 200)
    assert Trace.objects.filter(team=world.team).count() == 1


def test_a_header_name_past_its_limit_is_named_by_its_start_not_echoed(world: World) -> None:
    response = _post(world, "/api/v1/endpoints", _endpoint(extra_headers={"H" * 100_000: "v"}))
    assert response.status_code == 422
    assert len(response.content) < 2_000
    assert "100000 characters" in response.content.decode()


def test_a_run_override_of_the_targets_headers_is_held_to_the_engines_bounds(
    world: World,
) -> None:
    response = _post(
        world,
        "/api/v1/runs",
        {
            "scenario": str(world.scenario.uuid),
            "endpoint": str(world.endpoint.uuid),
            "overrides": {"target": {"headers": {"X-Big": "v" * 8193}}},
        },
    )
    _refused(response, "overrides.target.headers.X-Big", 8192)


def test_the_openapi_schema_states_each_limit(world: World) -> None:
    schema = world.api("anonymous").get("/api/v1/openapi.json").json()
    shapes = schema["components"]["schemas"]

    def prop(shape: str, name: str) -> dict[str, Any]:
        node = shapes[shape]["properties"][name]
        # An optional field is anyOf [its type, null].
        return next((n for n in node.get("anyOf", [node]) if n.get("type") != "null"), node)

    expected = {
        ("RunCreate", "notes"): ("maxLength", 10_000),
        ("RunCreate", "tags"): ("maxItems", 20),
        ("RunPatch", "notes"): ("maxLength", 10_000),
        ("RunItem", "notes"): ("maxLength", 200),
        ("RunDetailOut", "notes"): ("maxLength", 10_000),
        ("EndpointIn", "name"): ("maxLength", 100),
        ("EndpointIn", "base_url"): ("maxLength", 500),
        ("EndpointIn", "model"): ("maxLength", 200),
        ("EndpointIn", "api_key"): ("maxLength", 4096),
        ("EndpointIn", "extra_headers"): ("maxProperties", 64),
        ("EndpointPatch", "secret_headers"): ("maxProperties", 64),
        ("ScenarioIn", "name"): ("maxLength", 100),
        ("ScenarioIn", "description"): ("maxLength", 5000),
        ("ScenarioIn", "traces"): ("maxItems", 100),
        ("ScenarioPatch", "description"): ("maxLength", 5000),
        ("ScenarioOut", "description"): ("maxLength", 5000),
    }
    for (shape, name), (keyword, value) in expected.items():
        assert prop(shape, name).get(keyword) == value, (shape, name, prop(shape, name))
    assert prop("RunCreate", "tags")["items"]["maxLength"] == 40
    headers = prop("EndpointIn", "extra_headers")
    assert headers["propertyNames"]["maxLength"] == 256
    assert headers["additionalProperties"]["maxLength"] == 8192
    upload = schema["paths"]["/api/v1/traces"]["post"]["requestBody"]["content"]
    form = next(iter(upload.values()))["schema"]
    form = shapes[form["$ref"].rsplit("/", 1)[1]] if "$ref" in form else form
    assert form["properties"]["name"]["maxLength"] == 200


# -- the pages -------------------------------------------------------------------------------


def test_the_launch_form_refuses_notes_past_the_limit_with_a_form_error(world: World) -> None:
    response = world.client("teammate").post(
        "/runs/new/",
        {"scenario": str(world.scenario.uuid), "target": "simulated", "notes": "x" * 10_001},
    )
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert "10000" in " ".join(errors["notes"])
    assert Run.objects.filter(team=world.team).count() == 1


def test_the_run_page_says_why_notes_past_the_limit_were_not_saved(world: World) -> None:
    client = world.client("teammate")
    response = client.post(
        f"/runs/{world.run.uuid}/meta/", {"tags": "", "notes": "x" * 10_001}, follow=True
    )
    text = response.content.decode()
    assert "Not saved: notes:" in text and "10000" in text
    world.run.refresh_from_db()
    assert world.run.notes == ""


@pytest.mark.parametrize(
    ("path", "data", "field", "limit"),
    [
        ("/scenarios/new/", {"name": "s", "description": "d" * 5001}, "description", 5000),
        (
            "/endpoints/new/",
            {"name": "e", "base_url": "http://127.0.0.1:8100", "model": "m" * 201},
            "model",
            200,
        ),
        (
            "/endpoints/new/",
            {"name": "e", "base_url": "http://127.0.0.1:8100", "model": "m", "api_key": "k" * 4097},
            "api_key",
            4096,
        ),
    ],
)
def test_forms_refuse_text_past_its_limit_next_to_the_field(
    world: World, path: str, data: dict[str, str], field: str, limit: int
) -> None:
    response = world.client("owner").post(path, {"server_kind": "openai", **data})
    assert response.status_code == 200
    assert str(limit) in " ".join(response.context["form"].errors[field])
    assert Scenario.objects.filter(team=world.team).count() == 1
    assert Endpoint.objects.filter(team=world.team).count() == 1


def test_a_page_form_with_headers_past_the_limit_gets_a_form_error(world: World) -> None:
    response = world.client("owner").post(
        "/endpoints/new/",
        {
            "name": "e",
            "base_url": "http://127.0.0.1:8100",
            "model": "m",
            "server_kind": "openai",
            "extra_headers": json.dumps({"X-A": "v" * 8193}),
        },
    )
    assert response.status_code == 200
    assert "8192" in " ".join(response.context["form"].errors["extra_headers"])


def test_a_token_name_past_its_limit_is_refused_with_a_message(world: World) -> None:
    before = ApiToken.objects.filter(user=world.owner).count()
    response = world.client("owner").post("/team/tokens/new/", {"name": "n" * 101}, follow=True)
    assert "name: at most 100 characters" in response.content.decode()
    assert ApiToken.objects.filter(user=world.owner).count() == before
    page = world.client("owner").get("/team/").content.decode()
    assert 'maxlength="100"' in page and 'maxlength="500"' in page  # token name, webhook URL


# -- the services (every write, whatever calls it) -------------------------------------------


def test_the_services_refuse_text_past_its_limit_naming_the_field(world: World) -> None:
    with pytest.raises(Invalid) as notes:
        run_services.run_launch(
            actor=world.owner, scenario_id=world.scenario.uuid, notes="x" * 10_001
        )
    assert "10000" in notes.value.fields["notes"]
    with pytest.raises(Invalid) as team:
        team_create(name="t" * 101, owner=world.owner)
    assert "100" in team.value.fields["name"]
    from aiperf_web.scenarios.services import scenario_update

    with pytest.raises(Invalid) as described:
        scenario_update(actor=world.owner, scenario=world.scenario, description="d" * 5001)
    assert "5000" in described.value.fields["description"]
