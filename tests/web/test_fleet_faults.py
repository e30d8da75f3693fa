"""A client-worker host killed mid-run, through the service: real `celery -A aiperf_web worker
-Q <hosts>` pool processes (tests/web/conftest.py, hosts_worker), real Redis, the real mock.

What is specified (docs/engine.md, "Faults"; PRODUCT §4.3): a host that stops answering is
lost; what it owed is answered `worker_lost` (never silently dropped, never re-sent); its
sessions migrate to the other client workers, which go on serving; the run does not hang and
ends as it would have (succeeded: losing one of three workers is not the run's failure); the
summary, the run's log and the live snapshots say which worker was lost and when. The hosts
worker replaces the killed pool process, so the next run still finds its hosts.
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings

from aiperf_web.runs.models import RunRecord, RunSample
from tests.web.conftest import World, final_run

VICTIM = 1


def _serving_hosts(run_id: str) -> list[dict[str, Any]] | None:
    """The hosts of the run's latest snapshot once every one of them has sent requests."""
    last = RunSample.objects.filter(run__uuid=run_id).order_by("-seq").first()
    hosts = None if last is None else last.data.get("hosts")
    if hosts and len(hosts) == 3 and all((h.get("sent") or 0) > 0 for h in hosts):
        return list(hosts)
    return None


def _pool_process_of_hosts_worker(host: str) -> int:
    """The pid in a heartbeat's `host:pid`, checked to be a pool process of this session's
    hosts worker (its parent's command line names the hosts queue) before anything kills it."""
    pid = int(host.rsplit(":", 1)[1])
    status = Path(f"/proc/{pid}/status").read_text()
    ppid = int(next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:")))
    parent = Path(f"/proc/{ppid}/cmdline").read_bytes().split(b"\0")
    assert settings.AIPERF_HOSTS_QUEUE.encode() in parent, (pid, parent)
    return pid


def test_a_host_pool_process_killed_mid_run_is_lost_and_the_run_goes_on(
    live_world: World, hosts_worker: str, wait_for: Callable[..., Any]
) -> None:
    duration_s = 12.0
    started = time.monotonic()
    # A failure threshold of 1: the mock never fails, and what the lost worker owed is the
    # loss, not the endpoint failing; it must not stop a run that is meant to go on.
    run_id = live_world.launch_fleet_run(
        duration_s=duration_s, concurrency=6, target={"failure_threshold": 1}
    )
    hosts = wait_for(lambda: _serving_hosts(run_id), timeout_s=60, every_s=0.1)
    pid = _pool_process_of_hosts_worker(hosts[VICTIM]["host"])
    os.kill(pid, signal.SIGKILL)

    # No hang: the duration, the heartbeat's 5 s expiry, the 3 s drain and margin.
    run = final_run(run_id, wait_for, timeout_s=duration_s + 30)
    assert time.monotonic() - started < duration_s + 40
    # One of three workers lost: the run went on and ran its course (PRODUCT §4.3).
    assert run.status == "succeeded", run.reason
    summary = run.summary
    assert summary["stopped_reason"] is None

    (lost,) = summary["client_workers_lost"]
    assert lost["worker"] == VICTIM and 0 < lost["at_s"] < duration_s
    fleet = summary["fleet"]
    (settled,) = fleet["lost"]
    assert settled["worker"] == VICTIM and settled["at_s"] == lost["at_s"]  # one reading
    owed = settled["in_flight"] + settled["unread"]
    # Its sessions' next turns went into its stream during the 5 s nobody read it.
    assert owed > 0

    records = [r["data"] for r in RunRecord.objects.filter(run=run).values("data")]
    by_error = Counter(r["error"] for r in records)
    lost_records = [r for r in records if r["error"] == "worker_lost"]
    # What it owed is answered worker_lost, on its worker only; nothing else failed.
    assert len(lost_records) >= owed
    assert {r["client_worker"] for r in lost_records} == {VICTIM}
    assert set(by_error) <= {None, "worker_lost", "cancelled"}, by_error
    # Every credit sent has one outcome: a host's answer, settled as lost, or cancelled at the
    # drain; none is sent twice (a re-send would be a second credit for the same turn).
    assert fleet["credits"] == fleet["results"] + owed + fleet["cancelled"]
    assert by_error["cancelled"] == fleet["cancelled"]  # no answered request also cancelled
    turns = Counter((r["session_id"], r["turn_index"]) for r in records)
    assert max(turns.values()) == 1
    # The other workers keep serving after the loss; the lost one serves nothing more.
    after = [r for r in records if r["start_s"] > lost["at_s"] and r["error"] is None]
    assert {r["client_worker"] for r in after} == {0, 2}, Counter(r["client_worker"] for r in after)
    assert summary["requests"] > len(lost_records)

    log = "\n".join(run.log_lines.values_list("message", flat=True))
    assert f"client worker {VICTIM} (process {hosts[VICTIM]['host']}) lost at t = " in log
    assert f"the {owed} requests it owed" in log and "none re-sent" in log

    # The live page's rows: the lost worker with when, the others answering to the end.
    last = RunSample.objects.filter(run=run).order_by("-seq").first()
    assert last is not None
    rows = {h["worker"]: h for h in last.data["hosts"]}
    assert rows[VICTIM]["lost_at_s"] == lost["at_s"]
    assert rows[0]["lost_at_s"] is None and rows[2]["lost_at_s"] is None
    assert rows[VICTIM]["host"] == hosts[VICTIM]["host"]

    # The hosts worker replaced its killed pool process: the next run finds three hosts.
    again = live_world.launch_fleet_run(duration_s=2, concurrency=3)
    rerun = final_run(again, wait_for, timeout_s=60)
    assert rerun.status == "succeeded", rerun.reason
    assert rerun.summary["fleet"]["lost"] == [] and rerun.summary["requests"] > 0
    assert pid not in {int(h["host"].rsplit(":", 1)[1]) for h in rerun.summary["fleet"]["hosts"]}
