"""Webhooks have an allowlist of their own (AIPERF_WEBHOOK_ALLOWLIST), apart from the
benchmark traffic's (AIPERF_OUTBOUND_ALLOWLIST), and never reach the service's own ports: its
site, the built-in mock (its /admin/reset), the built-in endpoints (the real Dynamo and vLLM),
its database and Redis, whatever the list allows (issue 21 item 4). Refused when saved, and
again when sent: deliveries go to a real loopback receiver, which must see nothing."""

from __future__ import annotations

import socket
from typing import Any
from urllib.parse import urlsplit

import pytest

from aiperf_web.core.errors import Invalid
from aiperf_web.core.outbound import check_outbound_url
from aiperf_web.core.webhooks import webhook_check_url, webhook_deliver
from aiperf_web.endpoints.models import Endpoint, ServerKind
from aiperf_web.stack.demo import MOCK_ENDPOINT, REAL_VLLM_ENDPOINT, demo_bootstrap
from aiperf_web.teams.models import Team
from aiperf_web.teams.services import team_webhook_set
from tests.web.conftest import World
from tests.web.test_run_lifecycle import Capture, _log, _run_simulated
from tests.web.test_run_lifecycle import capture as capture  # the fixture

OWN = "one of this service's own"


def _port(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


def test_webhooks_and_benchmarks_have_separate_allowlists(
    transactional_db: Any, mock_url: str, capture: Capture, settings: Any
) -> None:
    world = World(mock_url)
    # Benchmarks may go anywhere, webhooks only to 10/8: a loopback receiver is refused.
    settings.AIPERF_OUTBOUND_ALLOWLIST = ["*"]
    settings.AIPERF_WEBHOOK_ALLOWLIST = ["10.0.0.0/8"]
    with pytest.raises(Invalid, match=r"not in the webhook allowlist .*AIPERF_WEBHOOK_ALLOWLIST"):
        team_webhook_set(actor=world.owner, team=world.team, url=capture.url)
    check_outbound_url(capture.url)  # the same host is a fine benchmark target

    # The reverse: webhooks to loopback, benchmarks only to 10/8. The webhook is delivered, the
    # same host is refused as a benchmark target.
    settings.AIPERF_WEBHOOK_ALLOWLIST = ["127.0.0.0/8"]
    settings.AIPERF_OUTBOUND_ALLOWLIST = ["10.0.0.0/8"]
    team_webhook_set(actor=world.owner, team=world.team, url=f"{capture.url}/chat")
    with pytest.raises(Invalid, match=r"not in the outbound allowlist .*AIPERF_OUTBOUND_ALLOW"):
        check_outbound_url(capture.url)
    settings.AIPERF_OUTBOUND_ALLOWLIST = ["*"]  # the simulated run has no endpoint anyway
    run = _run_simulated(world)
    assert [seen["path"] for seen in capture.seen] == ["/chat"]
    assert f"team webhook {capture.url}/chat answered 200" in _log(run)


def test_no_webhook_reaches_the_builtin_mock_the_site_or_the_services_stores(
    transactional_db: Any, mock_url: str, settings: Any
) -> None:
    """Even with every host allowed, under every spelling of this machine."""
    settings.AIPERF_WEBHOOK_ALLOWLIST = ["*"]
    boot = demo_bootstrap(mock_url=mock_url)  # the built-in mock, as serve makes it
    assert boot.endpoint.name == MOCK_ENDPOINT and boot.endpoint.is_builtin
    mock = _port(mock_url)
    settings.AIPERF_SERVE_PORT = serve = 18_123
    settings.AIPERF_PUBLIC_URL = "https://aiperf.example.test:18124"
    settings.REDIS_URL = "redis://127.0.0.1:16379/7"
    settings.DATABASE_URL = "postgres://u:p@localhost/db"
    settings.AIPERF_MOCK_URL = ""
    settings.AIPERF_MOCK_PORT = 18_125
    hostname = socket.gethostname()
    for url in (
        f"{mock_url}/admin/reset",
        f"http://localhost:{mock}/admin/reset",
        f"http://[::1]:{mock}/admin/reset",
        f"http://0.0.0.0:{mock}/admin/reset",
        f"http://{hostname}:{mock}/admin/reset",
        f"http://127.0.0.1:{serve}/api/v1/runs",
        "https://aiperf.example.test:18124/api/v1/runs",
        "http://127.0.0.1:16379/",
        "http://127.0.0.1:5432/",
        "http://127.0.0.1:18125/admin/reset",  # AIPERF_MOCK_PORT: where serve starts it
    ):
        with pytest.raises(Invalid, match=OWN):
            webhook_check_url(url)
        refused = webhook_deliver(url, body=b"{}", event="run.ended")
        assert not refused.ok and OWN in refused.message, (url, refused)
    # The same port elsewhere, and another port here, are not the service's.
    assert webhook_check_url(f"http://10.9.9.9:{mock}/hook") == f"http://10.9.9.9:{mock}/hook"
    assert webhook_check_url("http://127.0.0.1:18126/hook")


def test_a_webhook_saved_before_a_builtin_server_took_its_port_is_not_sent_there(
    transactional_db: Any, mock_url: str, capture: Capture
) -> None:
    """The real vLLM (or Dynamo) restarted on the port a webhook names: the send is refused,
    and the receiver sees nothing."""
    world = World(mock_url)
    team_webhook_set(actor=world.owner, team=world.team, url=capture.url)
    Endpoint.objects.create(
        team=Team.objects.create(name="other"),
        name=REAL_VLLM_ENDPOINT,
        base_url=capture.url,
        model="tiny",
        server_kind=ServerKind.VLLM,
        is_builtin=True,
    )
    run = _run_simulated(world)
    assert capture.seen == []
    refused = [line for line in _log(run) if line.startswith(f"team webhook {capture.url}")]
    assert len(refused) == 1 and "not called" in refused[0] and OWN in refused[0], refused
