"""Why a run ended, as the engine decides it: a typed reason with its detail in words, and the
status each reason means.

Set where the run ends and nowhere else: the scheduler's own limits (its duration, request
count, tree count, the workload running out), the drivers' stops (a cancel, failures in a row,
the error share, every client worker lost, a simulated clock standing still) and a stop before
the drivers started (`runner/run.py`). Callers read `RunResult.ended_by`; none guesses the
reason from figures or compares strings.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, TypedDict

__all__ = ["EndedBy", "Ending", "EndingJson", "RunStatus"]

RunStatus = Literal["succeeded", "failed", "cancelled"]


class EndingJson(TypedDict):
    """An Ending as the summary keeps it."""

    by: str
    detail: str
    early: bool


class EndedBy(StrEnum):
    """What ended a run. The first four are the run's own course; the rest stop it early."""

    COMPLETED = "completed"  # the workload ran out (every arrival started, every tree drained)
    DURATION = "duration"  # its duration was reached
    MAX_REQUESTS = "max_requests"  # its request count was issued
    MAX_TREES = "max_trees"  # its tree count was started
    CANCELLED = "cancelled"  # the caller's stop (a cancel, Ctrl-C, the service's time limit)
    FAILURES_IN_A_ROW = "failures_in_a_row"  # target.failure_threshold consecutive failures
    ERROR_SHARE = "error_share"  # more than target.stop_error_share of the finished failed
    WORKERS_LOST = "workers_lost"  # every client worker stopped answering
    CLOCK_STALLED = "clock_stalled"  # a simulated clock stood still (it would never end)


_STATUS: dict[EndedBy, RunStatus] = {
    EndedBy.COMPLETED: "succeeded",
    EndedBy.DURATION: "succeeded",
    EndedBy.MAX_REQUESTS: "succeeded",
    EndedBy.MAX_TREES: "succeeded",
    EndedBy.CANCELLED: "cancelled",
    EndedBy.FAILURES_IN_A_ROW: "failed",
    EndedBy.ERROR_SHARE: "failed",
    EndedBy.WORKERS_LOST: "failed",
    EndedBy.CLOCK_STALLED: "failed",
}


@dataclass(frozen=True, slots=True)
class Ending:
    """`by` and its `detail`, a clause in a person's words ("its duration (30 s) was reached",
    "50 requests in a row failed (last: http_5xx: ...)"). `early`: a run that succeeded but
    stopped before its own limit (the workload ran out before its duration)."""

    by: EndedBy
    detail: str
    early: bool = False

    @property
    def status(self) -> RunStatus:
        return _STATUS[self.by]

    @property
    def stopped_reason(self) -> str | None:
        """The summary's `stopped_reason`: the detail when the run did not succeed."""
        return None if self.status == "succeeded" else self.detail

    def to_json(self) -> EndingJson:
        return {"by": self.by.value, "detail": self.detail, "early": self.early}

    @classmethod
    def cancelled(cls, where: str = "") -> Ending:
        return cls(EndedBy.CANCELLED, f"cancelled {where}".strip())


def limit_words(by: EndedBy, value: float) -> str:
    """The detail of a run that reached one of its own limits."""
    if by is EndedBy.DURATION:
        return f"its duration ({value:g} s) was reached"
    if by is EndedBy.MAX_REQUESTS:
        return f"its request count ({value:g}) was reached"
    if by is EndedBy.MAX_TREES:
        return f"its tree count ({value:g}) was reached"
    raise ValueError(f"{by} is not a limit")
