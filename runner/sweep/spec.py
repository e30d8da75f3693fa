"""The sweep specification: one base run spec, one load axis, arms, repeats, SLOs, validity.

Validated once into a frozen model (like `runner.spec.RunSpec`), with every point's run spec
checked at the axis's ends, so a bad arm is refused before the first run rather than at the
tenth. `spec_for(point)` is the one place a point becomes a RunSpec. It never runs anything
and knows nothing of the order points run in (`plan.py`) or what their runs report.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from runner.errors import SpecError
from runner.limits import MAX_CONCURRENCY, MAX_RATE_PER_S
from runner.spec import RunSpec, SloMs, _clean_message, _is_union_tag
from runner.validity import Validity

__all__ = [
    "MAX_ARMS",
    "MAX_LOADS",
    "MAX_REPEATS",
    "PERCENTILES",
    "Arm",
    "Axis",
    "Percentile",
    "Phase",
    "Point",
    "Slo",
    "SweepSpec",
    "Validity",
    "parse_sweep",
    "sweep_json_schema",
]

Axis = Literal["concurrency", "rate_per_s"]
Mode = Literal["list", "auto", "slo"]
# Which part of a sweep a point belongs to: every point of a `list` sweep; the synchronous and
# saturation points `auto` starts with and the ones it places between them; an `slo` probe.
Phase = Literal["list", "synchronous", "saturation", "between", "search"]
Percentile = Literal["p50", "p90", "p95", "p99"]
PERCENTILES: tuple[str, ...] = ("p50", "p90", "p95", "p99")

MAX_ARMS = 6  # issue 20: a chart stays readable with six curves; more is a second sweep
MAX_LOADS = 1000  # a slo search over concurrency 1..1000 one by one still takes ~11 probes
MAX_REPEATS = 20
_MODEL = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
# Knobs a sweep sets on every point itself: an arm may not move them, or its curve would not
# be measured against the same loads, SLOs and repeats as the others'.
_SWEEP_OWNED = ("seed", "slo_ttft_ms", "slo_itl_ms", "slo_latency_ms")


class Arm(BaseModel):
    """One configuration under test: a name and the run-spec knobs it changes (the same
    overrides `RunSpec.with_overrides` takes, e.g. `{"policy": "legacy"}`)."""

    model_config = _MODEL

    name: str = Field(
        min_length=1,
        max_length=40,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$",
        description="shown on every curve and row: letters, digits and _ . + -",
    )
    overrides: dict[str, Any] = Field(
        default_factory=dict, description="run-spec knobs this arm changes"
    )


class Slo(BaseModel):
    """A request is good when it meets every threshold set; a point meets the SLOs when at
    least `goodput_fraction` of its requests that ran their course are good."""

    model_config = _MODEL

    ttft_ms: SloMs | None = Field(default=None, description="time to first token, ms")
    itl_ms: SloMs | None = Field(default=None, description="mean inter-token latency, ms")
    latency_ms: SloMs | None = Field(default=None, description="end-to-end latency, ms")
    goodput_fraction: float = Field(
        default=0.95,
        gt=0,
        le=1,
        description="share of requests that must be good: 0.95 holds each threshold as a p95",
    )
    confidence: float = Field(
        default=0.95,
        ge=0.5,
        le=0.999,
        description="of the Wilson interval on the good share the search reports",
    )

    @model_validator(mode="after")
    def _some_threshold(self) -> Slo:
        if self.ttft_ms is None and self.itl_ms is None and self.latency_ms is None:
            raise ValueError("set at least one of ttft_ms, itl_ms, latency_ms")
        return self

    @property
    def run_fields(self) -> dict[str, float | None]:
        """The RunSpec fields that carry these thresholds (goodput in every run's summary)."""
        return {
            "slo_ttft_ms": self.ttft_ms,
            "slo_itl_ms": self.itl_ms,
            "slo_latency_ms": self.latency_ms,
        }

    @property
    def names(self) -> list[str]:
        """The thresholds set, as a headline names them ("TTFT", "TTFT and ITL")."""
        named = (("TTFT", self.ttft_ms), ("ITL", self.itl_ms), ("latency", self.latency_ms))
        return [name for name, value in named if value is not None]


class Point(BaseModel):
    """One run of a sweep: an arm at one load, one repeat."""

    model_config = _MODEL

    arm: str
    load: float = Field(description="the axis value: lanes (concurrency) or trees per second")
    repeat: int = Field(default=0, ge=0)
    phase: Phase = "list"


# The base spec's schema is the run spec's own: referenced, not copied, so the two published
# files never disagree (sweep_json_schema puts the reference in; pydantic resolves every $ref
# it generates itself, so the model's own schema carries a plain object here).
_BASE_DESCRIPTION = "the run spec every point starts from (docs/run-spec.schema.json)"
_BASE_SCHEMA = WithJsonSchema({"type": "object", "description": _BASE_DESCRIPTION})


class SweepSpec(BaseModel):
    """A sweep: the base run spec of a scenario, one load axis, the arms compared along it."""

    model_config = _MODEL

    base: Annotated[RunSpec, _BASE_SCHEMA]
    concurrency: tuple[Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)], ...] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_LOADS,
        description="the load axis as lanes (or, with timing rate, the cap on active trees)",
    )
    rate_per_s: tuple[Annotated[float, Field(gt=0, le=MAX_RATE_PER_S)], ...] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_LOADS,
        description="the load axis as tree arrivals per second (the base's timing is rate)",
    )
    slo: Slo | None = Field(
        default=None, description="replaces the base's SLO fields on every point"
    )
    arms: tuple[Arm, ...] = Field(default=(Arm(name="base"),), min_length=1, max_length=MAX_ARMS)
    repeats: int = Field(default=1, ge=1, le=MAX_REPEATS, description="runs per arm and load")
    mode: Mode = Field(
        default="list",
        description="list: every load; auto: synchronous and saturation first, then "
        "auto_points between (guidellm's sweep); slo: bracket and bisect for the highest "
        "load meeting the SLOs",
    )
    auto_points: int = Field(
        default=4, ge=1, le=50, description="auto: points between synchronous and saturation"
    )
    percentile: Percentile = Field(
        default="p90",
        description="the percentile of TTFT, ITL and interactivity (tok/s per user) a table "
        "and a frontier read",
    )
    gpus: int | None = Field(
        default=None, ge=1, le=1_000_000, description="the endpoint's GPUs: throughput per GPU"
    )
    validity: Validity = Field(default_factory=Validity)
    cooldown_s: float = Field(
        default=10.0,
        ge=0,
        le=3600,
        description="live: the pause between points when the server shows no running or "
        "queued requests to wait for",
    )
    drain_timeout_s: float = Field(
        default=120.0,
        ge=0,
        le=3600,
        description="live: the longest wait for the server to drain before a point",
    )

    @field_validator("concurrency", "rate_per_s")
    @classmethod
    def _ascending(cls, loads: tuple[float, ...] | None) -> tuple[float, ...] | None:
        if loads is None:
            return None
        if len(set(loads)) != len(loads):
            raise ValueError("a load appears twice")
        return tuple(sorted(loads))

    @field_validator("arms")
    @classmethod
    def _arms(cls, arms: tuple[Arm, ...], info: ValidationInfo) -> tuple[Arm, ...]:
        names = [arm.name for arm in arms]
        if len(set(names)) != len(names):
            raise ValueError("two arms have the same name")
        for arm in arms:
            owned = sorted(set(arm.overrides) & set(_SWEEP_OWNED))
            if owned:
                raise ValueError(
                    f"arm {arm.name!r} sets {', '.join(owned)}: the sweep sets those on every "
                    "point (SLOs in the sweep's slo, seeds per repeat)"
                )
        return arms

    @model_validator(mode="after")
    def _consistent(self) -> SweepSpec:
        if (self.concurrency is None) == (self.rate_per_s is None):
            raise ValueError("give one load axis: concurrency or rate_per_s")
        if self.mode == "slo" and self.slo is None:
            raise ValueError("mode slo needs slo thresholds")
        for arm in self.arms:
            if self.axis in arm.overrides:
                raise ValueError(f"arm {arm.name!r} sets {self.axis}, the load axis")
            for point in self._probes(arm.name):
                try:
                    spec = self.spec_for(point)
                except SpecError as exc:
                    raise ValueError(
                        f"arm {arm.name!r} at {self.load_text(point.load)}: "
                        + "; ".join(f"{k}: {v}" for k, v in exc.fields.items())
                    ) from None
                self._check_point(arm.name, spec)
        return self

    def _probes(self, arm: str) -> list[Point]:
        """The points whose specs stand for all: the axis's ends (limits are monotone in the
        load), and auto's synchronous point."""
        loads = self.loads
        probes = [Point(arm=arm, load=load) for load in dict.fromkeys((loads[0], loads[-1]))]
        if self.mode == "auto":
            probes.append(Point(arm=arm, load=self.saturation_load, phase="synchronous"))
        return probes

    def _check_point(self, arm: str, spec: RunSpec) -> None:
        if spec.target.kind != self.base.target.kind:
            raise ValueError(
                f"arm {arm!r} changes the target to {spec.target.kind}: every arm of a sweep "
                f"runs on the base's {self.base.target.kind} target"
            )
        if self.axis == "rate_per_s" and spec.timing != "rate":
            raise ValueError(
                f"a rate_per_s axis needs timing rate (arm {arm!r} has {spec.timing!r})"
            )

    # -- reading a sweep ---------------------------------------------------------------------

    @property
    def axis(self) -> Axis:
        return "concurrency" if self.concurrency is not None else "rate_per_s"

    @property
    def loads(self) -> tuple[float, ...]:
        """The axis's values, ascending."""
        values = self.concurrency if self.concurrency is not None else self.rate_per_s
        assert values is not None  # the model validator holds one axis
        return tuple(float(v) for v in values)

    @property
    def saturation_load(self) -> float:
        """auto's saturation point: the axis's highest value."""
        return self.loads[-1]

    def arm(self, name: str) -> Arm:
        return next(arm for arm in self.arms if arm.name == name)

    def load_text(self, load: float, phase: Phase = "list") -> str:
        """A load as people read it: `c=16`, `2.5/s`; the rate axis's synchronous point runs
        its rate one tree at a time."""
        if self.axis == "concurrency":
            return f"c={load:g}"
        if phase == "synchronous":
            return f"{load:g}/s one at a time"
        return f"{load:g}/s"

    def spec_for(self, point: Point) -> RunSpec:
        """The run spec of one point: the base, the arm's overrides, the load, the sweep's
        SLOs and the repeat's seed (repeat k runs with the base's seed + k, so repeats also
        sample the workload's and cluster's random choices). Raises SpecError."""
        overrides: dict[str, Any] = dict(self.arm(point.arm).overrides)
        if self.axis == "concurrency":
            overrides["concurrency"] = round(point.load)
        else:
            overrides["rate_per_s"] = point.load
            if point.phase == "synchronous":
                overrides["concurrency"] = 1
        slo = self.slo.run_fields if self.slo is not None else dict.fromkeys(_SWEEP_OWNED[1:])
        overrides.update(slo)
        overrides["seed"] = self.base.seed + point.repeat
        return self.base.with_overrides(overrides)

    def with_api_key(self, api_key: str | None) -> SweepSpec:
        """The same sweep with the endpoint's secret on its base (never serialized)."""
        return self.model_copy(update={"base": self.base.with_api_key(api_key)})


def parse_sweep(data: Mapping[str, Any] | str | bytes) -> SweepSpec:
    """Validate a dict or JSON text into a SweepSpec; SpecError with every problem on one
    line, each prefixed by its field (`arms: arm 'x' at c=4: policy: ...`)."""
    try:
        if isinstance(data, str | bytes):
            return SweepSpec.model_validate_json(data)
        return SweepSpec.model_validate(dict(data))
    except ValidationError as exc:
        fields: dict[str, str] = {}
        for error in exc.errors(include_url=False):
            loc = ".".join(str(part) for part in error["loc"] if not _is_union_tag(part))
            fields.setdefault(loc or "sweep", _clean_message(error["msg"]))
        raise SpecError(
            "invalid sweep spec: " + "; ".join(f"{name}: {msg}" for name, msg in fields.items()),
            fields=fields,
        ) from None


def sweep_json_schema() -> dict[str, Any]:
    """What docs/sweep-spec.schema.json holds (its base refers to docs/run-spec.schema.json)."""
    schema = SweepSpec.model_json_schema()
    schema["properties"]["base"] = {
        "allOf": [{"$ref": "run-spec.schema.json"}],
        "description": _BASE_DESCRIPTION,
    }
    return schema
