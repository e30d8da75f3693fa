from __future__ import annotations

from typing import Any, cast

from django import forms

from aiperf_web.core.forms import JSONObjectField
from aiperf_web.teams.labels import team_ids, team_suffix

KNOB_CHOICES = [
    ("policy", "Routing policy: legacy, then spawn-pin (the client-side leak and its fix)"),
    (
        "scope",
        "Affinity scope: conversation, then lineage (children's first-turn cache hits), with "
        "the scenario's Dynamo affinity, or the one the endpoint's connection test found",
    ),
]


class ABForm(forms.Form):
    scenario = forms.ChoiceField()
    target = forms.ChoiceField(label="Target")
    knob = forms.ChoiceField(choices=KNOB_CHOICES, label="Compare", widget=forms.RadioSelect)
    duration_s = forms.FloatField(
        required=False, min_value=1, label="Duration (s)", help_text="blank = the scenario's"
    )
    concurrency = forms.IntegerField(
        required=False, min_value=1, label="Lanes", help_text="blank = the scenario's"
    )
    more = JSONObjectField(
        label="More overrides (JSON)",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text='the same for both runs, e.g. {"client_workers": 16}',
    )

    def __init__(
        self, *args: Any, scenarios: list[Any], endpoints: list[Any], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        teams = team_ids(scenarios, endpoints)
        cast(forms.ChoiceField, self.fields["scenario"]).choices = [
            (str(s.uuid), s.name + team_suffix(s.team, teams=teams)) for s in scenarios
        ]
        cast(forms.ChoiceField, self.fields["target"]).choices = [
            (str(e.uuid), f"{e.name} — {e.base_url}{team_suffix(e.team, teams=teams)}")
            for e in endpoints
        ] + [("simulated", "simulated cluster (virtual time: an hour in seconds)")]
        if not self.is_bound:
            self.initial.setdefault("knob", "policy")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        overrides: dict[str, Any] = dict(data.get("more") or {})
        for name in ("duration_s", "concurrency"):
            if data.get(name) is not None:
                overrides[name] = data[name]
        data["overrides"] = overrides
        return data
