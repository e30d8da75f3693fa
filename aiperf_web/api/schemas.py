"""The API's JSON shapes. Run specs and overrides come from the engine's own RunSpec, so the
OpenAPI schema documents every knob with the engine's descriptions and bounds."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Optional
from uuid import UUID

from ninja import Schema
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model

from aiperf_web.core.text import text_check
from runner import RunSpec

# Text a person sends: refused (422 naming the field) when it holds NUL or a lone surrogate.
Text = Annotated[str, AfterValidator(text_check)]

# Every RunSpec knob, optional: what a launch may override. The workload belongs to the
# scenario; the target comes from the endpoint, so it may only be adjusted field by field.
_override_fields: dict[str, Any] = {
    name: (Optional[field.annotation], Field(default=None, description=field.description))  # noqa: UP045
    for name, field in RunSpec.model_fields.items()
    if name not in ("workload", "target")
}
_override_fields["target"] = (
    Optional[dict[str, Any]],  # noqa: UP045
    Field(default=None, description="fields of the target to change (e.g. simulated workers)"),
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


RunOverrides: type[BaseModel] = create_model(
    "RunOverrides",
    __base__=_Strict,
    __doc__="Any RunSpec knob; what is left out keeps the scenario's value.",
    **_override_fields,
)


class Error(Schema):
    detail: str
    errors: list[dict[str, str]] = []


class TeamOut(Schema):
    id: UUID
    name: str
    role: str


class Ref(Schema):
    id: UUID | None
    name: str


class TraceOut(Schema):
    id: UUID
    team: Ref
    name: str
    filename: str
    format: str
    size_bytes: int
    sha256: str
    sample: str
    stats: dict[str, Any]
    created_at: datetime


class SampleOut(Schema):
    key: str
    filename: str
    title: str


class ScenarioIn(Schema):
    model_config = ConfigDict(extra="forbid")

    name: Text
    team: UUID | None = Field(default=None, description="default: your only team")
    description: Text = ""
    tags: list[Text] = []
    traces: list[UUID] = Field(default=[], description="trace ids; none = the synthetic workload")
    spec: RunSpec = Field(default_factory=RunSpec, description="the default run spec")


class ScenarioPatch(Schema):
    model_config = ConfigDict(extra="forbid")

    name: Text | None = None
    description: Text | None = None
    tags: list[Text] | None = None
    traces: list[UUID] | None = None
    spec: RunSpec | None = None


class ScenarioOut(Schema):
    id: UUID
    team: Ref
    name: str
    description: str
    tags: list[str]
    traces: list[Ref]
    spec: dict[str, Any]
    created_at: datetime
    updated_at: datetime


class EndpointIn(Schema):
    model_config = ConfigDict(extra="forbid")

    name: Text
    team: UUID | None = None
    base_url: Text
    model: Text
    api_key: Text | None = Field(default=None, description="stored encrypted, never returned")
    extra_headers: dict[Text, Text] = Field(
        default={}, description="plain headers: returned, and kept in each run's spec"
    )
    secret_headers: dict[Text, Text] = Field(
        default={},
        description="headers that are credentials (e.g. Azure's api-key): stored encrypted, "
        "never returned (only their names) nor kept in a run's spec",
    )
    server_kind: Text = Field(default="openai", description="openai, dynamo, vllm or sglang")


class EndpointPatch(Schema):
    model_config = ConfigDict(extra="forbid")

    name: Text | None = None
    base_url: Text | None = Field(
        default=None,
        description="a new base URL removes the stored API key unless `api_key` is sent in "
        "the same request: a key is never sent to a server it was not entered for",
    )
    model: Text | None = None
    api_key: Text | None = Field(
        default=None,
        description='a new key; "" removes it; left out, the stored key is kept (unless '
        "`base_url` changes)",
    )
    extra_headers: dict[Text, Text] | None = None
    secret_headers: dict[Text, Text] | None = Field(
        default=None,
        description="replaces the stored secret headers ({} or null removes them); left out, "
        "they are kept (unless `base_url` changes, which removes them like the API key)",
    )
    server_kind: Text | None = None


class AffinityOut(Schema):
    """What the endpoint's last connection test found about Dynamo session affinity."""

    generation: str | None = Field(
        description="bind (development builds), open (Dynamo 1.2.x), headers (1.3 and later), "
        "or null: no Dynamo session_control"
    )
    header_affinity: bool | None = Field(
        description="X-Dynamo-Session-ID pins sessions; null when it cannot be told"
    )
    usable: list[str] = Field(description="affinity modes that will work on this server")
    nvext_actions: str | None = Field(description="affinity_actions dynamo-nvext must use")
    headline: str = Field(description="the generation and whether affinity is on, plainly")
    summary: str = Field(description="the engine's one-line account")
    server_message: str | None = Field(
        description="the server's answer to the probe, on one line (HTML stripped, at most "
        "500 characters)"
    )
    detected_at: datetime


class EndpointOut(Schema):
    id: UUID
    team: Ref
    name: str
    base_url: str
    model: str
    server_kind: str
    extra_headers: dict[str, str]
    has_api_key: bool
    secret_header_names: list[str] = Field(description="names of the stored secret headers")
    is_builtin: bool
    affinity_choices: list[str] = Field(
        description="affinity modes a run may use here: the kind's, narrowed by the detection"
    )
    affinity: AffinityOut | None = Field(
        description="Dynamo affinity found by the last connection test; null until one ran "
        "(and after the base URL or kind changed)"
    )
    created_at: datetime


class ConnectionOut(Schema):
    ok: bool
    message: str
    affinity: AffinityOut | None = None


class RunCreate(Schema):
    model_config = ConfigDict(extra="forbid")

    scenario: Text = Field(description="scenario id")
    endpoint: Text = Field(
        default="simulated", description='endpoint id, or "simulated" for the simulated cluster'
    )
    overrides: RunOverrides = Field(default_factory=RunOverrides)  # type: ignore[valid-type]
    tags: list[Text] = []
    notes: Text = ""


class RunPatch(Schema):
    model_config = ConfigDict(extra="forbid")

    tags: list[Text] | None = None
    notes: Text | None = None
    is_baseline: bool | None = None


class RunOut(Schema):
    id: UUID
    team: Ref
    status: str
    reason: str
    scenario: Ref
    endpoint: Ref
    target_kind: str
    summary: dict[str, Any] | None
    tags: list[str]
    notes: str
    is_baseline: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    cancel_requested: bool
    records_count: int
    samples_count: int
    rerun_of: UUID | None


class RunDetailOut(RunOut):
    spec: dict[str, Any]
    overrides: dict[str, Any]
    progress: dict[str, Any] | None


class RunPage(Schema):
    items: list[RunOut]
    count: int
    limit: int
    offset: int


class SampleItem(Schema):
    seq: int
    t_s: float
    data: dict[str, Any]


class SamplePage(Schema):
    items: list[SampleItem]
    last_seq: int
