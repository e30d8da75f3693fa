"""Writes of the reports app: the paired A/B launch.

A pair is two runs of one scenario on one target with the same overrides and seed, differing
in one knob (the routing policy or the affinity scope). Both are stored `queued` in one
transaction; after commit they are sent as one Celery chain, so the second starts only when
the first has ended, on whichever worker is free (the two never compete for the machine).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction

from aiperf_web.core.errors import Invalid
from aiperf_web.endpoints.selectors import endpoint_get
from aiperf_web.reports.models import ABPair
from aiperf_web.runs import services as run_svc
from aiperf_web.runs.models import Run
from aiperf_web.runs.tickets import tickets_send
from aiperf_web.scenarios.selectors import scenario_get
from aiperf_web.teams.selectors import AnyUser, user_or_none
from runner import DYNAMO_AFFINITIES, POLICIES, SCOPES

# The knobs a pair may vary, with the values each may take (RunSpec's own choices). A scope
# pair needs an affinity mode whose key the scope decides: DYNAMO_AFFINITIES, in the order a
# pair prefers them.
AB_KNOBS: dict[str, tuple[str, ...]] = {"policy": POLICIES, "scope": SCOPES}
# What a pair compares when it names no values: the client-side leak and its fix; the
# children's cache misses and lineage's fix.
AB_DEFAULTS = {"policy": ("legacy", "spawn-pin"), "scope": ("conversation", "lineage")}


def _scope_affinity(*, actor: AnyUser, scenario_id: object, endpoint_id: object) -> str:
    """The affinity mode of a scope pair that sets none: the scenario's own when it is scoped
    and works on the target, else the first scoped mode the endpoint accepts (dynamo-headers
    on a Dynamo release from 1.3 on, as its connection test found)."""
    allowed: tuple[str, ...] = DYNAMO_AFFINITIES
    if endpoint_id not in (None, "", run_svc.SIMULATED):
        endpoint = endpoint_get(user=actor, endpoint_id=endpoint_id)
        allowed = tuple(m for m in DYNAMO_AFFINITIES if m in endpoint.affinity_choices)
        if not allowed:
            raise Invalid.field(
                "endpoint",
                f"{endpoint.name} takes neither {' nor '.join(DYNAMO_AFFINITIES)} "
                f"(modes that work there: {', '.join(endpoint.affinity_choices)}): a scope pair "
                "has nothing to compare",
            )
    current = scenario_get(user=actor, scenario_id=scenario_id).spec.get("affinity")
    return current if current in allowed else allowed[0]


def ab_launch(
    *,
    actor: AnyUser,
    scenario_id: object,
    endpoint_id: object,
    knob: str,
    value_a: str,
    value_b: str,
    overrides: Mapping[str, Any] | None = None,
) -> ABPair:
    if knob not in AB_KNOBS:
        raise Invalid.field("knob", f"one of {', '.join(AB_KNOBS)}")
    for field, value in (("value_a", value_a), ("value_b", value_b)):
        if value not in AB_KNOBS[knob]:
            raise Invalid.field(field, f"{knob} is one of {', '.join(AB_KNOBS[knob])}")
    if value_a == value_b:
        raise Invalid.field("value_b", "the two runs must differ")
    base = dict(overrides or {})
    if knob in base:
        raise Invalid.field(f"overrides.{knob}", "set by the pair itself")
    if knob == "scope" and "affinity" not in base:
        base["affinity"] = _scope_affinity(
            actor=actor, scenario_id=scenario_id, endpoint_id=endpoint_id
        )
    if knob == "scope" and base["affinity"] not in DYNAMO_AFFINITIES:
        raise Invalid.field(
            "overrides.affinity", f"a scope pair needs affinity {' or '.join(DYNAMO_AFFINITIES)}"
        )
    with transaction.atomic():
        runs: list[Run] = []
        for label, value in (("A", value_a), ("B", value_b)):
            run_overrides = {**base, knob: value}
            runs.append(
                run_svc.run_launch(
                    actor=actor,
                    scenario_id=scenario_id,
                    endpoint_id=endpoint_id,
                    overrides=run_overrides,
                    tags=["ab", f"{knob}:{value}"],
                    notes=f"A/B run {label}: {knob} = {value}",
                    after=runs[0] if runs else None,  # one after the other, never at once
                    enqueue=False,
                )
            )
        run_a, run_b = runs
        if run_a.spec.get("seed") != run_b.spec.get("seed"):  # the same overrides: never
            raise Invalid.field("seed", "the two runs must share their seed")
        pair = ABPair.objects.create(
            team=run_a.team,
            scenario=run_a.scenario,
            knob=knob,
            value_a=value_a,
            value_b=value_b,
            run_a=run_a,
            run_b=run_b,
            created_by=user_or_none(actor),
        )
        tickets = (str(run_a.uuid), str(run_b.uuid))
        # Chained: the second ticket goes out once the first has been executed.
        transaction.on_commit(lambda: tickets_send(*tickets))
    return pair
