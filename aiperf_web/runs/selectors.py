"""Reads of runs and what they measured, always scoped to the requester's teams."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from django.db.models import Q, QuerySet, TextField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast, Substr
from django.utils import timezone

from aiperf_web.core.errors import Invalid, NotFound
from aiperf_web.core.ids import parse_uuid
from aiperf_web.core.limits import NOTES_LIST_CHARS
from aiperf_web.core.tags import tag_filter_value
from aiperf_web.runs.models import Run, RunLog, RunRecord, RunSample, Status
from aiperf_web.runs.placement import placement_rows
from aiperf_web.teams.selectors import AnyUser, team_ids_for
from runner import LATENCY_KEYS, SUMMARY_KEYS, gaps_to_text, verify_checked


@dataclass(frozen=True)
class RunFilters:
    status: str = ""
    scenario: str = ""
    endpoint: str = ""
    tag: str = ""
    search: str = ""
    created_from: date | None = None
    created_to: date | None = None
    baseline: bool | None = None
    policy: str = ""  # the routing policy in the stored spec
    scope: str = ""  # the affinity scope in the stored spec


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min), timezone.get_current_timezone())


def run_list(*, user: AnyUser, filters: RunFilters | None = None) -> QuerySet[Run]:
    f = filters or RunFilters()
    qs = Run.objects.filter(team_id__in=team_ids_for(user=user)).select_related("team")
    # The list never needs the big JSON columns: the spec's few knobs it shows are read out
    # in the query (spec_policy, spec_affinity, spec_scope). Nor the whole notes: their start,
    # one character past what a list shows, so a list can say when it cut them.
    qs = qs.defer("spec", "overrides", "notes").annotate(
        spec_policy=KT("spec__policy"),
        spec_affinity=KT("spec__affinity"),
        spec_scope=KT("spec__scope"),
        notes_head=Substr("notes", 1, NOTES_LIST_CHARS + 1),
    )
    if f.status:
        if f.status not in Status.values:
            raise Invalid.field("status", f"one of {', '.join(Status.values)}")
        qs = qs.filter(status=f.status)
    for field, value in (("scenario", f.scenario), ("endpoint", f.endpoint)):
        if value:
            uid = parse_uuid(value)
            if uid is not None:
                qs = qs.filter(**{f"{field}__uuid": uid})
            elif value == "simulated" and field == "endpoint":
                qs = qs.filter(target_kind="simulated")
            else:
                qs = qs.filter(**{f"{field}_name": value})
    if f.tag:
        qs = qs.filter(tags__contains=tag_filter_value(f.tag))
    if f.search:
        qs = qs.filter(
            Q(scenario_name__icontains=f.search)
            | Q(endpoint_name__icontains=f.search)
            | Q(notes__icontains=f.search)
            | Q(tags__icontains=f.search)
        )
    if f.created_from:
        qs = qs.filter(created_at__gte=_day_start(f.created_from))
    if f.created_to:
        qs = qs.filter(created_at__lt=_day_start(f.created_to) + timedelta(days=1))
    if f.baseline is not None:
        qs = qs.filter(is_baseline=f.baseline)
    if f.policy:
        qs = qs.filter(spec__policy=f.policy)
    if f.scope:
        qs = qs.filter(spec__scope=f.scope)
    return qs.order_by("-created_at", "-id")


def run_get(*, user: AnyUser, run_id: object) -> Run:
    uid = parse_uuid(run_id)
    found = (
        Run.objects.filter(team_id__in=team_ids_for(user=user), uuid=uid)
        .select_related("team", "scenario", "endpoint", "created_by", "rerun_of")
        .first()
        if uid
        else None
    )
    if found is None:
        raise NotFound("run not found")
    return found


def run_samples(*, run_obj: Run, after_seq: int = -1, limit: int = 10_000) -> QuerySet[RunSample]:
    return RunSample.objects.filter(run=run_obj, seq__gt=after_seq).order_by("seq")[:limit]


def run_latest_sample(*, run_obj: Run) -> RunSample | None:
    return RunSample.objects.filter(run=run_obj).order_by("-seq").first()


def run_log_tail(*, run_obj: Run, limit: int = 50) -> list[RunLog]:
    return list(reversed(RunLog.objects.filter(run=run_obj).order_by("-id")[:limit]))


def run_records_jsonl(
    *, run_obj: Run, include_warmup: bool = False, chunk_rows: int = 2000
) -> Iterator[bytes]:
    """The run's records as JSON lines, in chunks of `chunk_rows` (never the whole set in
    memory). Each chunk is its own keyset query on the (run, seq) key, so no cursor has to
    outlive a chunk; the stored JSON text is passed through without decoding, the record's
    inter-chunk gaps (RunRecord.chunk_gaps) appended to it as `chunk_gaps_us` (base64)."""
    qs = RunRecord.objects.filter(run=run_obj)
    if not include_warmup:
        qs = qs.filter(warmup=False)
    rows = (
        qs.order_by("seq")
        .annotate(text=Cast("data", TextField()))
        .values_list("seq", "text", "chunk_gaps")
    )
    last = -1
    while True:
        chunk = list(rows.filter(seq__gt=last)[:chunk_rows])
        if not chunk:
            return
        last = chunk[-1][0]
        yield ("\n".join(_with_gaps(text, gaps) for _, text, gaps in chunk) + "\n").encode()


def _with_gaps(text: str, gaps: bytes | memoryview | None) -> str:
    """A stored record's JSON object text with its gaps spliced in before the closing brace
    (the object is never empty: a record has a dozen keys)."""
    if gaps is None:
        return text
    return f'{text.rstrip()[:-1]}, "chunk_gaps_us": "{gaps_to_text(bytes(gaps))}"}}'


def run_verify(run_obj: Run) -> dict[str, Any]:
    """The run's summary recomputed from its stored records (warmup included, so it is counted
    apart), read in keyset chunks: runner's verify_checked answer (ok, the largest difference
    per latency, failures, every figure against its allowed error, seconds). The caller checks
    that the run has a summary."""

    def records() -> Iterator[dict[str, Any]]:
        for chunk in run_records_jsonl(run_obj=run_obj, include_warmup=True):
            for line in chunk.splitlines():
                if line:
                    yield json.loads(line)

    return verify_checked(run_obj.summary or {}, records())


# Beside the stable summary keys in the report's headline: (key, the name a person reads, the
# decimals shown, as Django's floatformat takes them).
HEADLINE_EXTRAS: tuple[tuple[str, str, str], ...] = (
    ("requests_per_s", "requests / s", "1"),
    ("output_tokens_per_s", "output tokens / s", "0"),
    ("cut_by_stop", "cut by the stop", "0"),
)


def summary_headline(summary: dict[str, Any] | None) -> list[tuple[str, Any, str]]:
    """The report's headline figures as (name, value, decimals): the stable summary keys
    (product doc §6), then throughput and the requests the stop cut (which are not errors)."""
    if not summary:
        return []
    rows: list[tuple[str, Any, str]] = [(k, summary[k], "-3") for k in SUMMARY_KEYS if k in summary]
    rows += [(label, summary[k], digits) for k, label, digits in HEADLINE_EXTRAS if k in summary]
    return rows


def summary_flat(summary: dict[str, Any] | None) -> list[tuple[str, Any]]:
    """The summary as (key, value) rows, latency percentiles spelled `ttft_ms.p50`; the
    placement counts each followed by its percentage (`placement.trees_split_pct`)."""
    if not summary:
        return []
    rows: list[tuple[str, Any]] = []
    seen: set[str] = set()
    for key in (*SUMMARY_KEYS, *LATENCY_KEYS, *sorted(summary)):
        if key in seen or key not in summary:
            continue
        seen.add(key)
        value = summary[key]
        if key == "placement" and isinstance(value, dict):
            rows.extend(placement_rows(value))
        elif isinstance(value, dict):
            for sub, inner in value.items():
                rows.append(
                    (
                        f"{key}.{sub}",
                        inner if not isinstance(inner, dict | list) else json.dumps(inner),
                    )
                )
        elif isinstance(value, list):
            rows.append((key, json.dumps(value)))
        else:
            rows.append((key, value))
    return rows


def run_summary_csv(*, run_obj: Run) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["key", "value"])
    writer.writerow(["run_id", str(run_obj.uuid)])
    writer.writerow(["status", run_obj.status])
    for key, value in summary_flat(run_obj.summary):
        writer.writerow([key, "" if value is None else value])
    return out.getvalue()
