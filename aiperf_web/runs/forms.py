from __future__ import annotations

import json
from typing import Any, cast

from django import forms

from aiperf_web.core.forms import spec_fields
from aiperf_web.endpoints.models import ServerKind
from aiperf_web.runs.models import Status
from runner import POLICIES, SCOPES

# The knobs the launch page shows (docs/product.md §5); any other goes in "more overrides".
LAUNCH_KNOBS = (
    "policy",
    "affinity",
    "scope",
    "affinity_actions",
    "concurrency",
    "duration_s",
    "max_requests",
    "speedup",
    "client_workers",
    "seed",
)


class RunFilterForm(forms.Form):
    status = forms.ChoiceField(required=False, choices=[("", "any status"), *Status.choices])
    scenario = forms.ChoiceField(required=False)
    endpoint = forms.ChoiceField(required=False)
    tag = forms.CharField(required=False, max_length=40)
    policy = forms.ChoiceField(
        required=False, choices=[("", "any policy"), *((p, p) for p in POLICIES)]
    )
    scope = forms.ChoiceField(
        required=False, choices=[("", "any scope"), *((s, s) for s in SCOPES)]
    )
    q = forms.CharField(required=False, max_length=100, label="Search")
    created_from = forms.DateField(
        required=False, widget=forms.DateInput(attrs={"type": "date"}), label="From"
    )
    created_to = forms.DateField(
        required=False, widget=forms.DateInput(attrs={"type": "date"}), label="To"
    )

    def __init__(
        self, *args: Any, scenarios: list[Any], endpoints: list[Any], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["scenario"]).choices = [("", "any scenario")] + [
            (str(s.uuid), s.name) for s in scenarios
        ]
        cast(forms.ChoiceField, self.fields["endpoint"]).choices = [
            ("", "any target"),
            ("simulated", "simulated cluster"),
        ] + [(str(e.uuid), e.name) for e in endpoints]


class LaunchForm(forms.Form):
    scenario = forms.ChoiceField()
    target = forms.ChoiceField(label="Endpoint")
    sim_workers = forms.IntegerField(
        required=False,
        min_value=1,
        label="simulated workers",
        help_text="inference workers of the simulated cluster",
    )
    more = forms.CharField(
        required=False,
        label="More overrides (JSON)",
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text='any run-spec knob, e.g. {"start_window": [0, 1], "warmup_s": 5}',
    )
    tags = forms.CharField(required=False, max_length=500, help_text="comma-separated")
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))

    def __init__(
        self, *args: Any, scenarios: list[Any], endpoints: list[Any], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["scenario"]).choices = [
            (str(s.uuid), f"{s.name} ({s.team.name})") for s in scenarios
        ]
        # The built-in mock first: the ready endpoint of a fresh install.
        ordered = sorted(endpoints, key=lambda e: (not e.is_builtin, e.team.name, e.name))
        cast(forms.ChoiceField, self.fields["target"]).choices = [
            (str(e.uuid), f"{e.name} — {e.base_url} ({e.team.name})") for e in ordered
        ] + [("simulated", "simulated cluster (virtual time)")]
        self.knob_fields = spec_fields("", only=LAUNCH_KNOBS, blank=True)
        self.fields.update(self.knob_fields)
        self.fields["affinity_actions"].help_text = (
            "dynamo-nvext only: bind (development builds) or open (Dynamo 1.2.x); blank = what "
            "the endpoint's connection test found, else the scenario's"
        )
        self.affinity_by_target = _affinity_by_target(ordered, self.fields["affinity"])
        # The target the page opens with: the one asked for, else the first listed.
        target = self.data.get("target") if self.is_bound else self.initial.get("target")
        if target not in self.affinity_by_target:
            target = str(ordered[0].uuid) if ordered else "simulated"
        self._offer_affinity(str(target))

    def _offer_affinity(self, target: str) -> None:
        """Offer only the affinity modes the chosen target accepts (the page's script does the
        same when another target is picked); preset dynamo-nvext's actions to the detected
        generation's."""
        offer = self.affinity_by_target[target]
        field = cast(forms.ChoiceField, self.fields["affinity"])
        field.choices = [("", "— keep —"), *((m, m) for m in offer["choices"])]
        field.help_text = offer["note"]
        field.error_messages["invalid_choice"] = (
            "%(value)s will not work on this endpoint; modes that work there: "
            + ", ".join(offer["choices"])
        )
        if not self.is_bound and offer["actions"]:
            self.initial.setdefault("affinity_actions", offer["actions"])

    def knob_group(self) -> list[forms.BoundField]:
        return [self[name] for name in self.knob_fields]

    def clean_more(self) -> dict[str, Any]:
        raw = (self.cleaned_data.get("more") or "").strip()
        if not raw:
            return {}
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"not JSON: {exc.msg} at line {exc.lineno}") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("a JSON object of knob: value")
        return value


def _affinity_by_target(endpoints: list[Any], field: forms.Field) -> dict[str, dict[str, Any]]:
    """Per target id: the affinity modes it accepts, the actions dynamo-nvext must use there,
    and a line saying why (what the connection test found, or that none ran yet)."""
    every = [str(v) for v, _ in cast(list[tuple[str, str]], cast(Any, field).choices) if v]
    out: dict[str, dict[str, Any]] = {
        "simulated": {
            "choices": every,
            "actions": None,
            "note": "the simulated cluster speaks the Dynamo generation of the scenario's "
            "simulated target",
        }
    }
    for e in endpoints:
        choices = list(e.affinity_choices)
        if e.affinity_detected:
            note = f"{e.name}: {e.affinity_headline}. Modes that work there: {', '.join(choices)}."
        elif e.server_kind == ServerKind.DYNAMO:
            note = (
                f"{e.name}: test the connection (Endpoints page) to see which modes this "
                "server accepts."
            )
        else:
            note = f"{e.name} is {e.get_server_kind_display()}: {', '.join(choices)}."
        out[str(e.uuid)] = {"choices": choices, "actions": e.nvext_actions, "note": note}
    return out


class RunMetaForm(forms.Form):
    tags = forms.CharField(required=False, max_length=500)
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    is_baseline = forms.BooleanField(required=False, label="baseline")
