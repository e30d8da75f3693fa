"""Dynamo's affinity generation, found by "Test connection" against a real mock over a socket
and kept on the endpoint: shown on its page and in the API, forgotten when the URL changes,
and narrowing what a launch (form, API, A/B pair) may ask for."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from aiperf_web.core.mock import MockServer, free_port
from aiperf_web.endpoints.models import Endpoint
from aiperf_web.runs.models import Run
from aiperf_web.scenarios.models import Scenario
from runner import Generation
from tests.web.conftest import World

JSON = "application/json"
HEADLINE_1_6 = "Dynamo 1.3+ (header affinity): on — X-Dynamo-Session-ID pins sessions"


@pytest.fixture(scope="module")
def mock_1_2() -> Iterator[str]:
    """A mock speaking released Dynamo 1.2.x: session_control open/close, no header affinity."""
    mock = MockServer(
        port=free_port(),
        time_scale=0.01,
        dynamo_version=Generation.V1_2.value,
        header_affinity_ttl_s=None,
    )
    mock.start()
    yield mock.url
    mock.stop()


def _test_connection(world: World, endpoint: Endpoint) -> dict[str, Any]:
    response = world.api("owner").post(f"/api/v1/endpoints/{endpoint.uuid}/test")
    assert response.status_code == 200, response.content
    body = dict(response.json())
    assert body["ok"], body["message"]
    endpoint.refresh_from_db()
    return body


def _launch(world: World, **overrides: Any) -> Any:
    return world.api("owner").post(
        "/api/v1/runs",
        {
            "scenario": str(world.scenario.uuid),
            "endpoint": str(world.endpoint.uuid),
            "overrides": overrides,
        },
        content_type=JSON,
    )


def test_test_connection_on_dynamo_1_6_with_an_affinity_ttl_stores_header_affinity_on(
    world: World,
) -> None:
    client = world.client("owner")
    page = client.post(f"/endpoints/{world.endpoint.uuid}/test/", follow=True).content.decode()
    assert "Connection OK" in page and HEADLINE_1_6 in page

    endpoint = Endpoint.objects.get(pk=world.endpoint.pk)
    assert (endpoint.generation, endpoint.header_affinity) == (Generation.V1_6, True)
    assert endpoint.affinity_detected_at is not None
    assert "dynamo-headers" in endpoint.affinity_choices
    assert "dynamo-nvext" not in endpoint.affinity_choices
    # The server's own words are kept whole and shown on the page.
    assert "session_control" in (endpoint.affinity_server_message or "")
    assert "What the server said" in page

    listing = client.get("/endpoints/").content.decode()
    assert "Dynamo 1.3+: header affinity on" in listing and HEADLINE_1_6 in listing  # its title

    api = world.api("viewer").get(f"/api/v1/endpoints/{endpoint.uuid}").json()
    assert api["affinity"]["generation"] == Generation.V1_6.value
    assert api["affinity"]["usable"] == ["none", "dynamo-headers", "header"]
    assert api["affinity"]["header_affinity"] is True
    assert api["affinity"]["headline"] == HEADLINE_1_6
    assert api["affinity"]["nvext_actions"] is None
    assert api["affinity_choices"] == ["none", "dynamo-headers", "header"]


def test_test_connection_on_dynamo_1_2_finds_open_close(world: World, mock_1_2: str) -> None:
    patched = world.api("owner").patch(
        f"/api/v1/endpoints/{world.endpoint.uuid}", {"base_url": mock_1_2}, content_type=JSON
    )
    assert patched.status_code == 200, patched.content
    body = _test_connection(world, world.endpoint)
    assert body["affinity"]["generation"] == Generation.V1_2.value
    assert body["affinity"]["nvext_actions"] == "open"
    # 1.2.x has no header affinity: dynamo-nvext with open is the Dynamo mode that works.
    assert body["affinity"]["usable"] == ["none", "dynamo-nvext", "header"]
    assert "Dynamo 1.2.x" in body["message"]
    page = world.client("owner").get(f"/endpoints/{world.endpoint.uuid}/").content.decode()
    assert "Dynamo 1.2.x (session_control open/close)" in page


def test_changing_the_base_url_or_kind_forgets_the_detection(world: World, mock_1_2: str) -> None:
    _test_connection(world, world.endpoint)
    assert world.endpoint.affinity_detected
    api = world.api("owner")
    renamed = api.patch(
        f"/api/v1/endpoints/{world.endpoint.uuid}", {"name": "renamed"}, content_type=JSON
    ).json()
    assert renamed["affinity"] is not None  # the same server: kept

    moved = api.patch(
        f"/api/v1/endpoints/{world.endpoint.uuid}", {"base_url": mock_1_2}, content_type=JSON
    ).json()
    assert moved["affinity"] is None
    assert "dynamo-nvext" in moved["affinity_choices"]  # the kind's list again
    endpoint = Endpoint.objects.get(pk=world.endpoint.pk)
    assert endpoint.affinity_generation is None and endpoint.affinity_summary is None

    _test_connection(world, world.endpoint)
    page = world.client("owner").post(
        f"/endpoints/{world.endpoint.uuid}/",
        {"name": "renamed", "base_url": mock_1_2, "model": "mock-model", "server_kind": "vllm"},
    )
    assert page.status_code == 302
    assert not Endpoint.objects.get(pk=world.endpoint.pk).affinity_detected


def test_the_launch_form_offers_only_the_modes_the_detection_allows(world: World) -> None:
    client = world.client("owner")
    url = f"/runs/new/?endpoint={world.endpoint.uuid}"
    before = client.get(url).context["form"]
    assert [v for v, _ in before.fields["affinity"].choices] == [
        "", "none", "dynamo-nvext", "dynamo-headers", "header",
    ]  # fmt: skip
    assert "test the connection" in before.fields["affinity"].help_text

    _test_connection(world, world.endpoint)
    response = client.get(url)
    after = response.context["form"]
    assert [v for v, _ in after.fields["affinity"].choices] == [
        "", "none", "dynamo-headers", "header",
    ]  # fmt: skip
    assert HEADLINE_1_6 in after.fields["affinity"].help_text
    # The page's script switches the list when another target is picked.
    offers = response.context["affinity_data"]
    assert offers[str(world.endpoint.uuid)]["choices"] == ["none", "dynamo-headers", "header"]
    assert "dynamo-nvext" in offers["simulated"]["choices"]

    refused = client.post(
        "/runs/new/",
        {"scenario": str(world.scenario.uuid), "target": str(world.endpoint.uuid),
         "affinity": "dynamo-nvext"},
    )  # fmt: skip
    assert refused.status_code == 200
    (error,) = refused.context["form"].errors["affinity"]
    assert "dynamo-nvext will not work" in error and "dynamo-headers" in error
    assert Run.objects.count() == 1  # the world's finished run only


def test_on_dynamo_1_2_the_form_and_the_launch_preset_open_actions(
    world: World, mock_1_2: str
) -> None:
    Endpoint.objects.filter(pk=world.endpoint.pk).update(base_url=mock_1_2)
    _test_connection(world, world.endpoint)
    form = world.client("owner").get(f"/runs/new/?endpoint={world.endpoint.uuid}").context["form"]
    assert "dynamo-nvext" in [v for v, _ in form.fields["affinity"].choices]
    assert form.initial["affinity_actions"] == "open"

    created = _launch(world, affinity="dynamo-nvext")
    assert created.status_code == 201, created.content
    assert created.json()["spec"]["affinity_actions"] == "open"
    bind = _launch(world, affinity="dynamo-nvext", affinity_actions="bind")
    assert bind.status_code == 422
    assert bind.json()["errors"][0]["field"] == "overrides.affinity_actions"


def test_a_launch_asking_for_a_mode_the_detection_rules_out_is_a_422(world: World) -> None:
    _test_connection(world, world.endpoint)
    response = _launch(world, affinity="dynamo-nvext", duration_s=5)
    assert response.status_code == 422, response.content
    (error,) = response.json()["errors"]
    assert error["field"] == "overrides.affinity"
    assert "dynamo-nvext (the override) will not work on alpha-mock" in error["message"]
    assert "Modes that work there: none, dynamo-headers, header" in error["message"]

    Scenario.objects.filter(pk=world.scenario.pk).update(
        spec={**world.scenario.spec, "affinity": "dynamo-nvext"}
    )
    from_scenario = _launch(world)
    assert from_scenario.status_code == 422
    assert "(the scenario's affinity)" in from_scenario.json()["errors"][0]["message"]
    assert _launch(world, affinity="dynamo-headers").status_code == 201


def test_a_scope_pair_on_a_header_generation_dynamo_uses_dynamo_headers(world: World) -> None:
    _test_connection(world, world.endpoint)
    created = world.api("owner").post(
        "/api/v1/ab",
        {"scenario": str(world.scenario.uuid), "endpoint": str(world.endpoint.uuid),
         "knob": "scope", "overrides": {"duration_s": 5}},
        content_type=JSON,
    )  # fmt: skip
    assert created.status_code == 201, created.content
    pair = created.json()
    specs = [Run.objects.get(uuid=pair[key]).spec for key in ("run_a", "run_b")]
    assert [(s["affinity"], s["scope"]) for s in specs] == [
        ("dynamo-headers", "conversation"),
        ("dynamo-headers", "lineage"),
    ]
