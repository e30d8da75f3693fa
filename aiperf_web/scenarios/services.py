"""Writes of traces and scenarios. A trace is validated by the engine's loader and inspected
before anything is saved; a scenario's spec is validated into the engine's RunSpec."""

from __future__ import annotations

import gzip
import hashlib
import re
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from django.db import IntegrityError, transaction

from aiperf_web.core.errors import Conflict, Invalid, NotFound
from aiperf_web.core.limits import (
    DESCRIPTION_CHARS,
    NAME_CHARS,
    SCENARIO_TRACES_MAX,
    TRACE_NAME_CHARS,
    text_within,
)
from aiperf_web.core.specs import spec_json, spec_parse
from aiperf_web.core.tags import tags_normalize
from aiperf_web.core.webhooks import webhook_set
from aiperf_web.scenarios.models import Scenario, Trace
from aiperf_web.scenarios.samples import SAMPLES
from aiperf_web.teams.models import Role, Team
from aiperf_web.teams.selectors import AnyUser, require_role, user_or_none
from runner import (
    DEFAULT_MAX_BYTES,
    FILE_FORMATS,
    PRESETS,
    RunSpec,
    SpecError,
    TraceError,
    apply_preset,
    dump_native,
    inspect_trace,
    load_trace,
)
from runner import Trace as RunnerTrace

# The advice for a file whose format its content does not show (the engine's says "pass
# --format", a CLI flag).
FORMAT_FIX = "name its format"
# Trace references inside a stored spec: the worker replaces each with a file it writes.
TRACE_REF = "trace:"
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def trace_ref(trace: Trace) -> str:
    return f"{TRACE_REF}{trace.uuid}"


def _safe_filename(filename: str) -> str:
    name = _SAFE_NAME.sub("_", Path(filename or "trace").name).strip("._") or "trace"
    return name[-120:]


def _read_limited(chunks: Iterable[bytes], *, limit: int) -> bytes:
    buf = bytearray()
    for chunk in chunks:
        buf += chunk
        if len(buf) > limit:
            raise Invalid.field(
                "file", f"the file is larger than the limit of {limit // 1_000_000} MB"
            )
    if not buf:
        raise Invalid.field("file", "the file is empty")
    return bytes(buf)


def _inspect(
    content: bytes, *, filename: str, format: str = "", format_fix: str = FORMAT_FIX
) -> dict[str, Any]:
    """Load the bytes with the engine's loader (format detected from the content unless
    given) and return its statistics; Invalid on field `file` (`format` for an unknown one)
    with the loader's line-precise message."""
    names = [f.value for f in FILE_FORMATS]
    if format and format not in names:
        raise Invalid.field("format", f"unknown format {format[:40]!r}: one of {', '.join(names)}")
    with tempfile.TemporaryDirectory(prefix="aiperf-upload-") as tmp:
        path = Path(tmp) / filename
        path.write_bytes(content)
        try:
            trace = load_trace(path, format=format or None)
            stats: dict[str, Any] = dict(inspect_trace(trace))
        except TraceError as exc:
            # The loader names the temporary path, and its fix a CLI flag; the person knows
            # the file by its name and picks a format where the upload asks for it.
            message = str(exc).replace(str(path), filename).replace("pass --format", format_fix)
            raise Invalid.field("file", message) from None
        except (UnicodeDecodeError, ValueError, OSError) as exc:
            raise Invalid.field("file", f"{filename}: unreadable trace ({exc})") from None
    stats.pop("source", None)
    if format:
        # Chosen by hand: the worker loads the file in this format (see trace_content).
        stats["format_chosen"] = True
    return stats


def trace_upload(
    *,
    actor: AnyUser,
    team: Team,
    filename: str,
    chunks: Iterable[bytes],
    name: str = "",
    sample: str = "",
    format: str = "",
    format_fix: str = FORMAT_FIX,
) -> Trace:
    """Store a trace file once the engine has loaded it: in `format` when given (one of the
    engine's FILE_FORMATS), else the format its content shows. `format_fix` words the advice
    of an undetectable format for where the person is (a form's list, an API field)."""
    require_role(user=actor, team=team, role=Role.MEMBER)
    filename = _safe_filename(filename)
    name = text_within((name or filename).strip(), field="name", limit=TRACE_NAME_CHARS)
    if Trace.objects.filter(team=team, name=name).exists():
        raise Invalid.field("name", f"team {team.name} has a trace named {name!r}")
    content = _read_limited(chunks, limit=DEFAULT_MAX_BYTES)
    stats = _inspect(content, filename=filename, format=format, format_fix=format_fix)
    try:
        with transaction.atomic():
            return Trace.objects.create(
                team=team,
                name=name,
                filename=filename,
                format=str(stats.get("format", "")),
                size_bytes=len(content),
                sha256=hashlib.sha256(content).hexdigest(),
                content_gz=gzip.compress(content, compresslevel=6),
                stats=stats,
                sample=sample,
                created_by=user_or_none(actor),
            )
    except IntegrityError:
        raise Conflict.field("name", f"a trace named {name!r} exists") from None


def trace_import_sample(*, actor: AnyUser, team: Team, key: str, name: str = "") -> Trace:
    sample = SAMPLES.get(key)
    if sample is None:
        raise Invalid.field("sample", f"no built-in sample {key!r}")
    if not sample.available:
        raise Invalid.field(
            "sample",
            f"sample {key!r} is not installed here: {sample.path} is missing "
            "(set AIPERF_SAMPLES_DIR to the folder holding the public traces)",
        )
    existing = Trace.objects.filter(team=team, sample=key).first()
    if existing is not None and not name:
        require_role(user=actor, team=team, role=Role.MEMBER)
        return existing
    return trace_upload(
        actor=actor,
        team=team,
        filename=sample.filename,
        chunks=[sample.path.read_bytes()],
        name=name or key,
        sample=key,
    )


def trace_delete(*, actor: AnyUser, trace: Trace) -> None:
    require_role(user=actor, team=trace.team, role=Role.MEMBER)
    used_by = list(trace.scenarios.values_list("name", flat=True)[:5])
    if used_by:
        raise Conflict.field("trace", f"used by scenario(s) {', '.join(used_by)}")
    trace.delete()


def trace_content(*, trace_id: object) -> tuple[str, bytes]:
    """A trace's file (name, bytes) as the worker's engine will load it, by public id.

    The engine tells a file's format from its content; a trace whose format was chosen by
    hand at upload is handed over in native form (the same trees, written by the engine) so
    that it loads as it was inspected."""
    trace = (
        Trace.objects.filter(uuid=str(trace_id))
        .only("filename", "content_gz", "format", "stats")
        .first()
    )
    if trace is None:
        raise NotFound(f"trace {trace_id} no longer exists")
    content = gzip.decompress(bytes(trace.content_gz))
    if not trace.stats.get("format_chosen"):
        return trace.filename, content
    with tempfile.TemporaryDirectory(prefix="aiperf-trace-") as tmp:
        path = Path(tmp) / trace.filename
        path.write_bytes(content)
        loaded = load_trace(path, format=trace.format)
    return f"{Path(trace.filename).stem}.native.jsonl", dump_native(loaded).encode()


def trace_loaded(*, trace_id: object) -> RunnerTrace:
    """A stored trace loaded by the engine, as a run would load it (the trace page's trees)."""
    filename, content = trace_content(trace_id=trace_id)
    with tempfile.TemporaryDirectory(prefix="aiperf-trace-") as tmp:
        path = Path(tmp) / filename
        path.write_bytes(content)
        try:
            return load_trace(path)
        except TraceError as exc:
            raise Invalid.field("trace", str(exc).replace(str(path), filename)) from None


def _resolve_traces(*, team: Team, trace_ids: Sequence[object]) -> list[Trace]:
    if len(trace_ids) > SCENARIO_TRACES_MAX:
        raise Invalid.field(
            "traces", f"at most {SCENARIO_TRACES_MAX} traces (these are {len(trace_ids)})"
        )
    traces: list[Trace] = []
    for trace_id in trace_ids:
        trace = Trace.objects.filter(team=team, uuid=str(trace_id)).defer("content_gz").first()
        if trace is None:
            raise Invalid.field("traces", f"no trace {trace_id} in team {team.name}")
        traces.append(trace)
    return traces


def _scenario_spec(spec: dict[str, Any], traces: list[Trace]) -> RunSpec:
    data = dict(spec)
    workload = dict(data.get("workload") or {})
    workload["traces"] = [trace_ref(t) for t in traces]
    data["workload"] = workload
    return spec_parse(data, prefix="spec")


def _scenario_name(name: str) -> str:
    name = text_within(name.strip(), field="name", limit=NAME_CHARS)
    if not name:
        raise Invalid.field("name", "a scenario needs a name")
    return name


def scenario_create(
    *,
    actor: AnyUser,
    team: Team,
    name: str,
    spec: dict[str, Any],
    trace_ids: Sequence[object] = (),
    description: str = "",
    tags: str | Iterable[str] = "",
) -> Scenario:
    require_role(user=actor, team=team, role=Role.MEMBER)
    name = _scenario_name(name)
    description = text_within(description.strip(), field="description", limit=DESCRIPTION_CHARS)
    if Scenario.objects.filter(team=team, name=name).exists():
        raise Invalid.field("name", f"team {team.name} has a scenario named {name!r}")
    tag_text = tags_normalize(tags)
    traces = _resolve_traces(team=team, trace_ids=trace_ids)
    run_spec = _scenario_spec(spec, traces)
    try:
        with transaction.atomic():
            scenario = Scenario.objects.create(
                team=team,
                name=name,
                description=description,
                tags=tag_text,
                spec=spec_json(run_spec),
                created_by=user_or_none(actor),
            )
            scenario.traces.set(traces)
    except IntegrityError:
        raise Conflict.field("name", f"a scenario named {name!r} exists") from None
    return scenario


# The sample trace a preset replays when the team gives none (AgentX: Claude Code sessions).
PRESET_SAMPLES = {"agentx": "claude-code-subagents"}


def scenario_create_preset(
    *,
    actor: AnyUser,
    team: Team,
    preset: str,
    name: str = "",
    trace_ids: Sequence[object] = (),
) -> Scenario:
    """A scenario with a benchmark's settings (runner's PRESETS: `agentx` = InferenceX AgentX):
    its traces, or the preset's built-in sample imported for the team. The target's knobs of a
    preset (AgentX's 10 % failed-request stop) go with the endpoint a run picks: a launch sets
    them as overrides (`target.stop_error_share`)."""
    if preset not in PRESETS:
        raise Invalid.field("preset", f"no preset {preset!r}: one of {', '.join(sorted(PRESETS))}")
    if not trace_ids:
        sample = PRESET_SAMPLES.get(preset)
        if sample is None:
            raise Invalid.field("traces", f"the {preset} preset needs traces")
        trace_ids = [trace_import_sample(actor=actor, team=team, key=sample).uuid]
    traces = _resolve_traces(team=team, trace_ids=trace_ids)
    spec = {**scenario_default_spec(), "workload": {"traces": [trace_ref(t) for t in traces]}}
    try:
        data = apply_preset(preset, spec, given=frozenset())
    except SpecError as exc:
        raise Invalid.field("preset", str(exc)) from None
    return scenario_create(
        actor=actor,
        team=team,
        name=name or preset,
        spec=data,
        trace_ids=trace_ids,
        description=PRESETS[preset].description,
        tags=["preset", preset],
    )


def scenario_update(
    *,
    actor: AnyUser,
    scenario: Scenario,
    name: str | None = None,
    description: str | None = None,
    tags: str | Iterable[str] | None = None,
    spec: dict[str, Any] | None = None,
    trace_ids: Sequence[object] | None = None,
) -> Scenario:
    require_role(user=actor, team=scenario.team, role=Role.MEMBER)
    if name is not None:
        name = _scenario_name(name)
        clash = Scenario.objects.filter(team=scenario.team, name=name).exclude(pk=scenario.pk)
        if clash.exists():
            raise Conflict.field("name", f"a scenario named {name!r} exists")
        scenario.name = name
    if description is not None:
        scenario.description = text_within(
            description.strip(), field="description", limit=DESCRIPTION_CHARS
        )
    if tags is not None:
        scenario.tags = tags_normalize(tags)
    traces = (
        list(scenario.traces.all())
        if trace_ids is None
        else _resolve_traces(team=scenario.team, trace_ids=trace_ids)
    )
    if spec is not None or trace_ids is not None:
        scenario.spec = spec_json(_scenario_spec(scenario.spec if spec is None else spec, traces))
    with transaction.atomic():
        scenario.save()
        if trace_ids is not None:
            scenario.traces.set(traces)
    return scenario


def scenario_webhook_set(
    *,
    actor: AnyUser,
    scenario: Scenario,
    url: str,
    secret: str = "",
    clear_secret: bool = False,
) -> Scenario:
    """The scenario's run-end webhook (members): called for each of its runs that ends,
    beside the team's."""
    require_role(user=actor, team=scenario.team, role=Role.MEMBER)
    webhook_set(scenario, url=url, secret=secret, clear_secret=clear_secret)
    return scenario


def scenario_delete(*, actor: AnyUser, scenario: Scenario) -> None:
    require_role(user=actor, team=scenario.team, role=Role.MEMBER)
    scenario.delete()


def scenario_run_spec(*, scenario: Scenario) -> RunSpec:
    """The scenario's default spec, with its current traces referenced."""
    return _scenario_spec(scenario.spec, list(scenario.traces.all()))


def scenario_default_spec() -> dict[str, Any]:
    """What a new scenario's form starts from: the engine's defaults, with a stop so that it
    can also run against a live endpoint."""
    return spec_json(spec_parse({"duration_s": 60}))
