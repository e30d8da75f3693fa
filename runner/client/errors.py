"""Errors the client raises to the person running a benchmark (not per-request outcomes).

Per-request trouble never raises: it becomes a `ResponseResult` with an error category.
These are for checks before a run, where the fix is the user's: a wrong URL, key or model.
"""

from __future__ import annotations

from runner.errors import BadInput

__all__ = ["EndpointError"]


class EndpointError(BadInput):
    """The endpoint cannot serve the run: one line saying what, where and how to fix it."""

    def __init__(self, message: str, *, url: str) -> None:
        self.url = url
        super().__init__(message)
