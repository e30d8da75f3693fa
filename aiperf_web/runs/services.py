"""The web's writes of runs: launch, cancel, re-run, tags/notes/baseline, delete; and telling a
run's viewers when its row changes. The worker's side (claims and the reaper: runs/claiming.py;
execute, finish, the watcher: runs/executing.py) uses these; nothing here imports them.

A run is launched `queued` in one transaction and a task (`runs.execute`, queue `runs`) is
sent only once that transaction commits. A task is a ticket, not an order: the worker that
takes one claims the queued run fairest to start, the oldest of the team with the fewest runs
running, skipping teams at AIPERF_TEAM_MAX_RUNNING (so one team's queue of long runs cannot keep
another team's short run waiting behind it). The claim is one conditional UPDATE (queued →
running must touch exactly one row) under a lock on the team's row, so a redelivered or
duplicated task never runs a run twice, a run cancelled while queued is never started, and two
workers never both take a team's last running slot. A ticket that finds nothing to claim is
dropped; every run that ends sends a new one when runs are waiting, so none is stranded.
Launches beyond AIPERF_TEAM_MAX_QUEUED queued runs per team are refused (TooMany).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from aiperf_web.core.errors import Conflict, Invalid, TooMany
from aiperf_web.core.limits import NOTES_CHARS, text_within
from aiperf_web.core.outbound import check_outbound_url
from aiperf_web.core.specs import spec_json, spec_override
from aiperf_web.core.tags import tags_normalize
from aiperf_web.endpoints.models import Endpoint
from aiperf_web.endpoints.selectors import endpoint_get
from aiperf_web.endpoints.services import endpoint_target
from aiperf_web.runs.fleet import fleet_check
from aiperf_web.runs.line import lease_log_waiting
from aiperf_web.runs.models import FINAL, Run, Status, TargetKind
from aiperf_web.runs.publisher import publish_runs_changed, publish_status, run_state
from aiperf_web.runs.tickets import tickets_send
from aiperf_web.scenarios.models import Scenario
from aiperf_web.scenarios.selectors import scenario_get
from aiperf_web.scenarios.services import scenario_run_spec
from aiperf_web.teams.models import Role, Team
from aiperf_web.teams.selectors import AnyUser, require_role, user_or_none
from runner import EndpointTarget, RunSpec, SimulatedTarget

log = logging.getLogger(__name__)

SIMULATED = "simulated"


# -- launch ----------------------------------------------------------------------------------


def run_launch(
    *,
    actor: AnyUser,
    scenario_id: object,
    endpoint_id: object = SIMULATED,
    overrides: Mapping[str, Any] | None = None,
    tags: str | Iterable[str] = "",
    notes: str = "",
    rerun_of: Run | None = None,
    after: Run | None = None,
    enqueue: bool = True,
    allow_overlap: bool = False,
) -> Run:
    """Validate everything, store the run `queued`, and enqueue it after commit (unless
    `enqueue` is false: then the caller sends it, as a paired A/B launch chains its runs).
    `after`: no worker starts this run before that one has ended. `allow_overlap`: it may
    start while another run uses its endpoint (runs.line's endpoint lease; the overlap is
    recorded on both). TooMany when the team already has AIPERF_TEAM_MAX_QUEUED runs queued;
    Invalid when a live run's duration_s is over AIPERF_TEAM_MAX_RUN_S."""
    on = launch_target(
        actor=actor, scenario_id=scenario_id, endpoint_id=endpoint_id, overrides=overrides
    )
    scenario, overrides, spec, endpoint = on.scenario, on.overrides, on.spec, on.endpoint
    tag_text = tags_normalize(tags)
    notes = text_within(notes.strip(), field="notes", limit=NOTES_CHARS)
    fleet_check(spec)
    _check_duration(spec, overrides=overrides)
    if endpoint is not None:
        spec = _affinity_for_endpoint(spec, endpoint=endpoint, overrides=overrides)
        assert isinstance(spec.target, EndpointTarget)
        check_outbound_url(spec.target.url, field="endpoint")
        if spec.target.metrics_scrape_url is not None:
            # Scrapes are outbound traffic too: the same allowlist as the endpoint.
            check_outbound_url(spec.target.metrics_scrape_url, field="overrides.target.metrics_url")

    with transaction.atomic():
        _check_queue_cap(team=scenario.team)
        new = Run.objects.create(
            team=scenario.team,
            scenario=scenario,
            scenario_name=scenario.name,
            endpoint=endpoint,
            endpoint_name=on.name,
            target_kind=on.kind,
            spec=spec_json(spec),
            overrides=dict(overrides),
            tags=tag_text,
            notes=notes,
            created_by=user_or_none(actor),
            rerun_of=rerun_of,
            after=after,
            allow_overlap=allow_overlap,
        )
        run_uuid = str(new.uuid)
        if endpoint is not None:
            endpoint_pk = endpoint.pk
            # Its log says which run holds its endpoint, if one does.
            transaction.on_commit(lambda: _lease_note(endpoint_pk))
        if enqueue:
            transaction.on_commit(lambda: tickets_send(run_uuid))
        # The team's runs lists show it queued.
        transaction.on_commit(lambda: _announce_team(new.team_id))
    return new


# -- what a launch and a re-launch check (runs' and sweeps', sweeps/services.py) ---------------


def launch_overrides(overrides: object) -> Mapping[str, Any]:
    """The launch's overrides, refused (Invalid naming the field) where they would change what
    the scenario or the chosen endpoint decides: the workload, and the target's URL, kind and
    key (the endpoint's key is sent only to the endpoint's own URL)."""
    if overrides is None:
        return {}
    if not isinstance(overrides, Mapping):
        raise Invalid.field("overrides", "must be an object of knob: value")
    if "workload" in overrides:
        # The workload is the scenario's; a run that replays other traces is another scenario.
        raise Invalid.field("overrides.workload", "the workload comes from the scenario")
    target_overrides = overrides.get("target")
    if isinstance(target_overrides, Mapping):
        for knob in ("url", "kind", "api_key"):
            if knob in target_overrides:
                raise Invalid.field(
                    f"overrides.target.{knob}", "comes from the chosen endpoint (or simulated)"
                )
    return overrides


@dataclass(frozen=True, slots=True)
class LaunchTarget:
    """What a launch (a run's or a sweep's) starts from, checked: the scenario, the overrides,
    the scenario's spec on the chosen target with the overrides applied, and what a run or a
    sweep stores of the target."""

    scenario: Scenario
    overrides: Mapping[str, Any]
    spec: RunSpec
    endpoint: Endpoint | None
    name: str  # endpoint_name: the endpoint's, or "simulated cluster"
    kind: str  # TargetKind


def launch_target(
    *, actor: AnyUser, scenario_id: object, endpoint_id: object, overrides: object
) -> LaunchTarget:
    """The actor's scenario (a member of its team may launch), `launch_overrides`, and the
    scenario's spec on the simulated cluster (`endpoint_id` None, "" or "simulated") or on the
    actor's endpoint of the scenario's team (Invalid when it is another team's), with the
    overrides on top (Invalid naming `overrides.<knob>`)."""
    scenario = scenario_get(user=actor, scenario_id=scenario_id)
    require_role(user=actor, team=scenario.team, role=Role.MEMBER)
    checked = launch_overrides(overrides)
    spec = scenario_run_spec(scenario=scenario)
    endpoint: Endpoint | None = None
    if endpoint_id in (None, "", SIMULATED):
        if not isinstance(spec.target, SimulatedTarget):
            spec = spec_override(spec, {"target": {"kind": "simulated"}})
        name, kind = "simulated cluster", TargetKind.SIMULATED
    else:
        endpoint = endpoint_get(user=actor, endpoint_id=endpoint_id)
        if endpoint.team_id != scenario.team_id:
            raise Invalid.field(
                "endpoint", "the endpoint belongs to another team than the scenario"
            )
        target = {"target": endpoint_target(endpoint=endpoint)}
        spec = spec_override(spec, target, prefix="endpoint")
        name, kind = endpoint.name, TargetKind.ENDPOINT
    spec = spec_override(spec, checked, prefix="overrides")
    return LaunchTarget(scenario, checked, spec, endpoint, name, kind)


class Relaunched(Protocol):
    """A run or a sweep, as a re-launch reads it."""

    @property
    def team(self) -> Team: ...
    @property
    def scenario(self) -> Scenario | None: ...
    @property
    def endpoint(self) -> Endpoint | None: ...
    @property
    def target_kind(self) -> str: ...


def relaunch_sources(*, actor: AnyUser, launched: Relaunched, what: str) -> tuple[Scenario, object]:
    """A re-run's scenario and endpoint id (or SIMULATED), once the actor may launch in the
    team; Conflict when the scenario or the endpoint it ran on was deleted since."""
    require_role(user=actor, team=launched.team, role=Role.MEMBER)
    if launched.scenario is None:
        raise Conflict.field("scenario", f"the scenario of this {what} was deleted")
    if launched.target_kind == TargetKind.ENDPOINT and launched.endpoint is None:
        raise Conflict.field("endpoint", f"the endpoint of this {what} was deleted")
    return launched.scenario, launched.endpoint.uuid if launched.endpoint else SIMULATED


def _lease_note(endpoint_pk: int) -> None:
    try:
        lease_log_waiting(endpoint_pk)
    except Exception:
        log.warning("writing the endpoint lease into waiting runs' logs failed", exc_info=True)


def _check_duration(spec: RunSpec, *, overrides: Mapping[str, Any]) -> None:
    """A live run lasts at most AIPERF_TEAM_MAX_RUN_S (so no team holds a slot for long);
    a simulated one runs in virtual time and takes seconds of a slot whatever its length."""
    limit = settings.AIPERF_TEAM_MAX_RUN_S
    if isinstance(spec.target, SimulatedTarget) or spec.duration_s is None:
        return
    if spec.duration_s > limit:
        field = "overrides.duration_s" if "duration_s" in overrides else "duration_s"
        raise Invalid.field(
            field,
            f"{spec.duration_s:g} s is longer than a run may last here: "
            f"{limit} s (AIPERF_TEAM_MAX_RUN_S); shorten it, or split the run",
        )


def team_lock(team_id: int) -> None:
    """Serialize launches and claims of one team until the transaction ends (PostgreSQL row
    lock; SQLite serializes writers anyway)."""
    list(Team.objects.select_for_update().filter(pk=team_id).values_list("pk", flat=True))


def _check_queue_cap(*, team: Team) -> None:
    team_lock(team.pk)
    cap = settings.AIPERF_TEAM_MAX_QUEUED
    queued = Run.objects.filter(team=team, status=Status.QUEUED).count()
    if queued >= cap:
        message = (
            f"team {team.name} already has {queued} runs queued, its cap "
            f"(AIPERF_TEAM_MAX_QUEUED = {cap}): launch again once some have started, or "
            "cancel some"
        )
        raise TooMany(message, fields={"team": message})


def _affinity_for_endpoint(
    spec: RunSpec, *, endpoint: Endpoint, overrides: Mapping[str, Any]
) -> RunSpec:
    """Refuse an affinity mode the endpoint cannot use (its kind, or what its last connection
    test found), naming the modes that work; preset dynamo-nvext's actions to the detected
    generation's unless the run sets them."""
    choices = endpoint.affinity_choices
    if spec.affinity not in choices:
        asked = "the override" if "affinity" in overrides else "the scenario's affinity"
        if endpoint.affinity_detected:
            why = f"its connection test found {endpoint.affinity_headline}"
        else:
            why = f"it does not apply to {endpoint.kind_with_article} endpoint"
        raise Invalid.field(
            "overrides.affinity",
            f"{spec.affinity} ({asked}) will not work on {endpoint.name}: {why}. "
            f"Modes that work there: {', '.join(choices)}",
        )
    actions = endpoint.nvext_actions
    if spec.affinity == "dynamo-nvext" and actions is not None:
        if "affinity_actions" not in overrides:
            spec = spec_override(spec, {"affinity_actions": actions}, prefix="overrides")
        elif spec.affinity_actions != actions:
            raise Invalid.field(
                "overrides.affinity_actions",
                f"{endpoint.name} is {endpoint.generation_label}: dynamo-nvext must use "
                f"affinity_actions {actions}",
            )
    return spec


def run_rerun(*, actor: AnyUser, run_obj: Run) -> Run:
    """A new run of the same spec (and the same scenario and target, when they still exist)."""
    scenario, endpoint_id = relaunch_sources(actor=actor, launched=run_obj, what="run")
    return run_launch(
        actor=actor,
        scenario_id=scenario.uuid,
        endpoint_id=endpoint_id,
        overrides=run_obj.overrides,
        tags=run_obj.tag_list,
        rerun_of=run_obj,
        allow_overlap=run_obj.allow_overlap,
    )


def run_update(
    *,
    actor: AnyUser,
    run_obj: Run,
    tags: str | Iterable[str] | None = None,
    notes: str | None = None,
    is_baseline: bool | None = None,
) -> Run:
    require_role(user=actor, team=run_obj.team, role=Role.MEMBER)
    fields: list[str] = []
    if tags is not None:
        run_obj.tags = tags_normalize(tags)
        fields.append("tags")
    if notes is not None:
        run_obj.notes = text_within(notes.strip(), field="notes", limit=NOTES_CHARS)
        fields.append("notes")
    if is_baseline is not None:
        run_obj.is_baseline = bool(is_baseline)
        fields.append("is_baseline")
    if fields:
        run_obj.save(update_fields=fields)
    return run_obj


def run_delete(*, actor: AnyUser, run_obj: Run) -> None:
    require_role(user=actor, team=run_obj.team, role=Role.MEMBER)
    if run_obj.is_active:
        raise Conflict.field("status", "cancel the run before deleting it")
    run_obj.delete()


def run_cancel(*, actor: AnyUser, run_obj: Run) -> Run:
    """A queued run is cancelled at once; a running one is asked to stop (its worker sees the
    request within a fraction of a second, stops the engine and keeps what was measured)."""
    require_role(user=actor, team=run_obj.team, role=Role.MEMBER)
    now = timezone.now()
    Run.objects.filter(pk=run_obj.pk, status=Status.QUEUED).update(
        status=Status.CANCELLED, finished_at=now, cancel_requested_at=now, reason="cancelled"
    )
    Run.objects.filter(
        pk=run_obj.pk, status=Status.RUNNING, cancel_requested_at__isnull=True
    ).update(cancel_requested_at=now)
    run_obj.refresh_from_db()
    run_announce(run_obj)
    return run_obj


def run_announce(run_obj: Run) -> None:
    """Tell the run's live viewers its row as it is now (status, reason, times), and its team's
    runs lists that it changed: after every write that changes them, so no viewer polls the row
    (aiperf_web/runs/publisher.py)."""
    _announce_team(run_obj.team_id)
    publish_status(
        run_uuid=str(run_obj.uuid),
        state=run_state(
            status=run_obj.status,
            reason=run_obj.reason,
            started_at=run_obj.started_at,
            finished_at=run_obj.finished_at,
            cancel_requested_at=run_obj.cancel_requested_at,
        ),
    )


def _announce_team(team_id: int) -> None:
    team_uuid = Team.objects.filter(pk=team_id).values_list("uuid", flat=True).first()
    if team_uuid is not None:
        publish_runs_changed(team_uuid=str(team_uuid))


def run_announce_pk(pk: int) -> None:
    row = Run.objects.filter(pk=pk).first()
    if row is not None:
        run_announce(row)


__all__ = [
    "FINAL",
    "LaunchTarget",
    "launch_overrides",
    "launch_target",
    "relaunch_sources",
    "run_announce",
    "run_announce_pk",
    "run_cancel",
    "run_delete",
    "run_launch",
    "run_rerun",
    "run_update",
    "team_lock",
]
