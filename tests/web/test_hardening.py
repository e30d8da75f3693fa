"""Hardening (issue 13 item 7): plain role messages, one log line per 403, a throttled login,
security headers on every page, secret endpoint headers, and live sockets that close when
their viewer loses access."""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

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


# -- the WebSocket origin ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "origin,accepted",
    [
        ("http://127.0.0.1:8000", True),
        ("http://127.0.0.1:9999", False),  # another service on the same host
        ("http://127.0.0.1", False),  # port 80
        ("https://127.0.0.1:8000", False),
        ("http://localhost:8000", False),
        ("null", False),
    ],
)
def test_a_socket_is_accepted_only_from_the_sites_own_scheme_host_and_port(
    transactional_db: Any, mock_url: str, origin: str, accepted: bool
) -> None:
    from asgiref.sync import async_to_sync

    from aiperf_web.asgi import application
    from tests.web.wsclient import WebsocketCommunicator

    world = World(mock_url)
    session = world.client("owner").cookies["sessionid"].value
    headers = [(b"origin", origin.encode()), (b"cookie", f"sessionid={session}".encode())]

    async def body() -> None:
        ws = WebsocketCommunicator(application, f"/ws/runs/{world.run.uuid}/", headers=headers)
        connected, _ = await ws.connect()
        assert connected == accepted
        await ws.disconnect()

    async_to_sync(body)()


def test_a_trusted_origin_behind_a_proxy_is_accepted_with_its_port(settings: Any) -> None:
    from aiperf_web.live.origin import origin_allowed

    settings.CSRF_TRUSTED_ORIGINS = ["https://perf.example.com"]
    scope = {"scheme": "ws", "headers": [(b"host", b"127.0.0.1:8000")]}
    for origin, ok in (
        (b"https://perf.example.com", True),
        (b"https://perf.example.com:443", True),
        (b"https://perf.example.com:8443", False),
        (b"http://perf.example.com", False),
    ):
        assert origin_allowed({**scope, "headers": [*scope["headers"], (b"origin", origin)]}) == ok


# -- the login throttle --------------------------------------------------------------------------


@pytest.fixture
def own_cache(settings: Any) -> None:
    """The configured cache (Redis in the production shape) under a prefix of this test's own:
    test sessions of other engineers share the Redis."""
    import uuid

    settings.CACHES = {
        "default": {**settings.CACHES["default"], "KEY_PREFIX": f"test-{uuid.uuid4().hex}"}
    }


def _login(username: str, password: str, ip: str = "10.1.0.1") -> Any:
    from django.test import Client

    return Client(REMOTE_ADDR=ip).post(
        "/accounts/login/", {"username": username, "password": password}
    )


def test_ten_wrong_passwords_lock_the_username_from_that_address_only(
    world: World, own_cache: None
) -> None:
    for n in range(10):
        assert _login("owner", f"guess-{n}", ip="10.2.0.1").status_code == 200
    response = _login("owner", "pw-owner-1", ip="10.2.0.1")
    assert response.status_code == 200, "the right password after 10 failures must not log in"
    text = response.content.decode()
    assert "Too many failed logins for this user from this address" in text
    assert "try again in 15 minutes" in text
    # The owner elsewhere, and another user behind the same address, are not locked.
    assert _login("owner", "pw-owner-1", ip="10.2.0.2").status_code == 302
    assert _login("teammate", "pw-teammate-1", ip="10.2.0.1").status_code == 302


def test_a_stranger_guessing_many_names_from_a_shared_address_locks_none_of_its_users(
    world: World, own_cache: None
) -> None:
    for n in range(10):
        _login(f"nobody-{n}", "x", ip="10.3.0.1")
        _login("viewer", f"guess-{n}", ip="10.3.0.1")
    # The stranger locked viewer's pair at this address, and nobody else's.
    assert (
        "Too many failed logins" in _login("viewer", "pw-viewer-1", ip="10.3.0.1").content.decode()
    )
    assert _login("teammate", "pw-teammate-1", ip="10.3.0.1").status_code == 302
    assert _login("owner", "pw-owner-1", ip="10.3.0.1").status_code == 302


def test_guesses_from_many_addresses_lock_a_username_only_where_it_never_signed_in(
    world: World, own_cache: None, settings: Any
) -> None:
    settings.AIPERF_LOGIN_USER_MAX_FAILURES = 12
    assert _login("owner", "pw-owner-1", ip="10.4.0.1").status_code == 302  # the owner's own
    for n in range(12):  # one or two guesses per address: no pair comes near its 10
        _login("owner", f"guess-{n}", ip=f"10.5.0.{n // 2}")
    # The owner at their own address goes on signing in; a new address is refused, saying why.
    assert _login("owner", "pw-owner-1", ip="10.4.0.1").status_code == 302
    refused = _login("owner", "pw-owner-1", ip="10.6.0.1")
    assert refused.status_code == 200
    assert "from many addresses" in refused.content.decode()
    # The ceiling is the username's: other users are not affected anywhere.
    assert _login("teammate", "pw-teammate-1", ip="10.6.0.1").status_code == 302


def test_a_few_failures_then_the_right_password_log_in(world: World, own_cache: None) -> None:
    for n in range(9):
        _login("owner", f"guess-{n}")
    assert _login("owner", "pw-owner-1").status_code == 302
    # The success cleared the pair's count: nine more mistakes still do not lock it.
    for n in range(9):
        _login("owner", f"again-{n}")
    assert _login("owner", "pw-owner-1").status_code == 302


# -- security headers ----------------------------------------------------------------------------


def test_pages_send_a_content_security_policy_and_the_usual_headers(world: World) -> None:
    assert (
        "frame-ancestors 'none'"
        in world.client("anonymous").get("/accounts/login/")["Content-Security-Policy"]
    )
    client = world.client("owner")
    for url in (
        "/runs/",
        f"/runs/{world.run.uuid}/",
        "/runs/new/",
        "/api/v1/docs",
    ):
        response = client.get(url)
        assert response.status_code == 200, url
        csp = response["Content-Security-Policy"]
        assert (
            "script-src 'self'" in csp
            and "'unsafe-inline'" not in csp.split("script-src")[1].split(";")[0]
        )
        assert "frame-ancestors 'none'" in csp and "default-src 'self'" in csp
        assert response["X-Content-Type-Options"] == "nosniff", url
        assert response["Referrer-Policy"] == "same-origin", url
        assert response["X-Frame-Options"] == "DENY", url
        # No inline script the policy would block: only src= scripts and JSON data blocks.
        html = response.content.decode()
        for tag in html.split("<script")[1:]:
            head = tag.split(">", 1)[0]
            assert "src=" in head or 'type="application/json"' in head, (url, head)


# -- live sockets after logout and revoked membership -------------------------------------------


@contextlib.contextmanager
def _watch(base: str, run_uuid: object, session: str) -> Iterator[Any]:
    """A real WebSocket client on the run's feed, as the page opens it."""
    from websockets.sync.client import connect

    ws_url = base.replace("http://", "ws://") + f"/ws/runs/{run_uuid}/"
    with connect(ws_url, origin=base, additional_headers={"Cookie": f"sessionid={session}"}) as ws:  # type: ignore[arg-type]
        assert json.loads(ws.recv(timeout=10))["type"] == "history"
        yield ws


def _closed_with(ws: Any, *, within_s: float) -> int | None:
    """The close code once the server closes the socket, None when it is still open."""
    from websockets.exceptions import ConnectionClosed

    deadline = time.monotonic() + within_s
    try:
        while time.monotonic() < deadline:
            with contextlib.suppress(TimeoutError):
                ws.recv(timeout=max(0.1, deadline - time.monotonic()))
    except ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd else None
    return None


@pytest.fixture
def access_check_s(monkeypatch: pytest.MonkeyPatch) -> float:
    """Sockets look at their viewer's access every 0.5 s instead of every 3 s: the same poll
    loop and queries, less waiting. The uvicorn service runs in this process and its consumers
    read the constant at each turn of the loop."""
    from aiperf_web.live import consumers

    monkeypatch.setattr(consumers, "ACCESS_CHECK_S", 0.5)
    return 0.5


def _running_run(world: World) -> Any:
    from aiperf_web.runs.models import Run, Status

    return Run.objects.create(
        team=world.team, scenario=world.scenario, scenario_name="alpha-scenario",
        endpoint=world.endpoint, endpoint_name="alpha-mock", target_kind="endpoint",
        spec=world.scenario.spec, status=Status.RUNNING,
    )  # fmt: skip


def test_a_run_socket_closes_when_the_viewers_membership_is_revoked(
    transactional_db: Any, mock_url: str, service: str, access_check_s: float
) -> None:
    from aiperf_web.teams.models import Membership

    world = World(mock_url)
    run = _running_run(world)
    session = world.client("teammate").cookies["sessionid"].value
    with _watch(service, run.uuid, session) as ws:
        Membership.objects.filter(user=world.teammate, team=world.team).delete()
        assert _closed_with(ws, within_s=10) == 1008
    # And a new socket is refused like any outsider's.
    from websockets.exceptions import InvalidStatus

    with pytest.raises(InvalidStatus), _watch(service, run.uuid, session):
        pass


def test_a_run_socket_closes_after_its_session_logs_out(
    transactional_db: Any, mock_url: str, service: str, access_check_s: float
) -> None:
    world = World(mock_url)
    run = _running_run(world)
    client = world.client("viewer")
    with _watch(service, run.uuid, client.cookies["sessionid"].value) as ws:
        assert client.post("/accounts/logout/").status_code == 302
        assert _closed_with(ws, within_s=10) == 1008


def test_a_run_socket_of_a_viewer_who_stays_is_not_closed(
    transactional_db: Any, mock_url: str, service: str, access_check_s: float
) -> None:
    world = World(mock_url)
    run = _running_run(world)
    with _watch(service, run.uuid, world.client("viewer").cookies["sessionid"].value) as ws:
        # Several re-checks pass (the first after one interval) and none closes the socket.
        assert _closed_with(ws, within_s=6 * access_check_s) is None


# -- secret endpoint headers ---------------------------------------------------------------------

AZURE_KEY = "azure-secret-7f3c9"


def _endpoint_with_secret_header(world: World) -> Any:
    from aiperf_web.endpoints.models import Endpoint

    response = world.api("owner").post(
        "/api/v1/endpoints",
        {
            "name": "azure-like",
            "base_url": world.endpoint.base_url,
            "model": "mock-model",
            "extra_headers": {"X-Team": "perf"},
            "secret_headers": {"api-key": AZURE_KEY},
        },
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    assert AZURE_KEY not in response.content.decode()
    assert response.json()["secret_header_names"] == ["api-key"]
    return Endpoint.objects.get(uuid=response.json()["id"])


def test_a_secret_header_is_stored_encrypted_and_never_returned_or_shown(world: World) -> None:
    from django.db import connection

    endpoint = _endpoint_with_secret_header(world)
    assert endpoint.extra_headers == {"X-Team": "perf"}
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM endpoints_endpoint WHERE id = %s", [endpoint.pk])
        assert AZURE_KEY not in repr(cursor.fetchall())
    for persona in ("owner", "viewer"):
        for url in (f"/api/v1/endpoints/{endpoint.uuid}", "/api/v1/endpoints"):
            assert AZURE_KEY not in world.api(persona).get(url).content.decode()
        for url in (f"/endpoints/{endpoint.uuid}/", "/endpoints/"):
            page = world.client(persona).get(url).content.decode()
            assert AZURE_KEY not in page
        assert (
            "api-key (encrypted; values never shown)"
            in world.client(persona).get(f"/endpoints/{endpoint.uuid}/").content.decode()
        )


def test_a_page_form_with_an_error_does_not_echo_the_secret_headers(world: World) -> None:
    response = world.client("owner").post(
        "/endpoints/new/",
        {
            "name": "",
            "base_url": world.endpoint.base_url,
            "model": "m",
            "server_kind": "openai",
            "secret_headers": f'{{"api-key": "{AZURE_KEY}"}}',
        },
    )
    assert response.status_code == 200
    assert AZURE_KEY not in response.content.decode()


def test_secret_headers_are_kept_on_a_blank_edit_and_dropped_with_the_base_url(
    world: World,
) -> None:
    from aiperf_web.endpoints.services import endpoint_secret_headers

    endpoint = _endpoint_with_secret_header(world)
    api = world.api("teammate")
    url = f"/api/v1/endpoints/{endpoint.uuid}"
    assert api.patch(url, {"model": "mock-model"}, content_type="application/json").json()[
        "secret_header_names"
    ] == ["api-key"]
    endpoint.refresh_from_db()
    assert endpoint_secret_headers(endpoint=endpoint) == {"api-key": AZURE_KEY}
    moved = api.patch(
        url, {"base_url": "http://localhost:8100"}, content_type="application/json"
    ).json()
    assert moved["secret_header_names"] == []
    endpoint.refresh_from_db()
    assert endpoint_secret_headers(endpoint=endpoint) == {}
    # A plain header may not shadow a secret one.
    api.patch(url, {"secret_headers": {"api-key": "x"}}, content_type="application/json")
    clash = api.patch(url, {"extra_headers": {"API-Key": "y"}}, content_type="application/json")
    assert clash.status_code == 422


def test_a_run_sends_the_secret_headers_but_its_stored_spec_never_holds_them(
    transactional_db: Any, mock_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import aiperf_web.runs.services as run_services
    from aiperf_web.runs import executing
    from aiperf_web.runs.models import Run

    world = World(mock_url)
    endpoint = _endpoint_with_secret_header(world)
    run = run_services.run_launch(
        actor=world.owner,
        scenario_id=world.scenario.uuid,
        endpoint_id=endpoint.uuid,
        enqueue=False,
    )
    assert AZURE_KEY not in json.dumps(run.spec)
    assert run.spec["target"]["headers"] == {"X-Team": "perf"}
    seen: list[Any] = []

    def engine(spec: Any, **kwargs: Any) -> Any:
        seen.append(spec)
        raise RuntimeError("the test stops here")

    monkeypatch.setattr(executing, "run", engine)
    executing.run_execute(run_uuid=str(run.uuid), worker="test")
    assert seen, "the engine was not started"
    assert seen[0].target.headers == {"X-Team": "perf", "api-key": AZURE_KEY}
    stored = Run.objects.get(pk=run.pk)
    assert AZURE_KEY not in json.dumps(stored.spec) + stored.reason + json.dumps(stored.summary)
    assert AZURE_KEY not in " ".join(stored.log_lines.values_list("message", flat=True))
