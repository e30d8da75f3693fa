"""The API answers the service command line reads, as frozen pydantic models of the fields it
uses (others are ignored, so the server may add fields freely). Validated once where an answer
arrives; an answer of another shape is one line naming the field, never a traceback."""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from runner.errors import BadInput

__all__ = [
    "ABPair",
    "Compare",
    "Endpoint",
    "Progress",
    "Run",
    "RunDetail",
    "RunPage",
    "Scenario",
    "Team",
    "Verdict",
    "Verify",
    "parse",
]

ENDED = ("succeeded", "failed", "cancelled")


class _Shape(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Ref(_Shape):
    id: str | None
    name: str


class Team(_Shape):
    id: str
    name: str
    role: str


class Scenario(_Shape):
    id: str
    name: str
    team: Ref
    tags: list[str]
    traces: list[Ref]
    spec: dict[str, Any]


class Endpoint(_Shape):
    id: str
    name: str
    team: Ref
    base_url: str
    model: str
    server_kind: str


class Progress(_Shape):
    t_s: float | None = None
    progress: float | None = None
    eta_s: float | None = None
    requests: int | None = None
    errors: int | None = None
    in_flight: int | None = None
    ttft_ms: dict[str, float | None] | None = None
    worker_switches: int | None = None
    orphaned_session_copies: int | None = None


class Waiting(_Shape):
    message: str
    place: int


class Verdict(_Shape):
    verdict: Literal["pass", "fail", "pending"]
    message: str
    reasons: list[str]
    baseline: str | None


class Run(_Shape):
    id: str
    status: str
    reason: str
    scenario: Ref
    endpoint: Ref
    target_kind: str
    summary: dict[str, Any] | None
    tags: list[str]
    created_at: str
    started_at: str | None
    finished_at: str | None

    @property
    def ended(self) -> bool:
        return self.status in ENDED


class RunDetail(Run):
    spec: dict[str, Any]
    progress: Progress | None = None
    waiting: Waiting | None = None
    verdict: Verdict


class RunPage(_Shape):
    items: list[Run]
    count: int


class ABPair(_Shape):
    id: str
    knob: str
    value_a: str
    value_b: str
    run_a: str
    run_b: str
    compare_url: str


class ComparedRun(_Shape):
    id: str
    status: str
    scenario: str
    target: str
    policy: str | None
    affinity: str | None
    scope: str | None
    # What differs between the compared runs ('c=8 · legacy'); absent from older services.
    letter: str | None = None
    head: str | None = None


class Cell(_Shape):
    value: float | None
    delta_pct: float | None
    status: str
    # reference, repeat, better, worse, within noise, same, no repeats, n/a
    verdict: str | None = None


class CompareMetric(_Shape):
    key: str
    label: str
    unit: str
    cells: list[Cell]


class Compare(_Shape):
    runs: list[ComparedRun]
    metrics: list[CompareMetric]
    same_for_all: str = ""
    sentences: list[str] = []


class VerifyFigure(_Shape):
    figure: str
    summary: Any = None
    records: Any = None
    difference: float | None
    allowed: float
    relative: bool
    ok: bool


class Verify(_Shape):
    """GET /api/v1/runs/ID/verify: runner.verify_checked's answer for a stored run."""

    id: str
    status: str
    ok: bool
    records: int
    seconds: float
    largest_percentile_difference: dict[str, float | None] = {}
    failures: list[VerifyFigure]
    figures: list[VerifyFigure]


T = TypeVar("T")


def parse(shape: type[T], raw: Any, *, where: str) -> T:
    """`raw` (an answer of `where`, e.g. "GET /api/v1/runs/ID") as `shape` (a model, or a
    list of one)."""
    try:
        return TypeAdapter(shape).validate_python(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "the answer"
        raise BadInput(
            f"{where} answered in a shape this command line does not know ({field}: "
            f"{first['msg']}): is the address an aiperf-web service of this version?"
        ) from None
