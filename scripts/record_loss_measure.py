"""Measure: how many answered requests a killed worker would lose, and the sink's rows/s.

1. A 16 s live run of the project's fixture on a mock (4 lanes, as the fault suite's demo),
   executed in this process, with each record's answer time and the commit time of the write
   that stored it noted. Answered but not yet stored is what a worker killed at that instant
   loses (its records wait in the engine until handed to the sink, then in the sink until
   flushed): prints the worst and mean lag, and the most requests unstored at a commit.
2. The sink's own rate: 200,000 records through RunSink (handed over in chunks of CHUNK, as
   the engine would), rows/s from the first hand-over to `close()`.

  DATABASE_URL=postgresql://postgres@127.0.0.1:5432/<own db> [FLUSH_S=1] \\
    .venv/bin/python manage.py shell < scripts/record_loss_measure.py
"""

import bisect
import os
import statistics
import threading
import time
from typing import Any

from aiperf_web.runs import executing, services
from aiperf_web.runs import sink as sink_module
from aiperf_web.runs.models import Run, RunRecord, Status
from aiperf_web.runs.sink import RunSink
from scripts.measure_world import measure_world

world = measure_world({"duration_s": 16, "concurrency": 4, "speedup": 50})
mock, owner, sc, ep = world.mock, world.owner, world.scenario, world.endpoint
team = sc.team


# Each stored batch: when its COPY committed and when its records were answered (perf_counter).
stored_at: list[tuple[float, list[float]]] = []
# The run's clock: each snapshot's t_s against when the sink got it (the earliest says t0).
clock: list[float] = []
flush = RunSink._flush
take_snapshot = RunSink.snapshot


def timed_flush(self: RunSink, batch: list[Any]) -> None:
    flush(self, batch)
    stored_at.append((time.perf_counter(), [float(r["end_s"]) for r in batch]))


def noted_snapshot(self: RunSink, snapshot: Any) -> None:
    clock.append(time.perf_counter() - float(snapshot["t_s"]))
    take_snapshot(self, snapshot)


# FLUSH_S=1 measures the sink's flush before issue 21 item 4 (the engine's hand-over every
# 0.25 s is in the engine; before it, records went over only with each snapshot: the figures
# of that code are in the commit that changed it, 67fedf3).
if "FLUSH_S" in os.environ:
    sink_module._RECORD_FLUSH_S = float(os.environ["FLUSH_S"])
print(f"flush every {sink_module._RECORD_FLUSH_S} s")
RunSink._flush = timed_flush  # type: ignore[method-assign]
RunSink.snapshot = noted_snapshot  # type: ignore[method-assign]
run = services.run_launch(actor=owner, scenario_id=sc.uuid, endpoint_id=ep.uuid, enqueue=False)
executing.run_execute(run_uuid=str(run.uuid), worker="loss-measure")
RunSink._flush = flush  # type: ignore[method-assign]
RunSink.snapshot = take_snapshot  # type: ignore[method-assign]
r = Run.objects.get(pk=run.pk)
t0 = min(clock)
lags = [at - (t0 + end_s) for at, ends in stored_at for end_s in ends]
# Answered and not yet stored, at each commit (the most a kill just before it loses).
answered = sorted(t0 + end_s for _at, ends in stored_at for end_s in ends)
done = 0
unstored = []
for at, ends in stored_at:
    unstored.append(bisect.bisect_left(answered, at) - done)
    done += len(ends)
print(f"run: {r.status} ({r.reason or 'ok'}), {r.records_count} records in {len(stored_at)} writes")
mean_lag = statistics.mean(lags)
print(
    f"answered, not stored: up to {max(lags):.2f} s of answers (mean lag {mean_lag:.2f} s), "
    f"up to {max(unstored)} requests (mean {statistics.mean(unstored):.1f})"
)
mock.stop()

# -- 2. the sink's rows/s -------------------------------------------------------------------
N = 200_000
CHUNK = int(os.environ.get("CHUNK", "1250"))
record = {
    "seq": 0, "client_worker": 1, "inference_worker": 2, "start_s": 1.0, "end_s": 1.5,
    "ttft_ms": 12.0, "prompt_tokens": 1000, "output_tokens": 64, "cached_tokens": 512,
    "session_id": "s", "root_id": "r", "turn_index": 0, "depth": 0, "error": None,
}  # fmt: skip
bench = Run.objects.create(
    team=team, scenario_name="bench", endpoint_name="none", target_kind="simulated", spec={},
    status=Status.RUNNING,
)  # fmt: skip
sink = RunSink(run=bench, stop=threading.Event())
started = time.perf_counter()
for first in range(0, N, CHUNK):
    sink.records([dict(record) for _ in range(min(CHUNK, N - first))])
sink.close()
took = time.perf_counter() - started
stored = RunRecord.objects.filter(run=bench).count()
print(f"sink: {stored} records in chunks of {CHUNK}: {took:.2f} s, {stored / took:,.0f} rows/s")
Run.objects.filter(team=team).delete()
