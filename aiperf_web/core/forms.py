"""Form fields generated from the engine's pydantic models, so every knob of the run spec (and
of the synthetic generator and the simulated cluster) has an input with the engine's own
description, and nothing is listed twice. Values go back as a dict that the service validates
into RunSpec; its errors come back to the field they name."""

from __future__ import annotations

import json
import types
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from django import forms
from pydantic import BaseModel

from runner import RunSpec, SimulatedTarget, SyntheticConfig

# Form field name prefixes for nested spec objects: "target__workers" is spec.target.workers.
SEP = "__"
GROUPS: dict[str, tuple[type[BaseModel], str]] = {
    "": (RunSpec, ""),
    "target": (SimulatedTarget, "target."),
    "synthetic": (SyntheticConfig, "workload.synthetic."),
}
_SKIP = {"workload", "target", "kind"}


class JSONObjectField(forms.CharField):
    """A textarea holding a JSON object (run overrides, endpoint headers): cleans to a dict,
    {} when left blank (None with `blank_is_none`: keep what is stored), and names the line of
    a syntax error. `string_values`: every value must be a string (headers)."""

    widget = forms.Textarea

    def __init__(
        self,
        *,
        shape: str = "a JSON object of knob: value",
        string_values: bool = False,
        blank_is_none: bool = False,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)
        self.shape = shape
        self.string_values = string_values
        self.blank_is_none = blank_is_none

    def to_python(self, value: Any) -> dict[str, Any] | None:  # type: ignore[override]
        raw = str(super().to_python(value) or "").strip()
        if not raw:
            return None if self.blank_is_none else {}
        try:
            parsed = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"not JSON: {exc.msg} at line {exc.lineno}") from None
        if not isinstance(parsed, dict) or (
            self.string_values and not all(isinstance(v, str) for v in parsed.values())
        ):
            raise forms.ValidationError(self.shape)
        return parsed


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """(the base type, whether None is allowed), through Optional and Annotated."""
    optional = False
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            annotation, optional = args[0], True
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation, optional


def _field(name: str, info: Any, *, blank: bool = False) -> forms.Field | None:
    base, optional = _unwrap(info.annotation)
    help_text = info.description or ""
    label = name.replace("_", " ")
    origin = get_origin(base)
    if origin is Literal:
        choices = [(v, v) for v in get_args(base)]
        if blank:
            choices = [("", "— keep —"), *choices]
        elif optional:
            choices = [("", "—"), *choices]
        return forms.ChoiceField(choices=choices, required=False, help_text=help_text, label=label)
    if base is bool:
        return forms.BooleanField(required=False, help_text=help_text, label=label)
    if base is int:
        return forms.IntegerField(required=False, help_text=help_text, label=label)
    if base is float:
        return forms.FloatField(required=False, help_text=help_text, label=label)
    if origin is tuple:
        return forms.CharField(
            required=False, help_text=(help_text + " (LO:HI)").strip(), label=label, max_length=60
        )
    if base is str:
        # The engine's own bound (every text knob of a spec has one).
        bound = next((m.max_length for m in info.metadata if hasattr(m, "max_length")), None)
        return forms.CharField(required=False, help_text=help_text, label=label, max_length=bound)
    return None


def spec_fields(
    group: str, *, only: tuple[str, ...] | None = None, blank: bool = False
) -> dict[str, forms.Field]:
    """Form fields for a group's knobs. `blank`: every choice may be left empty (overrides,
    where empty keeps the scenario's value)."""
    model, _ = GROUPS[group]
    out: dict[str, forms.Field] = {}
    for name, info in model.model_fields.items():
        if name in _SKIP or (only is not None and name not in only):
            continue
        field = _field(name, info, blank=blank)
        if field is not None:
            out[f"{group}{SEP}{name}" if group else name] = field
    return out


def _get(data: Mapping[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def spec_initial(spec: Mapping[str, Any], fields: Mapping[str, forms.Field]) -> dict[str, Any]:
    """Initial form values from a spec dict (tuples shown as LO:HI)."""
    initial: dict[str, Any] = {}
    for form_name in fields:
        group, _, name = form_name.rpartition(SEP)
        value = _get(spec, GROUPS[group][1] + name)
        if isinstance(value, list | tuple):
            value = ":".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
        if value is not None:
            initial[form_name] = value
    return initial


def spec_values(
    cleaned: Mapping[str, Any], fields: Mapping[str, forms.Field], *, keep_blank: bool
) -> tuple[dict[str, Any], dict[str, str]]:
    """(values by group, errors by form field). Blank inputs are left out, or set to None when
    `keep_blank` (an editor clearing an optional knob)."""
    values: dict[str, dict[str, Any]] = {group: {} for group in GROUPS}
    errors: dict[str, str] = {}
    for form_name, field in fields.items():
        group, _, name = form_name.rpartition(SEP)
        value = cleaned.get(form_name)
        if isinstance(field, forms.BooleanField):
            values[group][name] = bool(value)
            continue
        if value in (None, ""):
            if keep_blank:
                model = GROUPS[group][0]
                if _unwrap(model.model_fields[name].annotation)[1]:
                    values[group][name] = None
            continue
        if isinstance(field, forms.CharField) and "(LO:HI)" in str(field.help_text):
            parts = str(value).replace(",", ":").split(":")
            try:
                values[group][name] = [float(p) if "." in p else int(p) for p in parts]
            except ValueError:
                errors[form_name] = "write LO:HI, e.g. 0:1"
            continue
        values[group][name] = value
    return values, errors


def error_field(key: str) -> str:
    """The form field an Invalid key names: 'spec.target.workers' -> 'target__workers'."""
    key = key.removeprefix("spec.").removeprefix("overrides.")
    if key.startswith("workload.synthetic."):
        return "synthetic" + SEP + key.removeprefix("workload.synthetic.")
    if key.startswith("target."):
        return "target" + SEP + key.removeprefix("target.")
    return key


def add_service_errors(form: forms.Form, fields: Mapping[str, str], message: str) -> None:
    """Show each field error next to its field; the rest at the top of the form."""
    placed = False
    for key, text in fields.items():
        name = error_field(key)
        if name in form.fields:
            form.add_error(name, text)
            placed = True
        else:
            form.add_error(None, f"{key}: {text}")
            placed = True
    if not placed:
        form.add_error(None, message)
