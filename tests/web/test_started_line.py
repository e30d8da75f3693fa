"""The run log's `started:` line for a spec that stops by requests or trees only (no
duration_s): it failed every such run through the service ("internal error: TypeError:
unsupported format string passed to NoneType.__format__") before the fix."""

from __future__ import annotations

from typing import Any

from aiperf_web.runs import executing
from aiperf_web.runs import services as run_services
from aiperf_web.runs.models import Run, Status
from tests.web.conftest import World


def test_a_run_without_duration_s_starts_and_says_what_stops_it(
    transactional_db: Any, mock_url: str
) -> None:
    world = World(mock_url)
    launched = run_services.run_launch(
        actor=world.owner,
        scenario_id=world.scenario.uuid,
        endpoint_id="simulated",
        overrides={"duration_s": None, "max_requests": 20},
        enqueue=False,
    )
    assert launched.spec["duration_s"] is None
    executing.run_execute(run_uuid=str(launched.uuid), worker="started-line-test:1")
    run = Run.objects.get(pk=launched.pk)
    assert run.status == Status.SUCCEEDED, run.reason
    lines = list(run.log_lines.order_by("id").values_list("message", flat=True))
    (started,) = [line for line in lines if line.startswith("started: ")]
    assert "until 20 requests" in started, started
