"""A stream's inter-token latency from its chunks' read times (runner/wallclock/replay.py): the
chunks of one socket read share one time, so a stream whose tokens all came in one read has no
ITL (None), not 0 ms; tokens spread over reads give the mean gap."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from runner.client.http import ResponseResult
from runner.replay.engine import Dispatch
from runner.wallclock.replay import _LiveRun
from runner.wallclock.served import ServedIndex
from tests.runner.factories import credit


def _itl(chunk_times_s: tuple[float, ...]) -> float | None:
    live: Any = SimpleNamespace(t0=0.0, served=ServedIndex())
    dispatch = Dispatch(credit=credit("s"), worker=0, affinity=None)  # type: ignore[arg-type]
    result = ResponseResult(
        start_s=0.0, end_s=1.0, first_token_s=chunk_times_s[0], chunk_times_s=chunk_times_s,
        output_tokens=len(chunk_times_s), prompt_tokens=10, cached_tokens=None, served_by="0",
        status=200, error=None,
    )  # fmt: skip
    return _LiveRun._record(live, dispatch, result, 10).itl_ms


def test_tokens_of_one_read_give_no_itl_rather_than_zero() -> None:
    assert _itl((0.5, 0.5, 0.5, 0.5)) is None


def test_tokens_over_several_reads_give_their_mean_gap() -> None:
    itl = _itl((0.5, 0.5, 0.6, 0.8))
    assert itl is not None and abs(itl - 100.0) < 1e-9
