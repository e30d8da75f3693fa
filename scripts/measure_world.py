"""What the measurement scripts run in `manage.py shell` (scripts/*_measure.py) start from: the
database migrated, a built-in-shaped mock on a free port, a team of its own (named by the
time, so reruns never collide), the project's DAG_SPAWN fixture as a scenario with `spec`,
and an endpoint on the mock."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.core.management import call_command

from aiperf_web.core.mock import MockServer, free_port
from aiperf_web.endpoints.models import Endpoint
from aiperf_web.endpoints.services import endpoint_create
from aiperf_web.scenarios.models import Scenario
from aiperf_web.scenarios.services import scenario_create, trace_upload
from aiperf_web.teams.services import team_create
from tests.fixtures import DAG_SPAWN


@dataclass
class MeasureWorld:
    mock: MockServer
    owner: User
    scenario: Scenario
    endpoint: Endpoint


def measure_world(spec: dict[str, Any]) -> MeasureWorld:
    call_command("migrate", verbosity=0)
    mock = MockServer(port=free_port(), time_scale=0.01)
    mock.start()
    tag = str(int(time.time()))
    owner = User.objects.create_user(f"o{tag}", password="x-pw-12345")
    team = team_create(name=f"t{tag}", owner=owner)
    trace = trace_upload(
        actor=owner, team=team, filename=DAG_SPAWN.name, chunks=[DAG_SPAWN.read_bytes()], name="t"
    )
    scenario = scenario_create(actor=owner, team=team, name="s", spec=spec, trace_ids=[trace.uuid])
    endpoint = endpoint_create(
        actor=owner, team=team, name="m", base_url=mock.url, model="mock-model",
        server_kind="dynamo",
    )  # fmt: skip
    return MeasureWorld(mock, owner, scenario, endpoint)
