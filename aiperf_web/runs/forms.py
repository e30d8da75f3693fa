from __future__ import annotations

import re
from typing import Any, cast

from django import forms

from aiperf_web.core import limits
from aiperf_web.core.forms import JSONObjectField, spec_fields, spec_initial
from aiperf_web.endpoints.models import ServerKind
from aiperf_web.runs.models import Status
from aiperf_web.teams.labels import team_ids, team_suffix
from runner import AFFINITIES, POLICIES, SCOPES, accepted_affinities

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
    "client_worker_processes",
    "client_workers_per_host",
    "seed",
)


class RunFilterForm(forms.Form):
    status = forms.ChoiceField(required=False, choices=[("", "any status"), *Status.choices])
    scenario = forms.ChoiceField(required=False)
    endpoint = forms.ChoiceField(required=False)
    tag = forms.CharField(required=False, max_length=limits.TAG_CHARS)
    policy = forms.ChoiceField(
        required=False, choices=[("", "any policy"), *((p, p) for p in POLICIES)]
    )
    scope = forms.ChoiceField(
        required=False, choices=[("", "any scope"), *((s, s) for s in SCOPES)]
    )
    q = forms.CharField(required=False, max_length=limits.SEARCH_CHARS, label="Search")
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
    more = JSONObjectField(
        label="More overrides (JSON)",
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text='any run-spec knob, e.g. {"start_window": [0, 1], "warmup_s": 5}',
    )
    tags = forms.CharField(
        required=False, max_length=limits.TAGS_STORED_CHARS, help_text="comma-separated"
    )
    notes = forms.CharField(
        required=False,
        max_length=limits.NOTES_CHARS,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=f"at most {limits.NOTES_CHARS} characters",
    )
    allow_overlap = forms.BooleanField(
        required=False,
        label="Share the endpoint",
        help_text="start even while another run uses the endpoint (each one's latencies then "
        "include the other's load; the overlap is recorded on both runs)",
    )

    def __init__(
        self, *args: Any, scenarios: list[Any], endpoints: list[Any], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        teams = team_ids(scenarios, endpoints)
        cast(forms.ChoiceField, self.fields["scenario"]).choices = [
            (str(s.uuid), s.name + team_suffix(s.team, teams=teams)) for s in scenarios
        ]
        # The built-in mock first: the ready endpoint of a fresh install.
        ordered = sorted(endpoints, key=lambda e: (not e.is_builtin, e.team.name, e.name))
        cast(forms.ChoiceField, self.fields["target"]).choices = [
            (str(e.uuid), f"{e.name} — {e.base_url}{team_suffix(e.team, teams=teams)}")
            for e in ordered
        ] + [("simulated", "simulated cluster (virtual time)")]
        self.knob_fields = spec_fields("", only=LAUNCH_KNOBS, blank=True)
        for field in self.knob_fields.values():
            # Blank keeps the scenario's value, shown in the input: the engine's own defaults
            # quoted in its descriptions would mislead here.
            field.help_text = _ENGINE_DEFAULT.sub("", str(field.help_text))
        self.fields.update(self.knob_fields)
        # Per scenario, each knob's value as the form shows it (the page's script swaps
        # them in when another scenario is picked).
        self.scenario_values = {
            str(s.uuid): knob_hints(s.spec, self.knob_fields) for s in scenarios
        }
        chosen = self.data.get("scenario") if self.is_bound else self.initial.get("scenario")
        if chosen not in self.scenario_values:
            chosen = str(scenarios[0].uuid) if scenarios else None
        if chosen is not None:
            self._show_scenario_values(self.scenario_values[str(chosen)])
        self.fields["affinity_actions"].help_text = (
            "dynamo-nvext only: bind (development builds) or open (Dynamo 1.2.x); blank = what "
            "the endpoint's connection test found, else the scenario's"
        )
        self.fields["client_workers_per_host"].help_text = (
            "with client worker processes ticked: how many client workers share one host "
            "process (each keeps its own connections and session copies); blank = the "
            "scenario's"
        )
        self.affinity_by_target = _affinity_by_target(ordered)
        # The target the page opens with: the one asked for, else the first listed.
        target = self.data.get("target") if self.is_bound else self.initial.get("target")
        if target not in self.affinity_by_target:
            target = str(ordered[0].uuid) if ordered else "simulated"
        self._offer_affinity(str(target))
        if chosen is not None:
            self._show_actions(self.scenario_values[str(chosen)], str(target))
        # Per host only means something with client worker processes (the page's script
        # follows the checkbox; unticked, the field is greyed out and not sent).
        processes = (
            self.data.get("client_worker_processes")
            if self.is_bound
            else self.initial.get("client_worker_processes")
        )
        if not processes:
            self.fields["client_workers_per_host"].widget.attrs["disabled"] = True

    def _show_scenario_values(self, hints: dict[str, str]) -> None:
        """Each knob's scenario value: the placeholder of an input, the label of a list's
        blank choice ("scenario: spawn-pin")."""
        for name, field in self.knob_fields.items():
            hint = hints.get(name, "")
            if isinstance(field, forms.ChoiceField):
                field.choices = [
                    ("", f"scenario: {hint}") if value == "" else (value, label)
                    for value, label in cast(list[tuple[str, str]], field.choices)
                ]
            else:
                field.widget.attrs["placeholder"] = hint

    def _show_actions(self, hints: dict[str, str], target: str) -> None:
        """The blank choice of affinity_actions says what the endpoint will get: actions are
        only sent with dynamo-nvext; other modes send no session_control at all."""
        affinity = (self.data.get("affinity") if self.is_bound else "") or hints.get("affinity", "")
        field = cast(forms.ChoiceField, self.fields["affinity_actions"])
        label = actions_label(
            affinity=affinity,
            scenario=hints.get("affinity_actions", ""),
            endpoint=self.affinity_by_target[target]["actions"],
        )
        field.choices = [
            ("", label) if value == "" else (value, text)
            for value, text in cast(list[tuple[str, str]], field.choices)
        ]
        if affinity != SENDS_ACTIONS:
            field.widget.attrs["disabled"] = True

    def _offer_affinity(self, target: str) -> None:
        """Offer only the affinity modes the chosen target accepts (the page's script does the
        same when another target is picked); preset dynamo-nvext's actions to the detected
        generation's."""
        offer = self.affinity_by_target[target]
        field = cast(forms.ChoiceField, self.fields["affinity"])
        keep = dict(cast(list[tuple[str, str]], field.choices)).get("", "— keep —")
        field.choices = [("", keep), *((m, m) for m in offer["choices"])]
        field.help_text = offer["note"]
        field.error_messages["invalid_choice"] = (
            "%(value)s will not work on this endpoint; modes that work there: "
            + ", ".join(offer["choices"])
        )
        if not self.is_bound and offer["actions"]:
            self.initial.setdefault("affinity_actions", offer["actions"])

    def knob_group(self) -> list[forms.BoundField]:
        return [self[name] for name in self.knob_fields]


# The affinity mode that sends affinity_actions (nvext.session_control's opening action).
SENDS_ACTIONS = "dynamo-nvext"
# Where the page's script puts the scenario's affinity_actions in a label.
SCENARIO_SLOT = "{scenario}"


def actions_label(*, affinity: str, scenario: str, endpoint: str | None) -> str:
    """What a blank affinity_actions means for the run (the page's script shows the label made
    here for the chosen target and mode, with the scenario's value in SCENARIO_SLOT)."""
    if affinity != SENDS_ACTIONS:
        return f"not sent with {affinity or 'this affinity'}"
    if endpoint:
        return f"endpoint: {endpoint} (its connection test)"
    return f"scenario: {scenario}"


# "(default 16)" and the like in the engine's knob descriptions.
_ENGINE_DEFAULT = re.compile(r"\s*\(default [^()]*\)")


def knob_hints(spec: dict[str, Any], fields: dict[str, forms.Field]) -> dict[str, str]:
    """A scenario's value of each knob as text ("not set" for an empty optional one)."""
    shown = spec_initial(spec, fields)
    return {name: _text(shown.get(name, "not set")) for name in fields}


def _text(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _offer(choices: tuple[str, ...], actions: str | None, note: str) -> dict[str, Any]:
    """One target's entry for the form and the page's script (json_script "affinity-data"):
    the modes it accepts, dynamo-nvext's actions there, the line saying why, and per mode the
    blank affinity_actions choice's label, so the script recomputes nothing."""
    return {
        "choices": list(choices),
        "actions": actions,
        "note": note,
        "sends_actions": [SENDS_ACTIONS],
        "actions_labels": {
            mode: actions_label(affinity=mode, scenario=SCENARIO_SLOT, endpoint=actions)
            for mode in ("", *AFFINITIES)
        },
    }


def _affinity_by_target(endpoints: list[Any]) -> dict[str, dict[str, Any]]:
    """Per target id: the affinity modes it accepts (runner.accepted_affinities, through the
    endpoint's affinity_choices), the actions dynamo-nvext must use there, and a line saying
    why (what the connection test found, or that none ran yet)."""
    out: dict[str, dict[str, Any]] = {
        "simulated": _offer(
            accepted_affinities(dynamo=True),
            None,
            "the simulated cluster speaks the Dynamo generation of the scenario's simulated target",
        )
    }
    for e in endpoints:
        choices = e.affinity_choices
        if e.affinity_detected:
            note = f"{e.name}: {e.affinity_headline}. Modes that work there: {', '.join(choices)}."
        elif e.server_kind == ServerKind.DYNAMO:
            note = (
                f"{e.name}: test the connection (Endpoints page) to see which modes this "
                "server accepts."
            )
        else:
            note = f"{e.name} is {e.get_server_kind_display()}: {', '.join(choices)}."
        out[str(e.uuid)] = _offer(choices, e.nvext_actions, note)
    return out


class RunMetaForm(forms.Form):
    tags = forms.CharField(required=False, max_length=limits.TAGS_STORED_CHARS)
    notes = forms.CharField(
        required=False, max_length=limits.NOTES_CHARS, widget=forms.Textarea(attrs={"rows": 3})
    )
    is_baseline = forms.BooleanField(required=False, label="baseline")
