"""The run sink stores a simulated run's snapshots by run time, not by wall time."""

from __future__ import annotations

import threading

from aiperf_web.runs.models import Run, RunSample
from aiperf_web.runs.sink import RunSink
from runner import ListSink, parse_spec, run
from tests.web.conftest import World


def test_every_simulated_interval_becomes_a_stored_sample(live_world: World) -> None:
    # A simulated run sends a snapshot per simulated interval, dozens per wall second: each
    # is a chart point and must be kept (a wall-clock throttle kept two of an hour's).
    spec = parse_spec(
        {
            "workload": {"synthetic": {"trees": 8}},
            "concurrency": 8,
            "duration_s": 600,
            "target": {"kind": "simulated", "time_scale": 0.1, "snapshot_interval_s": 20},
        }
    )
    expected = ListSink()
    run(spec, sink=expected)
    stored_run = Run.objects.create(
        team=live_world.team,
        scenario_name="s",
        endpoint_name="simulated",
        target_kind="simulated",
        spec=spec.model_dump(mode="json"),
    )
    sink = RunSink(run=stored_run, stop=threading.Event())
    run(spec, sink=sink)
    sink.close()
    stored = list(RunSample.objects.filter(run=stored_run).order_by("seq"))
    assert len(expected.snapshots) >= 30
    assert [s.t_s for s in stored] == [snap["t_s"] for snap in expected.snapshots]
    assert sink.records_written == len(expected.record_list)
