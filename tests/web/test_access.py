"""Every page and API route against the three personas and anonymous: each sees exactly what
it should. Owner and teammate are in team alpha (admin, member), the outsider only in beta."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fixtures import DAG_SPAWN
from tests.web.conftest import World, samples_dir_with

PERSONAS = ("owner", "teammate", "outsider", "anonymous")


def _pages(w: World) -> dict[str, str]:
    return {
        "runs": "/runs/",
        "run_new": "/runs/new/",
        "run": f"/runs/{w.run.uuid}/",
        "run_records": f"/runs/{w.run.uuid}/records.jsonl",
        "run_csv": f"/runs/{w.run.uuid}/summary.csv",
        "run_json": f"/runs/{w.run.uuid}/summary.json",
        "scenarios": "/scenarios/",
        "scenario_new": "/scenarios/new/",
        "scenario": f"/scenarios/{w.scenario.uuid}/",
        "scenario_edit": f"/scenarios/{w.scenario.uuid}/?edit=1",
        "traces": "/traces/",
        "trace": f"/traces/{w.trace.uuid}/",
        "endpoints": "/endpoints/",
        "endpoint_new": "/endpoints/new/",
        "endpoint": f"/endpoints/{w.endpoint.uuid}/",
        "team": "/team/",
    }


OBJECT_PAGES = {
    "run",
    "run_records",
    "run_csv",
    "run_json",
    "scenario",
    "scenario_edit",
    "trace",
    "endpoint",
}


@pytest.mark.parametrize("persona", PERSONAS)
def test_every_page_answers_each_persona_as_it_should(world: World, persona: str) -> None:
    client = world.client(persona)
    for name, url in _pages(world).items():
        response = client.get(url)
        if persona == "anonymous":
            assert response.status_code == 302, name
            assert response["Location"].startswith("/accounts/login/"), name
        elif persona == "outsider" and name in OBJECT_PAGES:
            assert response.status_code == 404, name
        else:
            assert response.status_code == 200, (name, response.status_code)


def test_lists_show_the_team_its_objects_and_hide_them_from_outsiders(world: World) -> None:
    for url, needle in (
        ("/runs/", world.scenario.name),
        ("/scenarios/", world.scenario.name),
        ("/traces/", world.trace.name),
        ("/endpoints/", world.endpoint.name),
        ("/team/", "teammate"),
    ):
        assert needle in world.client("teammate").get(url).content.decode(), url
        assert needle not in world.client("outsider").get(url).content.decode(), url


def _body(response: Any) -> bytes:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content)
    return bytes(response.content)


def test_pages_never_render_the_endpoint_api_key(world: World) -> None:
    for persona in ("owner", "teammate"):
        for url in _pages(world).values():
            assert b"sk-alpha-secret" not in _body(world.client(persona).get(url))


def test_login_page_is_public_and_logs_in(world: World) -> None:
    client = world.client("anonymous")
    assert client.get("/accounts/login/").status_code == 200
    response = client.post("/accounts/login/", {"username": "owner", "password": "pw-owner-1"})
    assert response.status_code == 302
    assert client.get("/runs/").status_code == 200


def test_bad_ids_in_page_urls_are_404_not_500(world: World) -> None:
    client = world.client("owner")
    for url in (
        "/runs/not-a-uuid/",
        "/scenarios/123/",
        "/endpoints/x/",
        "/traces/%20/",
        "/runs/00000000-0000-0000-0000-000000000000/",
    ):
        assert client.get(url).status_code == 404, url


def test_page_actions_of_outsiders_are_404_and_of_viewers_403(world: World) -> None:
    run_url = f"/runs/{world.run.uuid}/rerun/"
    assert world.client("outsider").post(run_url).status_code == 404
    assert world.client("viewer").post(run_url).status_code == 403
    endpoint_delete = f"/endpoints/{world.endpoint.uuid}/delete/"
    assert world.client("outsider").post(endpoint_delete).status_code == 404
    assert world.client("viewer").post(endpoint_delete).status_code == 403
    assert world.client("teammate").post(endpoint_delete).status_code == 302
    assert (
        world.client("anonymous").post(f"/scenarios/{world.scenario.uuid}/delete/").status_code
        == 302
    )


# -- API -----------------------------------------------------------------------------------------


def _api_routes(w: World) -> dict[str, str]:
    return {
        "scenarios": "/api/v1/scenarios",
        "endpoints": "/api/v1/endpoints",
        "traces": "/api/v1/traces",
        "runs": "/api/v1/runs",
        "teams": "/api/v1/teams",
        "samples_list": "/api/v1/traces/samples",
        "schema": "/api/v1/spec/schema",
        "scenario": f"/api/v1/scenarios/{w.scenario.uuid}",
        "endpoint": f"/api/v1/endpoints/{w.endpoint.uuid}",
        "trace": f"/api/v1/traces/{w.trace.uuid}",
        "run": f"/api/v1/runs/{w.run.uuid}",
        "run_samples": f"/api/v1/runs/{w.run.uuid}/samples",
        "run_records": f"/api/v1/runs/{w.run.uuid}/records.jsonl",
        "run_json": f"/api/v1/runs/{w.run.uuid}/summary.json",
        "run_csv": f"/api/v1/runs/{w.run.uuid}/summary.csv",
    }


API_OBJECTS = {
    "scenario",
    "endpoint",
    "trace",
    "run",
    "run_samples",
    "run_records",
    "run_json",
    "run_csv",
}


@pytest.mark.parametrize("persona", PERSONAS)
def test_every_api_read_answers_each_persona_as_it_should(world: World, persona: str) -> None:
    client = world.api(persona)
    for name, url in _api_routes(world).items():
        response = client.get(url)
        if persona == "anonymous":
            assert response.status_code == 401, name
            assert "detail" in response.json()
        elif persona == "outsider" and name in API_OBJECTS:
            assert response.status_code == 404, name
        else:
            assert response.status_code == 200, (name, response.status_code, response.content[:200])


def test_api_lists_are_team_scoped(world: World) -> None:
    for url in ("/api/v1/scenarios", "/api/v1/endpoints", "/api/v1/traces"):
        mine = world.api("teammate").get(url).json()
        theirs = world.api("outsider").get(url).json()
        assert [x["name"] for x in mine] and all(x["team"]["name"] == "alpha" for x in mine)
        assert theirs == []
    assert world.api("outsider").get("/api/v1/runs").json()["count"] == 0
    assert world.api("teammate").get("/api/v1/runs").json()["count"] == 1


def test_api_writes_of_outsiders_are_404_and_of_viewers_403(world: World) -> None:
    body = {"scenario": str(world.scenario.uuid), "endpoint": str(world.endpoint.uuid)}
    assert (
        world.api("outsider")
        .post("/api/v1/runs", body, content_type="application/json")
        .status_code
        == 404
    )
    assert (
        world.api("viewer").post("/api/v1/runs", body, content_type="application/json").status_code
        == 403
    )
    assert (
        world.api("anonymous")
        .post("/api/v1/runs", body, content_type="application/json")
        .status_code
        == 401
    )
    for method, url in (
        ("post", f"/api/v1/runs/{world.run.uuid}/cancel"),
        ("post", f"/api/v1/runs/{world.run.uuid}/rerun"),
        ("patch", f"/api/v1/runs/{world.run.uuid}"),
        ("delete", f"/api/v1/scenarios/{world.scenario.uuid}"),
        ("delete", f"/api/v1/endpoints/{world.endpoint.uuid}"),
        ("post", f"/api/v1/endpoints/{world.endpoint.uuid}/test"),
        ("delete", f"/api/v1/traces/{world.trace.uuid}"),
    ):
        out = getattr(world.api("outsider"), method)(url, {}, content_type="application/json")
        assert out.status_code == 404, url
        viewer = getattr(world.api("viewer"), method)(url, {}, content_type="application/json")
        assert viewer.status_code == 403, url


def test_the_teammate_launches_a_run_which_is_queued_at_once(world: World) -> None:
    response = world.api("teammate").post(
        "/api/v1/runs",
        {
            "scenario": str(world.scenario.uuid),
            "endpoint": str(world.endpoint.uuid),
            "overrides": {"duration_s": 1},
        },
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "queued"
    assert body["spec"]["duration_s"] == 1
    assert "api_key" not in str(body) and "sk-alpha-secret" not in str(body)


def test_the_api_never_returns_the_endpoint_api_key(world: World) -> None:
    for url in (
        "/api/v1/endpoints",
        f"/api/v1/endpoints/{world.endpoint.uuid}",
        f"/api/v1/runs/{world.run.uuid}",
    ):
        assert b"sk-alpha-secret" not in _body(world.api("owner").get(url))
    assert (
        world.api("owner").get(f"/api/v1/endpoints/{world.endpoint.uuid}").json()["has_api_key"]
        is True
    )


def test_openapi_schema_is_served_with_the_run_spec_knobs(world: World) -> None:
    schema = world.api("anonymous").get("/api/v1/openapi.json").json()
    assert "/api/v1/runs" in schema["paths"]
    overrides = schema["components"]["schemas"]["RunOverrides"]["properties"]
    assert {"duration_s", "policy", "scope", "concurrency"} <= set(overrides)


def test_the_api_docs_page_loads_its_assets_locally(world: World) -> None:
    page = world.client("anonymous").get("/api/v1/docs")
    assert page.status_code == 200
    assert b"/static/ninja/swagger-ui-bundle.js" in page.content and b"cdn." not in page.content


def test_every_page_action_answers_each_persona_as_it_should(world: World) -> None:
    owner_token = world.owner.api_tokens.get()
    actions = [
        f"/runs/{world.run.uuid}/cancel/",
        f"/runs/{world.run.uuid}/meta/",
        f"/scenarios/{world.scenario.uuid}/",
        f"/endpoints/{world.endpoint.uuid}/",
        f"/endpoints/{world.endpoint.uuid}/test/",
        f"/traces/{world.trace.uuid}/delete/",
        f"/team/{world.team.uuid}/members/",
        f"/team/{world.team.uuid}/members/remove/",
    ]
    for url in actions:
        assert world.client("anonymous").post(url).status_code == 302, url
        assert world.client("outsider").post(url).status_code == 404, url
    for url in actions[:6]:
        assert world.client("viewer").post(url, {"name": "x"}).status_code == 403, url
    # A token is its owner's alone.
    assert (
        world.client("teammate").post(f"/team/tokens/{owner_token.uuid}/revoke/").status_code == 404
    )


def test_api_creates_are_refused_to_viewers_and_outsiders(
    world: World, settings: Any, tmp_path: Path
) -> None:
    bodies = {
        "/api/v1/scenarios": {"name": "n", "team": str(world.team.uuid)},
        "/api/v1/endpoints": {
            "name": "n",
            "team": str(world.team.uuid),
            "base_url": "http://127.0.0.1:1",
            "model": "m",
        },
    }
    for url, body in bodies.items():
        assert (
            world.api("viewer").post(url, body, content_type="application/json").status_code == 403
        )
        assert (
            world.api("outsider").post(url, body, content_type="application/json").status_code
            == 404
        )
        assert (
            world.api("anonymous").post(url, body, content_type="application/json").status_code
            == 401
        )
    for url in (
        f"/api/v1/scenarios/{world.scenario.uuid}",
        f"/api/v1/endpoints/{world.endpoint.uuid}",
    ):
        patch = {"name": "renamed"}
        assert (
            world.api("outsider").patch(url, patch, content_type="application/json").status_code
            == 404
        )
        assert (
            world.api("viewer").patch(url, patch, content_type="application/json").status_code
            == 403
        )
        assert (
            world.api("teammate").patch(url, patch, content_type="application/json").status_code
            == 200
        )
    settings.AIPERF_SAMPLES_DIR = samples_dir_with(tmp_path, key="dag-small", source=DAG_SPAWN)
    upload = world.api("viewer").post("/api/v1/traces", {"sample": "dag-small"})
    assert upload.status_code == 403
