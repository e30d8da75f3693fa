from __future__ import annotations

from typing import Any, cast

from django import forms

from aiperf_web.core import limits
from aiperf_web.core.forms import JSONObjectField
from aiperf_web.endpoints.models import ServerKind


class SecretTextarea(forms.Textarea):
    """A textarea that never renders its value (not even the one just posted back on an error)."""

    def format_value(self, value: Any) -> str | None:
        return None


_HEADERS = "an object of header name: string value"


class EndpointForm(forms.Form):
    team = forms.ChoiceField(required=False)
    name = forms.CharField(max_length=limits.NAME_CHARS)
    base_url = forms.CharField(
        max_length=limits.BASE_URL_CHARS, label="Base URL", help_text="e.g. http://127.0.0.1:8100"
    )
    model = forms.CharField(max_length=limits.MODEL_CHARS)
    server_kind = forms.ChoiceField(choices=ServerKind.choices, label="Server kind")
    api_key = forms.CharField(
        required=False,
        max_length=limits.API_KEY_CHARS,
        widget=forms.PasswordInput(render_value=False),
        label="API key",
        help_text="Stored encrypted and never shown again. Leave blank to keep the current "
        "key; changing the base URL removes it unless you enter it again here.",
    )
    clear_api_key = forms.BooleanField(required=False, label="Remove the stored API key")
    extra_headers = JSONObjectField(
        shape=_HEADERS,
        string_values=True,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text='JSON object, e.g. {"X-Team": "perf"}; shown to every team member and kept '
        "in each run's spec: put credentials under Secret headers",
    )
    # Blank: keep the stored ones (the field is blank, as it always renders).
    secret_headers = JSONObjectField(
        shape=_HEADERS,
        string_values=True,
        blank_is_none=True,
        widget=SecretTextarea(attrs={"rows": 2, "autocomplete": "off"}),
        help_text='JSON object, e.g. {"api-key": "..."}: stored encrypted like the API key, '
        "never shown again, sent only by runs and connection tests. Leave blank to keep the "
        "stored ones; changing the base URL removes them unless you enter them again here.",
    )
    clear_secret_headers = forms.BooleanField(
        required=False, label="Remove the stored secret headers"
    )

    def __init__(self, *args: Any, teams: list[Any], editing: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["team"]).choices = [
            (str(t.uuid), t.name) for t in teams
        ]
        if editing or len(teams) <= 1:
            del self.fields["team"]
        if not editing:
            del self.fields["clear_api_key"]
            del self.fields["clear_secret_headers"]
