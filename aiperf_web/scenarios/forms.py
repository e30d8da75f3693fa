from __future__ import annotations

from typing import Any, cast

from django import forms
from django.conf import settings

from aiperf_web.core import limits
from aiperf_web.core.forms import spec_fields
from aiperf_web.scenarios.samples import available_samples
from runner import DEFAULT_MAX_BYTES, FILE_FORMATS


class TraceUploadForm(forms.Form):
    team = forms.ChoiceField(required=False)
    file = forms.FileField(
        help_text="native JSONL, aiperf dag_jsonl, Claude Code JSON, Mooncake JSONL or Azure CSV, "
        f"up to {DEFAULT_MAX_BYTES // 2**20} MiB"
    )
    # The engine's file formats, read from the engine: a new loader shows up here by itself.
    format = forms.ChoiceField(
        required=False,
        choices=[("", "auto: tell from the content"), *((f.value, f.value) for f in FILE_FORMATS)],
        help_text="pick one when the format cannot be told from the content",
    )
    name = forms.CharField(
        required=False, max_length=limits.TRACE_NAME_CHARS, help_text="default: the file name"
    )

    def __init__(self, *args: Any, teams: list[Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["team"]).choices = [
            (str(t.uuid), t.name) for t in teams
        ]
        if len(teams) <= 1:
            del self.fields["team"]


class SampleImportForm(forms.Form):
    team = forms.ChoiceField(required=False)
    sample = forms.ChoiceField()

    def __init__(self, *args: Any, teams: list[Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Read per form: which samples are installed is a property of the machine.
        offered = available_samples()
        cast(forms.ChoiceField, self.fields["sample"]).choices = [
            (s.key, f"{s.key} — {s.title}") for s in offered
        ]
        if not offered:
            # Nothing to pick: the form says why instead of "This field is required".
            self.fields["sample"].required = False
        cast(forms.ChoiceField, self.fields["team"]).choices = [
            (str(t.uuid), t.name) for t in teams
        ]
        if len(teams) <= 1:
            del self.fields["team"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not available_samples():
            raise forms.ValidationError(
                f"No built-in sample is installed on this server: samples are public traces "
                f"read from AIPERF_SAMPLES_DIR ({settings.AIPERF_SAMPLES_DIR}). Upload a trace "
                f"file instead."
            )
        return data


class ScenarioForm(forms.Form):
    """Name, description, tags, workload (traces and/or the synthetic generator) and every
    knob of the default run spec, generated from the engine's models."""

    team = forms.ChoiceField(required=False)
    name = forms.CharField(max_length=limits.NAME_CHARS)
    description = forms.CharField(
        required=False,
        max_length=limits.DESCRIPTION_CHARS,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=f"at most {limits.DESCRIPTION_CHARS} characters",
    )
    tags = forms.CharField(
        required=False, max_length=limits.TAGS_STORED_CHARS, help_text="comma-separated"
    )
    traces = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="none: the synthetic generator",
    )
    use_synthetic = forms.BooleanField(
        required=False, label="Add the synthetic generator", help_text="its parameters are below"
    )

    def __init__(
        self, *args: Any, teams: list[Any], traces: list[Any], editing: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["team"]).choices = [
            (str(t.uuid), t.name) for t in teams
        ]
        if editing or len(teams) <= 1:
            del self.fields["team"]
        cast(forms.ChoiceField, self.fields["traces"]).choices = [
            (str(t.uuid), f"{t.name} ({t.format}, {t.stats.get('requests', '?')} requests)")
            for t in traces
        ]
        self.knob_fields = spec_fields("")
        self.target_fields = spec_fields("target")
        self.synthetic_fields = spec_fields("synthetic")
        self.fields.update(self.knob_fields)
        self.fields.update(self.target_fields)
        self.fields.update(self.synthetic_fields)

    def knob_group(self) -> list[forms.BoundField]:
        return [self[name] for name in self.knob_fields]

    def target_group(self) -> list[forms.BoundField]:
        return [self[name] for name in self.target_fields]

    def synthetic_group(self) -> list[forms.BoundField]:
        return [self[name] for name in self.synthetic_fields]
