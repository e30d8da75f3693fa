"""Out-of-range requests and settings: the cluster refuses them cleanly instead of overflowing."""

from __future__ import annotations

import math

import pytest

from runner.cluster import ClusterConfig
from runner.errors import SpecError
from tests.runner.cluster.builders import blocks, cluster, placed, rejected, request


@pytest.mark.parametrize(
    ("prompt_tokens", "output_tokens"),
    [(10**309, 1), (1, 10**309), (2**31, 1), (2**30, 2**30 + 1), (-1, 1), (1, -5)],
)
def test_token_counts_past_the_model_limit_get_400_not_an_overflow(
    prompt_tokens: int, output_tokens: int
) -> None:
    c = cluster()
    refusal = rejected(
        c.submit(request(prompt_tokens=prompt_tokens, output_tokens=output_tokens), 0.0)
    )

    assert refusal.status == 400 and "at most 2147483648" in refusal.message
    assert c.stats(0.0)["totals"]["rejections"] == {"400": 1}
    placed(c.submit(request(blocks(3)), 0.0))  # the cluster goes on serving


def test_the_largest_request_allowed_has_finite_times() -> None:
    c = cluster(max_request_tokens=20_000_000)
    placement = placed(c.submit(request(prompt_tokens=10_000_000, output_tokens=10_000_000), 0.0))

    assert math.isfinite(placement.end_s) and placement.ttft_s > 0


def test_a_lower_context_limit_refuses_what_it_cannot_hold() -> None:
    c = cluster(max_request_tokens=1000)
    assert rejected(c.submit(request(prompt_tokens=990, output_tokens=11), 0.0)).status == 400
    placed(c.submit(request(prompt_tokens=990, output_tokens=10), 0.0))


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("time_scale", math.inf, "time_scale must be a finite number"),
        ("prefill_ms_per_token", math.nan, "prefill_ms_per_token must be a finite number"),
        ("header_affinity_ttl_s", math.inf, "header_affinity_ttl_s must be a finite number"),
        ("workers", 10**9, "workers x dp_ranks must be at most 4096"),
        ("capacity_blocks", 10**309, "capacity_blocks must be at most"),
        ("max_request_tokens", 0, "max_request_tokens must be at least 1"),
    ],
)
def test_settings_that_would_break_the_model_are_refused(
    field: str, value: object, fragment: str
) -> None:
    with pytest.raises(SpecError, match=fragment):
        ClusterConfig(**{field: value})  # type: ignore[arg-type]


def test_more_engines_than_the_limit_are_refused() -> None:
    with pytest.raises(SpecError, match="workers x dp_ranks must be at most 4096"):
        ClusterConfig(workers=100, dp_ranks=100)
