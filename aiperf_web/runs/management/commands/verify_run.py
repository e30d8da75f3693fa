"""`python manage.py verify_run <run id> [--json]`: recompute a stored run's summary from its
stored records (runner's verify: counts, hit ratios, exact TTFT/ITL/latency percentiles) and
print the difference per figure against the histogram's stated error. Reads the records in
chunks on the (run, seq) key, never the whole set; exit 0 when every figure agrees, 1 when one
does not, 2 when the run is not found or has no summary."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from aiperf_web.core.ids import parse_uuid
from aiperf_web.runs.models import Run
from aiperf_web.runs.selectors import run_records_jsonl
from runner import verify_summary


def _records(run_obj: Run) -> Iterator[dict[str, Any]]:
    for chunk in run_records_jsonl(run_obj=run_obj, include_warmup=True):
        for line in chunk.splitlines():
            if line:
                yield json.loads(line)


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
        started = time.perf_counter()
        report = verify_summary(run_obj.summary, _records(run_obj))
        took_s = time.perf_counter() - started
        if options["json"]:
            self.stdout.write(json.dumps({**report.to_json(), "seconds": round(took_s, 2)}))
        else:
            self.stdout.write(f"run {run_obj.uuid}: {report.records:,} records ({took_s:.1f} s)")
            for d in report.differences:
                if d.difference is None:
                    shown = "missing"
                elif d.relative:
                    shown = f"{d.difference * 100:.4f} % (allowed {d.allowed * 100:.2f} %)"
                else:
                    shown = f"{d.difference:g} (allowed {d.allowed:g})"
                mark = "ok  " if d.ok else "DIFF"
                self.stdout.write(f"  {mark} {d.figure:<28} {shown}")
            for name in ("ttft_ms", "itl_ms", "latency_ms"):
                largest = report.largest(name + ".p")
                if largest is not None:
                    self.stdout.write(f"  largest {name} percentile difference: {largest:.4%}")
            self.stdout.write(
                "every figure agrees" if report.ok else f"{len(report.failures)} figures disagree"
            )
        if not report.ok:
            sys.exit(1)
