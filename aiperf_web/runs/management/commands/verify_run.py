"""`python manage.py verify_run <run id> [--json]`: recompute a stored run's summary from its
stored records (runner's verify: counts, hit ratios, exact TTFT/ITL/latency percentiles) and
print the difference per figure against the histogram's stated error. Reads the records in
chunks on the (run, seq) key, never the whole set; exit 0 when every figure agrees, 1 when one
does not, 2 when the run is not found or has no summary. The same engine and print as `python -m
runner verify` (runner.verify_checked, verify_text) and the API's GET /api/v1/runs/<id>/verify."""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from aiperf_web.core.ids import parse_uuid
from aiperf_web.runs.models import Run
from aiperf_web.runs.selectors import run_verify
from runner import verify_text


class Command(BaseCommand):
    help = "Recompute a run's summary from its stored records and report the differences."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run", help="the run's id")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        uid = parse_uuid(options["run"])
        run_obj = Run.objects.filter(uuid=uid).first() if uid else None
        if run_obj is None:
            raise CommandError(f"no run {options['run']!r}", returncode=2)
        if not isinstance(run_obj.summary, dict):
            raise CommandError(f"run {run_obj.uuid} has no summary (yet)", returncode=2)
        checked = run_verify(run_obj)
        if options["json"]:
            self.stdout.write(json.dumps(checked))
        else:
            self.stdout.write(verify_text(checked, source=f"run {run_obj.uuid}"))
        if not checked["ok"]:
            sys.exit(1)
