"""`python manage.py run_scenario <scenario> [--endpoint NAME|ID|simulated] [--set knob=value]`:
launch a run as a user would, wait for it, print progress, and exit non-zero unless it
succeeds (1 failed or cancelled, 2 bad input). A worker must be consuming the `runs` queue: the
embedded default's `manage.py serve`, a `celery -A aiperf_web worker -Q runs`, or `--inline`
to execute the run in this process through the same task code."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from aiperf_web.core.errors import Invalid, NotFound
from aiperf_web.core.ids import parse_uuid
from aiperf_web.endpoints.selectors import endpoint_list
from aiperf_web.runs import executing, services
from aiperf_web.runs.models import Run, Status
from aiperf_web.runs.selectors import run_latest_sample
from aiperf_web.scenarios.selectors import scenario_list
from runner import SUMMARY_KEYS


def _parse_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


class Command(BaseCommand):
    help = "Run a scenario headless and wait; exit 0 only when the run succeeds."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("scenario", help="scenario name or id")
        parser.add_argument(
            "--endpoint", default="simulated", help='endpoint name or id, or "simulated"'
        )
        parser.add_argument("--user", default="admin", help="launch as this user")
        parser.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="KNOB=VALUE",
            help="override a knob (JSON value)",
        )
        parser.add_argument(
            "--inline", action="store_true", help="execute here instead of on a worker"
        )
        parser.add_argument(
            "--timeout", type=float, default=24 * 3600, help="give up after S seconds"
        )
        parser.add_argument("--json", action="store_true", help="print the final run as JSON")

    def handle(self, *args: Any, **opts: Any) -> None:
        user = get_user_model().objects.filter(username=opts["user"]).first()
        if user is None:
            raise CommandError(f"no user named {opts['user']!r}", returncode=2)
        scenario = self._pick(scenario_list(user=user), opts["scenario"], "scenario")
        endpoint_id: object = "simulated"
        if opts["endpoint"] != "simulated":
            endpoint_id = self._pick(endpoint_list(user=user), opts["endpoint"], "endpoint").uuid
        overrides: dict[str, Any] = {}
        for item in opts["set"]:
            knob, sep, value = item.partition("=")
            if not sep:
                raise CommandError(f"--set {item!r}: write KNOB=VALUE", returncode=2)
            overrides[knob.strip()] = _parse_value(value)
        try:
            run = services.run_launch(
                actor=user, scenario_id=scenario.uuid, endpoint_id=endpoint_id, overrides=overrides
            )
        except (Invalid, NotFound) as exc:
            raise CommandError(str(exc), returncode=2) from None
        self.stderr.write(f"run {run.uuid} queued")
        if opts["inline"]:
            executing.run_execute(run_uuid=str(run.uuid), worker="inline")
        deadline = time.monotonic() + opts["timeout"]
        last = ""
        while True:
            run.refresh_from_db()
            line = run.status
            sample = run_latest_sample(run_obj=run)
            if sample is not None:
                d = sample.data
                pct = 100 * float(d.get("progress") or 0)
                line += f" {pct:5.1f}%  requests {d.get('requests')}  errors {d.get('errors')}"
            if line != last:
                self.stderr.write(line)
                last = line
            if run.status not in (Status.QUEUED, Status.RUNNING):
                break
            if time.monotonic() > deadline:
                services.run_cancel(actor=user, run_obj=run)
                raise CommandError(f"run {run.uuid} did not finish within {opts['timeout']} s")
            time.sleep(1.0)
        self._report(run, as_json=opts["json"])
        if run.status != Status.SUCCEEDED:
            sys.exit(1)

    def _pick(self, qs: Any, key: str, what: str) -> Any:
        uid = parse_uuid(key)
        found = list(qs.filter(uuid=uid) if uid else qs.filter(name=key))
        if len(found) != 1:
            raise CommandError(
                f"{what} {key!r} not found"
                if not found
                else f"{what} {key!r} is ambiguous: use its id",
                returncode=2,
            )
        return found[0]

    def _report(self, run: Run, *, as_json: bool) -> None:
        if as_json:
            self.stdout.write(
                json.dumps(
                    {
                        "id": str(run.uuid),
                        "status": run.status,
                        "reason": run.reason,
                        "summary": run.summary,
                    }
                )
            )
            return
        self.stdout.write(f"run {run.uuid}: {run.status}{' — ' + run.reason if run.reason else ''}")
        for key in SUMMARY_KEYS:
            if run.summary and key in run.summary:
                self.stdout.write(f"  {key}: {run.summary[key]}")
