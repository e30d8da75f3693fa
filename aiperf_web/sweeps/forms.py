"""The sweep launch form: scenario, endpoint or simulated, the load axis and its values, the
mode (list, auto, slo with its SLOs), the arms (a preset or JSON), repeats, base overrides."""

from __future__ import annotations

import json
from typing import Any, cast

from django import forms

from aiperf_web.core.forms import JSONObjectField
from aiperf_web.teams.labels import team_ids, team_suffix

# Arms people compare most (issue 20): the name and overrides of each.
PRESETS: dict[str, list[dict[str, Any]]] = {
    "legacy-vs-spawn-pin": [
        {"name": "legacy", "overrides": {"policy": "legacy"}},
        {"name": "spawn-pin", "overrides": {"policy": "spawn-pin"}},
    ],
    "lineage-vs-conversation": [
        {"name": "lineage", "overrides": {"affinity": "dynamo-headers", "scope": "lineage"}},
        {
            "name": "conversation",
            "overrides": {"affinity": "dynamo-headers", "scope": "conversation"},
        },
    ],
}
PRESET_CHOICES = [
    ("", "one arm: the scenario as it is"),
    ("legacy-vs-spawn-pin", "legacy vs spawn-pin (routing policy)"),
    ("lineage-vs-conversation", "lineage vs conversation (dynamo-headers scope)"),
    ("custom", "custom arms (JSON below)"),
]


class SweepLaunchForm(forms.Form):
    scenario = forms.ChoiceField()
    target = forms.ChoiceField(label="Endpoint")
    axis = forms.ChoiceField(
        choices=[("concurrency", "concurrency (lanes)"), ("rate_per_s", "rate (trees per s)")],
        initial="concurrency",
        label="Load axis",
    )
    loads = forms.CharField(
        max_length=2000,
        initial="1, 2, 4, 8, 16",
        label="Loads",
        help_text="comma-separated values of the axis, e.g. 1, 2, 4, 8, 16",
    )
    mode = forms.ChoiceField(
        choices=[
            ("list", "list: every load"),
            ("auto", "auto: synchronous and saturation first, then points between"),
            ("slo", "slo: the highest load meeting the SLOs (bracket and bisect)"),
        ],
        initial="list",
    )
    auto_points = forms.IntegerField(
        required=False, min_value=1, max_value=50, label="auto: points between", initial=4
    )
    slo_ttft_ms = forms.FloatField(required=False, min_value=0, label="SLO TTFT (ms)")
    slo_itl_ms = forms.FloatField(required=False, min_value=0, label="SLO ITL (ms)")
    slo_latency_ms = forms.FloatField(required=False, min_value=0, label="SLO latency (ms)")
    goodput_fraction = forms.FloatField(
        required=False,
        min_value=0.01,
        max_value=1,
        label="good share needed",
        help_text="0.95: each threshold held as a p95",
    )
    preset = forms.ChoiceField(choices=PRESET_CHOICES, required=False, label="Arms")
    arms = forms.CharField(
        required=False,
        max_length=20_000,
        widget=forms.Textarea(attrs={"rows": 4}),
        label="Custom arms (JSON)",
        help_text='[{"name": "a", "overrides": {"policy": "legacy"}}, ...], up to 6',
    )
    repeats = forms.IntegerField(min_value=1, max_value=20, initial=1)
    overrides = JSONObjectField(
        label="Every point's overrides (JSON)",
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text='run-spec knobs all points start from, e.g. {"max_requests": 200}',
    )

    def __init__(
        self, *args: Any, scenarios: list[Any], endpoints: list[Any], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        teams = team_ids(scenarios, endpoints)
        cast(forms.ChoiceField, self.fields["scenario"]).choices = [
            (str(s.uuid), s.name + team_suffix(s.team, teams=teams)) for s in scenarios
        ]
        ordered = sorted(endpoints, key=lambda e: (not e.is_builtin, e.team.name, e.name))
        cast(forms.ChoiceField, self.fields["target"]).choices = [
            (str(e.uuid), f"{e.name} — {e.base_url}{team_suffix(e.team, teams=teams)}")
            for e in ordered
        ] + [("simulated", "simulated cluster (virtual time)")]

    def clean_loads(self) -> list[float]:
        raw = str(self.cleaned_data["loads"])
        values: list[float] = []
        for part in raw.replace(";", ",").split(","):
            part = part.strip()
            if not part:
                continue
            try:
                values.append(float(part))
            except ValueError:
                raise forms.ValidationError(f"{part!r} is not a number") from None
        if not values:
            raise forms.ValidationError("give at least one load")
        return values

    def clean_arms(self) -> list[Any] | None:
        raw = str(self.cleaned_data.get("arms") or "").strip()
        if not raw:
            return None
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"not JSON: {exc.msg} at line {exc.lineno}") from None
        if not isinstance(parsed, list):
            raise forms.ValidationError('a JSON list of {"name": ..., "overrides": {...}}')
        return parsed

    def sweep_body(self) -> dict[str, Any]:
        """The API's `sweep` object from the cleaned form (validated by the service)."""
        d = self.cleaned_data
        loads = d["loads"]
        body: dict[str, Any] = {"mode": d["mode"], "repeats": d["repeats"]}
        if d["axis"] == "concurrency":
            body["concurrency"] = [int(v) if float(v).is_integer() else v for v in loads]
        else:
            body["rate_per_s"] = loads
        if d["mode"] == "auto" and d.get("auto_points"):
            body["auto_points"] = d["auto_points"]
        slo = {
            key: d[f"slo_{key}"]
            for key in ("ttft_ms", "itl_ms", "latency_ms")
            if d.get(f"slo_{key}") is not None
        }
        if slo:
            if d.get("goodput_fraction") is not None:
                slo["goodput_fraction"] = d["goodput_fraction"]
            body["slo"] = slo
        preset = d.get("preset") or ""
        if preset in PRESETS:
            body["arms"] = PRESETS[preset]
        elif d.get("arms"):
            body["arms"] = d["arms"]
        return body
