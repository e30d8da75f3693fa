"""The one way the service turns input into the engine's RunSpec: every form, API body,
stored scenario and task goes through `spec_parse` / `spec_override`, and any problem comes
back as Invalid with one message per field (`duration_s`, `target.url`, ...)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from aiperf_web.core.errors import Invalid
from runner import RunSpec, SpecError


def _invalid(exc: Exception, *, prefix: str = "") -> Invalid:
    fields: dict[str, str] = {}
    if isinstance(exc, SpecError) and getattr(exc, "fields", None):
        fields = dict(exc.fields)
    elif isinstance(exc, ValidationError):
        for error in exc.errors(include_url=False):
            loc = ".".join(str(p) for p in error["loc"] if p not in ("endpoint", "simulated"))
            fields.setdefault(loc or "spec", str(error["msg"]).removeprefix("Value error, "))
    else:
        fields = {"spec": str(exc)}
    if prefix:
        fields = {f"{prefix}.{name}" if name != "spec" else prefix: m for name, m in fields.items()}
    message = "; ".join(f"{name}: {msg}" for name, msg in fields.items())
    return Invalid(message, fields=fields)


def spec_parse(data: Mapping[str, Any], *, prefix: str = "") -> RunSpec:
    try:
        return RunSpec.model_validate(dict(data))
    except (ValidationError, SpecError) as exc:
        raise _invalid(exc, prefix=prefix) from None


def spec_override(spec: RunSpec, overrides: Mapping[str, Any], *, prefix: str = "") -> RunSpec:
    if not isinstance(overrides, Mapping):
        raise Invalid.field(prefix or "overrides", "must be an object of knob: value")
    try:
        return spec.with_overrides(dict(overrides))
    except (ValidationError, SpecError, TypeError, ValueError) as exc:
        raise _invalid(exc, prefix=prefix) from None


def spec_json(spec: RunSpec) -> dict[str, Any]:
    """The JSON form stored in the database: the endpoint's API key is never part of it."""
    data: dict[str, Any] = spec.model_dump(mode="json")
    return data
