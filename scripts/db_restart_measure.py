"""Measure: PostgreSQL restarted in the middle of a live run (issue 26 item 3).

A 20 s run of the project's fixture on a mock, executed in this process; 7 s in, the cluster
is restarted (`pg_ctlcluster ... restart -m fast`), or stopped for DOWN_S seconds and started.
Prints the run's status, records stored against requests answered, and its log. Needs root
(pg_ctlcluster) and a cluster of one's own, never a shared one:

  SERVICES_PG_PORT=5499 SERVICES_REDIS_PORT=6399 SERVICES_DB=l_restart bash scripts/services.sh up
  DATABASE_URL=postgresql://postgres@127.0.0.1:5499/l_restart REDIS_URL=redis://127.0.0.1:6399/0 \
    PG_CLUSTER="15 port5499" [DOWN_S=8] \
    .venv/bin/python manage.py shell < scripts/db_restart_measure.py
"""

import os
import subprocess
import threading
import time

from django.db import connection

from aiperf_web.runs import executing, services
from aiperf_web.runs.models import Run, RunLog, RunRecord
from scripts.measure_world import measure_world

world = measure_world(
    {"duration_s": 20, "concurrency": 4, "speedup": 50, "snapshot_interval_s": 0.5}
)
mock, owner, sc, ep = world.mock, world.owner, world.scenario, world.endpoint
run = services.run_launch(actor=owner, scenario_id=sc.uuid, endpoint_id=ep.uuid, enqueue=False)
ver, name = os.environ["PG_CLUSTER"].split()
out = {}


def restart():
    time.sleep(7)
    t0 = time.monotonic()
    down = float(os.environ.get("DOWN_S", "0"))
    if down:
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", ver, name, "stop", "-m", "fast"],
            check=True,
        )
        time.sleep(down)
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", ver, name, "start"], check=True
        )
    else:
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", ver, name, "restart", "-m", "fast"],
            check=True,
        )
    out["restart_s"] = time.monotonic() - t0


th = threading.Thread(target=restart)
th.start()
t0 = time.monotonic()
status = executing.run_execute(run_uuid=str(run.uuid), worker="restart-measure")
took = time.monotonic() - t0
th.join()
connection.close()
r = Run.objects.get(pk=run.pk)
stored = RunRecord.objects.filter(run=r).count()
warm = RunRecord.objects.filter(run=r, warmup=True).count()
summary = r.summary or {}
print(f"status={status} reason={r.reason!r} wall={took:.1f}s")
print(f"restart command {out.get('restart_s', 0):.1f} s")
print(
    f"records stored={stored} records_count={r.records_count} "
    f"requests answered={summary.get('requests')} warmup={warm} "
    f"elapsed_s={summary.get('elapsed_s')}"
)
for m in RunLog.objects.filter(run=r).order_by("pk").values_list("message", flat=True):
    print("  log:", m[:200])
mock.stop()
