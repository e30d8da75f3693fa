from __future__ import annotations

import json
from typing import Any, cast

from django import forms

from aiperf_web.core.forms import spec_fields
from aiperf_web.runs.models import Status

# The knobs the launch page shows (PRODUCT.md §5); any other goes in "more overrides".
LAUNCH_KNOBS = (
    "policy",
    "affinity",
    "scope",
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
        required=False,
        choices=[("", "any policy"), ("spawn-pin", "spawn-pin"), ("legacy", "legacy"),
                 ("least-loaded", "least-loaded")],
    )  # fmt: skip
    scope = forms.ChoiceField(
        required=False,
        choices=[("", "any scope"), ("conversation", "conversation"), ("lineage", "lineage")],
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


class RunMetaForm(forms.Form):
    tags = forms.CharField(required=False, max_length=500)
    notes = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    is_baseline = forms.BooleanField(required=False, label="baseline")
