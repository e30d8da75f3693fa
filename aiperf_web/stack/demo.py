"""The embedded default's first start: team `default`, user `admin`, the `built-in mock`
endpoint and the `demo` scenario. Idempotent: later starts change nothing but the mock's URL
(it follows the port the mock was started on) and the admin password when
AIPERF_ADMIN_PASSWORD says otherwise."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from aiperf_web.endpoints.models import Endpoint, ServerKind
from aiperf_web.endpoints.services import AFFINITY_FIELDS, endpoint_create
from aiperf_web.scenarios.models import Scenario
from aiperf_web.scenarios.samples import SAMPLES
from aiperf_web.scenarios.services import scenario_create, trace_import_sample
from aiperf_web.teams.models import Membership, Role, Team
from runner import Generation

DEMO_TEAM = "default"
DEMO_USER = "admin"
DEMO_SCENARIO = "demo"
MOCK_ENDPOINT = "built-in mock"
REAL_DYNAMO_ENDPOINT = "real Dynamo (CPU)"
REAL_VLLM_ENDPOINT = "built-in vLLM (real, CPU)"
MOCK_MODEL = "mock-model"

# The demo: the real Claude Code session with three Explore subagents (SPAWN children), 64
# lanes each starting at a random instant of the tree (t*), 100x faster than recorded, for a
# minute (about 180 requests). With spawn-pin routing no session bounces between client
# workers (sessions_multi_worker = 0; simulated, legacy bounces 3 subagent sessions), and
# lineage affinity keys each tree to one inference worker without an early close. Re-run
# with {"policy": "legacy"} to see subagents bounce (seed 004), or {"scope": "conversation"}
# to see the children's first requests miss the cache (seed 000). Affinity is what released
# Dynamo (1.3 to 1.6) speaks, like the built-in mock: the X-Dynamo-Session-ID header (there is
# no nvext.session_control there); the simulated target is the same generation, so the demo
# behaves alike on both.
DEMO_SPEC: dict[str, Any] = {
    "timing": "lanes",
    "concurrency": 64,
    "duration_s": 60,
    "speedup": 100,
    "start_window": [0.0, 1.0],
    "joins": "recorded",
    "client_workers": 8,
    "policy": "spawn-pin",
    "affinity": "dynamo-headers",
    "scope": "lineage",
    "snapshot_interval_s": 1.0,
    "seed": 0,
    "target": {
        "kind": "simulated",
        "dynamo_version": Generation.V1_6.value,
        "header_affinity_ttl_s": 300,
    },
}
DEMO_SAMPLE = "claude-code-subagents"
DEMO_SYNTHETIC_DESCRIPTION = (
    "The seeded synthetic agentic workload (the public Claude Code trace was not found: see "
    "AIPERF_SAMPLES_DIR), replayed by 64 lanes from random instants at its own speed for a "
    "minute, spawn-pin routing and lineage affinity. Re-run with overrides "
    '{"policy": "legacy"} or {"scope": "conversation"} to compare.'
)
DEMO_DESCRIPTION = (
    "A real Claude Code session with 3 Explore subagents (SPAWN), replayed by 64 lanes from "
    "random instants at 100x speed for a minute, spawn-pin routing and lineage affinity. "
    'Re-run with overrides {"policy": "legacy"} to see subagents bounce between client '
    'workers, or {"scope": "conversation"} to see their first requests miss the prefix cache.'
)


@dataclass(frozen=True)
class Bootstrap:
    team: Team
    admin_password: str | None  # set only when it was generated now (print it once)
    scenario: Scenario
    endpoint: Endpoint


def demo_bootstrap(*, mock_url: str) -> Bootstrap:
    User = get_user_model()
    generated: str | None = None
    with transaction.atomic():
        admin = User.objects.filter(username=DEMO_USER).first()
        wanted = settings.AIPERF_ADMIN_PASSWORD
        if admin is None:
            password = wanted or secrets.token_urlsafe(12)
            generated = None if wanted else password
            admin = User.objects.create_superuser(DEMO_USER, "", password)
        elif wanted and not admin.check_password(wanted):
            admin.set_password(wanted)
            admin.save(update_fields=["password"])
        team, _ = Team.objects.get_or_create(name=DEMO_TEAM)
        Membership.objects.get_or_create(team=team, user=admin, defaults={"role": Role.ADMIN})

    endpoint = Endpoint.objects.filter(team=team, name=MOCK_ENDPOINT).first()
    if endpoint is None:
        endpoint = endpoint_create(
            actor=admin,
            team=team,
            name=MOCK_ENDPOINT,
            base_url=mock_url,
            model=MOCK_MODEL,
            server_kind=ServerKind.DYNAMO,
            is_builtin=True,
        )
    elif endpoint.is_builtin and endpoint.base_url != mock_url:
        Endpoint.objects.filter(pk=endpoint.pk).update(base_url=mock_url)
        endpoint.base_url = mock_url

    scenario = Scenario.objects.filter(team=team, name=DEMO_SCENARIO).first()
    if scenario is None:
        if SAMPLES[DEMO_SAMPLE].available:
            trace = trace_import_sample(actor=admin, team=team, key=DEMO_SAMPLE)
            scenario = scenario_create(
                actor=admin,
                team=team,
                name=DEMO_SCENARIO,
                spec=DEMO_SPEC,
                trace_ids=[trace.uuid],
                description=DEMO_DESCRIPTION,
                tags="demo,claude-code",
            )
        else:
            # No public traces on this machine (AIPERF_SAMPLES_DIR): the same experiment on
            # the seeded synthetic agentic workload, at its own speed: its think times are
            # seconds, not the real session's minutes, and 100x would ask a 2-core machine for
            # ~1,200 requests/s of 50k-token prompts.
            scenario = scenario_create(
                actor=admin,
                team=team,
                name=DEMO_SCENARIO,
                spec={**DEMO_SPEC, "speedup": 1, "workload": {"synthetic": {"seed": 0}}},
                trace_ids=[],
                description=DEMO_SYNTHETIC_DESCRIPTION,
                tags="demo,synthetic",
            )
    return Bootstrap(team=team, admin_password=generated, scenario=scenario, endpoint=endpoint)


def real_dynamo_bootstrap(*, url: str, model: str) -> Endpoint:
    """The `real Dynamo (CPU)` endpoint of team `default`, created once (run `demo_bootstrap`
    first); later starts move it to the URL and model the script reported, forgetting the
    affinity detection of the old address."""
    team = Team.objects.get(name=DEMO_TEAM)
    endpoint = Endpoint.objects.filter(team=team, name=REAL_DYNAMO_ENDPOINT).first()
    if endpoint is None:
        admin = get_user_model().objects.get(username=DEMO_USER)
        return endpoint_create(
            actor=admin,
            team=team,
            name=REAL_DYNAMO_ENDPOINT,
            base_url=url,
            model=model,
            server_kind=ServerKind.DYNAMO,
            is_builtin=True,
        )
    return _follow(endpoint, url=url, model=model)


def _follow(endpoint: Endpoint, *, url: str, model: str) -> Endpoint:
    """A built-in endpoint moved to the URL and model its server reported, forgetting the
    affinity detection of the old address (an endpoint a person made is left alone)."""
    if endpoint.is_builtin and (endpoint.base_url, endpoint.model) != (url, model):
        moved: dict[str, Any] = {"base_url": url, "model": model}
        if endpoint.base_url != url:
            moved.update(dict.fromkeys(AFFINITY_FIELDS))
        Endpoint.objects.filter(pk=endpoint.pk).update(**moved)
        endpoint.refresh_from_db()
    return endpoint


def real_vllm_bootstrap(*, url: str, model: str) -> list[Endpoint]:
    """The `built-in vLLM (real, CPU)` endpoint (server kind vLLM) of every team: created where
    missing, moved to the URL and model the script reported where it exists. A team whose own
    endpoint bears the name keeps it. Run at every start of the server, so a team created
    since the last start gets it then."""
    seeded = []
    for team in Team.objects.order_by("pk"):
        with transaction.atomic():
            endpoint, _ = Endpoint.objects.get_or_create(
                team=team,
                name=REAL_VLLM_ENDPOINT,
                defaults={
                    "base_url": url,
                    "model": model,
                    "server_kind": ServerKind.VLLM,
                    "is_builtin": True,
                },
            )
        if endpoint.is_builtin:
            seeded.append(_follow(endpoint, url=url, model=model))
    return seeded


def mock_url_default() -> str:
    return settings.AIPERF_MOCK_URL or f"http://127.0.0.1:{settings.AIPERF_MOCK_PORT}"
