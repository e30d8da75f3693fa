"""Every numeric knob of a run spec has a ceiling (issue 13 item 3), the few an operator may
raise come from the environment, and specs that used to break runs are refused with a message
naming the field (item 4)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runner import SpecError, SyntheticConfig, parse_spec
from runner.limits import (
    MAX_CONCURRENCY,
    MAX_DURATION_S,
    MAX_SYNTHETIC_BLOCKS,
    MAX_SYNTHETIC_REQUESTS,
)

ROOT = Path(__file__).resolve().parents[2]
LIVE = {"kind": "endpoint", "url": "http://127.0.0.1:8100", "model": "m"}


@pytest.mark.parametrize(
    ("knob", "value"),
    [
        ("duration_s", 1e12),
        ("concurrency", 100_000),
        ("client_workers", 4096),
        ("max_requests", 10**15),
        ("max_trees", 10**15),
        ("warmup_s", 1e15),
        ("rate_per_s", 1e308),
        ("burstiness", 1e-320),
        ("speedup", 1e-300),
        ("slo_ttft_ms", 1e12),
        ("snapshot_interval_s", 1e-300),
        ("header_name", "x" * 10_000),
        ("target", {**LIVE, "read_timeout_s": 1e12}),
        ("target", {**LIVE, "connect_timeout_s": 1e12}),
        ("target", {**LIVE, "failure_threshold": 10**12}),
        ("target", {"kind": "simulated", "time_scale": 1e-300}),
        ("target", {"kind": "simulated", "header_affinity_ttl_s": 1e300}),
        ("target", {"kind": "simulated", "snapshot_interval_s": 1e-300}),
    ],
)
def test_an_absurd_knob_is_refused_naming_its_field(knob: str, value: Any) -> None:
    data: dict[str, Any] = {"duration_s": 10, knob: value}
    if knob in ("rate_per_s", "burstiness"):
        data |= {"timing": "rate", "rate_per_s": data.get("rate_per_s", 1), "arrival": "gamma"}
    with pytest.raises(SpecError) as caught:
        parse_spec(data)
    assert any(field.startswith(knob) for field in caught.value.fields), caught.value.fields


@pytest.mark.parametrize(
    "synthetic",
    [
        {"output_tokens": [1, 10**12]},
        {"main_turns": [1, 10**9]},
        {"spawn_fanout": [1, 10**6]},
        {"max_context_tokens": 10**15},
        {"think_time_sigma": 1e6},
        {"block_size": 10**12},
        {"seed": -1},
    ],
)
def test_an_unbounded_synthetic_knob_is_refused(synthetic: dict[str, Any]) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec({"workload": {"synthetic": synthetic}})
    assert "workload.synthetic" in str(caught.value)


def test_a_synthetic_workload_too_big_to_hold_is_refused_naming_the_product() -> None:
    # Each knob within its own range; together over a gigabyte of prompt blocks.
    big = {"trees": 50, "main_turns": [200, 400], "spawn_probability": 0.5}
    with pytest.raises(SpecError) as caught:
        parse_spec({"workload": {"synthetic": big}})
    message = str(caught.value)
    assert "prompt blocks = 50 trees x" in message
    assert f"{MAX_SYNTHETIC_BLOCKS:,}" in message and "AIPERF_MAX_SYNTHETIC_BLOCKS" in message


def test_a_synthetic_workload_of_too_many_small_requests_is_refused() -> None:
    # Tiny prompts (one block each) pass the block bound with any number of trees; 100,000
    # trees would still be ~24 million requests: minutes of generation and gigabytes.
    many = {"trees": 100_000, "block_size": 65_536}
    with pytest.raises(SpecError) as caught:
        parse_spec({"workload": {"synthetic": many}})
    message = str(caught.value)
    assert "requests = 100000 trees x" in message
    assert f"{MAX_SYNTHETIC_REQUESTS:,}" in message and "AIPERF_MAX_SYNTHETIC_REQUESTS" in message
    # The size the cancel tests generate stays accepted.
    parse_spec({"workload": {"synthetic": {"trees": 5_000, "block_size": 65_536}}})


def test_the_synthetic_estimate_errs_high_but_not_wildly() -> None:
    from runner.trace import generate_synthetic

    config = SyntheticConfig(trees=8)
    requests, blocks = config.estimated_size()
    trace = generate_synthetic(config)
    turns = [t for tree in trace.trees for s in tree.sessions.values() for t in s.turns]
    held = sum(len(t.hash_ids) for t in turns)
    assert 0.5 * len(turns) <= requests <= 2 * len(turns)
    assert held <= requests * blocks <= 4 * held


def test_the_ceilings_sit_at_their_documented_defaults_and_in_the_schema() -> None:
    assert (MAX_DURATION_S, MAX_CONCURRENCY) == (86_400, 10_000)
    parse_spec({"duration_s": MAX_DURATION_S, "concurrency": MAX_CONCURRENCY})
    schema = json.loads((ROOT / "docs" / "run-spec.schema.json").read_text(encoding="utf-8"))
    props = schema["properties"]
    assert props["duration_s"]["anyOf"][0]["maximum"] == MAX_DURATION_S
    assert "AIPERF_MAX_DURATION_S" in props["duration_s"]["description"]
    assert "AIPERF_MAX_CONCURRENCY" in props["concurrency"]["description"]


def test_an_operator_raises_a_ceiling_with_its_environment_variable() -> None:
    code = (
        "from runner import parse_spec; "
        "print(parse_spec({'duration_s': 7 * 86400, 'concurrency': 50000}).duration_s)"
    )
    env = {"PYTHONPATH": str(ROOT), "AIPERF_MAX_DURATION_S": "604800"}
    env["AIPERF_MAX_CONCURRENCY"] = "50_000"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "604800.0"


def test_closed_timing_on_an_instant_cluster_needs_a_count_to_stop() -> None:
    spec = {"timing": "closed", "duration_s": 60, "target": {"kind": "simulated", "time_scale": 0}}
    with pytest.raises(SpecError, match="never moves the simulated clock"):
        parse_spec(spec)
    parse_spec({**spec, "max_requests": 1000})
