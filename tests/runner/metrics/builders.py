"""Request records for metrics tests, with every field defaulted to a plain successful turn."""

from __future__ import annotations

import itertools
from typing import Any

from runner.metrics import RequestRecord

_ids = itertools.count(1)


def request(
    *,
    start_s: float = 0.0,
    ttft_ms: float | None = 50.0,
    latency_ms: float = 500.0,
    **fields: Any,
) -> RequestRecord:
    """`request(ttft_ms=80, depth=1, branch_mode="fork")`: times given as the latencies to test."""
    values: dict[str, Any] = {
        "request_id": next(_ids),
        "session_id": "s",
        "root_id": "s",
        "turn_index": 0,
        "num_turns": 1,
        "client_worker": 0,
        "start_s": start_s,
        "first_token_s": None if ttft_ms is None else start_s + ttft_ms / 1000.0,
        "end_s": start_s + latency_ms / 1000.0,
        "prompt_tokens": 100,
        "output_tokens": 10,
        "itl_ms": 5.0,
        "status": 200,
    }
    values.update(fields)
    return RequestRecord(**values)
