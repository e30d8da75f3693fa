"""The per-request record every driver emits (virtual-time simulator, live HTTP replay).

Owns the record's fields, its derived measurements and its JSON line for `--records`. It
must not time anything or talk to a server: drivers fill it in, metrics and exports read it.
Times are offsets in seconds from run start (`*_s`); derived latencies are in milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal, TypedDict, TypeVar, get_args

from runner.credit import Credit
from runner.errors import ERROR_CATEGORIES, ErrorCategory
from runner.metrics.gaps import gaps_from_text, gaps_to_text

__all__ = [
    "BRANCH_MODE_NAMES",
    "CUT_BY_STOP",
    "ERROR_CATEGORIES",
    "BranchModeName",
    "ErrorCategory",
    "RequestRecord",
    "RequestRecordJson",
    "branch_mode_name",
]

BranchModeName = Literal["root", "fork", "spawn"]
BRANCH_MODE_NAMES: Final[tuple[BranchModeName, ...]] = get_args(BranchModeName)

# The category of a request the client cancelled, which only the run's stop does (its
# duration's drain deadline, a count reached, a cancel): metrics count these apart from errors.
CUT_BY_STOP: Final = ErrorCategory.CANCELLED

_Name = TypeVar("_Name", bound=str)
_Value = TypeVar("_Value")


class RequestRecordJson(TypedDict):
    """One line of `--records FILE.jsonl`: the record's fields plus its derived values."""

    request_id: int
    session_id: str
    root_id: str
    parent_id: str | None
    depth: int
    branch_mode: BranchModeName
    turn_index: int
    num_turns: int
    lane: int
    client_worker: int
    inference_worker: int | None
    start_s: float
    first_token_s: float | None
    end_s: float
    prompt_tokens: int
    cached_tokens: int | None
    output_tokens: int
    itl_ms: float | None
    status: int | None
    error: ErrorCategory | None
    warmup: bool
    due_s: float | None
    # The inter-chunk gaps (runner.metrics.gaps: base64 of little-endian uint32 us); None when
    # the request had no ITL, and absent from records written before they were kept.
    chunk_gaps_us: str | None
    ttft_ms: float | None
    latency_ms: float
    output_tokens_per_s: float | None
    schedule_lag_ms: float | None


def branch_mode_name(credit: Credit) -> BranchModeName:
    """A credit's relation to its parent as the record spells it: roots carry no mode."""
    if credit.branch_mode is None:
        return "root"
    return credit.branch_mode.value


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestRecord:
    """What happened to one request. Failed requests keep what was measured before failing."""

    request_id: int  # the credit id
    session_id: str
    root_id: str
    turn_index: int
    num_turns: int
    client_worker: int
    start_s: float
    end_s: float
    prompt_tokens: int
    output_tokens: int
    parent_id: str | None = None
    depth: int = 0
    branch_mode: BranchModeName = "root"
    lane: int = 0
    inference_worker: int | None = None  # served-by worker, when the server says
    first_token_s: float | None = None  # None: no token arrived (or not streaming)
    cached_tokens: int | None = None  # None: the server did not report cached tokens
    itl_ms: float | None = None  # mean inter-token latency; None with fewer than two tokens
    status: int | None = None  # HTTP status; None when no response arrived
    error: ErrorCategory | None = None
    warmup: bool = False
    due_s: float | None = None  # when the replay's timing wanted it sent; None: not scheduled
    # Every gap between consecutive chunks (runner.metrics.gaps.encode_gaps); None: not kept
    # (no ITL, or a driver that times no chunks).
    chunk_gaps: bytes | None = None

    @classmethod
    def from_credit(
        cls,
        credit: Credit,
        *,
        client_worker: int,
        start_s: float,
        end_s: float,
        prompt_tokens: int,
        output_tokens: int,
        inference_worker: int | None = None,
        first_token_s: float | None = None,
        cached_tokens: int | None = None,
        itl_ms: float | None = None,
        status: int | None = None,
        error: ErrorCategory | None = None,
        chunk_gaps: bytes | None = None,
    ) -> RequestRecord:
        """The record of a credit's request: identity from the credit, measurements given."""
        return cls(
            request_id=credit.id,
            session_id=credit.session_id,
            root_id=credit.root_id,
            parent_id=credit.parent_id,
            depth=credit.depth,
            branch_mode=branch_mode_name(credit),
            turn_index=credit.turn_index,
            num_turns=credit.num_turns,
            lane=credit.lane,
            warmup=credit.warmup,
            client_worker=client_worker,
            inference_worker=inference_worker,
            start_s=start_s,
            first_token_s=first_token_s,
            end_s=end_s,
            prompt_tokens=prompt_tokens,
            cached_tokens=cached_tokens,
            output_tokens=output_tokens,
            itl_ms=itl_ms,
            status=status,
            error=error,
            due_s=credit.due_s,
            chunk_gaps=chunk_gaps,
        )

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def ttft_ms(self) -> float | None:
        if self.first_token_s is None:
            return None
        return (self.first_token_s - self.start_s) * 1000.0

    @property
    def latency_ms(self) -> float:
        return (self.end_s - self.start_s) * 1000.0

    @property
    def schedule_lag_ms(self) -> float | None:
        """How late the request went out against its schedule: when the client, not the
        server, is the limit this grows. Never negative (early sends count as on time)."""
        if self.due_s is None:
            return None
        return max(0.0, (self.start_s - self.due_s) * 1000.0)

    @property
    def output_tokens_per_s(self) -> float | None:
        """End-to-end output rate (aiperf's e2e_output_token_throughput); 1000/itl_ms is the
        decode rate. None when the request took no measurable time."""
        duration_s = self.end_s - self.start_s
        if duration_s <= 0.0:
            return None
        return self.output_tokens / duration_s

    @property
    def cached_ratio(self) -> float | None:
        """Share of the prompt the server served from its prefix cache, when it reported."""
        if self.cached_tokens is None or self.prompt_tokens <= 0:
            return None
        return self.cached_tokens / self.prompt_tokens

    def to_json_dict(self) -> RequestRecordJson:
        return {
            "request_id": self.request_id,
            "session_id": self.session_id,
            "root_id": self.root_id,
            "parent_id": self.parent_id,
            "depth": self.depth,
            "branch_mode": self.branch_mode,
            "turn_index": self.turn_index,
            "num_turns": self.num_turns,
            "lane": self.lane,
            "client_worker": self.client_worker,
            "inference_worker": self.inference_worker,
            "start_s": self.start_s,
            "first_token_s": self.first_token_s,
            "end_s": self.end_s,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "output_tokens": self.output_tokens,
            "itl_ms": self.itl_ms,
            "status": self.status,
            "error": self.error,
            "warmup": self.warmup,
            "due_s": self.due_s,
            "chunk_gaps_us": None if self.chunk_gaps is None else gaps_to_text(self.chunk_gaps),
            "ttft_ms": self.ttft_ms,
            "latency_ms": self.latency_ms,
            "output_tokens_per_s": self.output_tokens_per_s,
            "schedule_lag_ms": self.schedule_lag_ms,
        }

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> RequestRecord:
        """Read back one `to_json_dict()` line; derived keys are ignored, bad values rejected."""
        try:
            record = cls(
                request_id=_int(data, "request_id"),
                session_id=_str(data, "session_id"),
                root_id=_str(data, "root_id"),
                parent_id=_optional(data, "parent_id", _str),
                depth=_int(data, "depth"),
                branch_mode=_choice(data, "branch_mode", BRANCH_MODE_NAMES),
                turn_index=_int(data, "turn_index"),
                num_turns=_int(data, "num_turns"),
                lane=_int(data, "lane"),
                client_worker=_int(data, "client_worker"),
                inference_worker=_optional(data, "inference_worker", _int),
                start_s=_float(data, "start_s"),
                first_token_s=_optional(data, "first_token_s", _float),
                end_s=_float(data, "end_s"),
                prompt_tokens=_int(data, "prompt_tokens"),
                cached_tokens=_optional(data, "cached_tokens", _int),
                output_tokens=_int(data, "output_tokens"),
                itl_ms=_optional(data, "itl_ms", _float),
                status=_optional(data, "status", _int),
                error=_optional(data, "error", _error_category),
                warmup=_bool(data, "warmup"),
                due_s=_optional(data, "due_s", _float),
                chunk_gaps=_gaps(data),
            )
        except KeyError as missing:
            raise ValueError(f"request record lacks {missing.args[0]!r}") from None
        return record


# Small typed readers for from_json_dict: a record file is outside input, so each field is
# checked once here and nobody downstream re-checks it.


def _int(data: dict[str, Any], key: str) -> int:
    value = data[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"request record field {key!r} must be an integer, got {value!r}")
    return value


def _float(data: dict[str, Any], key: str) -> float:
    value = data[key]
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ValueError(f"request record field {key!r} must be a number, got {value!r}")
    return float(value)


def _str(data: dict[str, Any], key: str) -> str:
    value = data[key]
    if not isinstance(value, str):
        raise ValueError(f"request record field {key!r} must be a string, got {value!r}")
    return value


def _bool(data: dict[str, Any], key: str) -> bool:
    value = data[key]
    if not isinstance(value, bool):
        raise ValueError(f"request record field {key!r} must be true or false, got {value!r}")
    return value


def _error_category(data: dict[str, Any], key: str) -> ErrorCategory:
    return _choice(data, key, ERROR_CATEGORIES)


def _choice(data: dict[str, Any], key: str, choices: tuple[_Name, ...]) -> _Name:
    value = data[key]
    for choice in choices:
        if value == choice:
            return choice
    raise ValueError(f"request record field {key!r} must be one of {choices}, got {value!r}")


def _optional(
    data: dict[str, Any], key: str, read: Callable[[dict[str, Any], str], _Value]
) -> _Value | None:
    return None if data.get(key) is None else read(data, key)


def _gaps(data: dict[str, Any]) -> bytes | None:
    """`chunk_gaps_us` back to bytes; absent or null (records before gaps were kept): None."""
    text = data.get("chunk_gaps_us")
    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError(f"request record field 'chunk_gaps_us' must be a string, got {text!r}")
    return gaps_from_text(text)
