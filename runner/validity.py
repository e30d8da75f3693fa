"""When a run's figures count: the validity rules InferenceX applies, in one place.

A run (or a sweep's point) is invalid when too many of the requests that ran their course
failed, when its stop cut too many, or when too few completed requests measured a TTFT. The
sweep judges each point by these thresholds (runner/sweep); every run's summary carries the
same judgement (`validity`), so a single run's report says whether InferenceX would count it.
Pure: thresholds and figures in, problems out.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Validity", "judge", "problems"]


class Validity(BaseModel):
    """When a point counts: an invalid one is reported with its reason and left out of
    frontiers, searches and headlines."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    # InferenceX fails a point above 10 % errors (issue 20's survey of it).
    max_error_share: float = Field(
        default=0.10,
        ge=0,
        le=1,
        description="errors over the requests that ran their course (InferenceX: 10 %)",
    )
    # Ours: a stop cuts the requests in flight, and long requests are the likeliest to be in
    # flight, so a point that cut many measured a sample biased towards short ones.
    max_cut_share: float = Field(
        default=0.20,
        ge=0,
        le=1,
        description="requests cut by the run's stop over all its requests (ours: above a "
        "fifth, the latencies lean to the short requests the stop did not catch)",
    )
    # InferenceX fails a point below 98 % coverage (issue 20's survey of it).
    min_coverage: float = Field(
        default=0.98,
        ge=0,
        le=1,
        description="completed requests whose TTFT was measured (InferenceX: 98 %)",
    )


def _pct(share: float) -> str:
    return f"{share * 100:.3g} %"


def problems(
    validity: Validity,
    *,
    error_share: float | None,
    cut_share: float | None,
    coverage: float | None,
) -> list[str]:
    """Each threshold the figures break, said in words ([] when none)."""
    out = []
    if error_share is not None and error_share > validity.max_error_share:
        out.append(f"errors {_pct(error_share)} > {_pct(validity.max_error_share)}")
    if cut_share is not None and cut_share > validity.max_cut_share:
        out.append(f"cut by the stop {_pct(cut_share)} > {_pct(validity.max_cut_share)}")
    if coverage is None or coverage < validity.min_coverage:
        measured = "no completed request" if coverage is None else _pct(coverage)
        out.append(
            f"TTFT measured on {measured} of completed requests < {_pct(validity.min_coverage)}"
        )
    return out


def judge(
    *,
    requests: int,
    errors: int,
    cut: int,
    completed: int,
    ttft_measured: int,
    validity: Validity | None = None,
) -> dict[str, Any]:
    """A run's `validity` block: its shares, the thresholds, and the verdict with reasons."""
    rules = validity or Validity()
    finished = requests - cut
    error_share = errors / finished if finished else None
    cut_share = cut / requests if requests else None
    coverage = ttft_measured / completed if completed else None
    found = (
        ["no request ran its course"]
        if finished == 0
        else problems(rules, error_share=error_share, cut_share=cut_share, coverage=coverage)
    )
    return {
        "valid": not found,
        "reason": "; ".join(found) or None,
        "error_share": error_share,
        "cut_share": cut_share,
        "coverage": coverage,
        "thresholds": rules.model_dump(),
    }
