"""Configuration defaults and validation, the latency polynomials, and chained block keys."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from runner.cluster import ClusterConfig, chain_block_keys
from runner.errors import SpecError


def test_defaults_follow_dynamos_mocker_and_frontend() -> None:
    config = ClusterConfig()
    assert (config.workers, config.dp_ranks, config.block_size_tokens) == (8, 1, 64)
    assert (config.capacity_blocks, config.max_num_seqs) == (16384, 256)
    assert (config.router, config.kv_approx_ttl_s, config.session_sweep_s) == (
        "round-robin",
        120.0,
        30.0,
    )
    assert (config.dynamo_version, config.honour_session_control) == ("bind", True)
    assert config.header_affinity_ttl_s is None


@pytest.mark.parametrize(
    ("tokens", "expected_ms"),
    [(0, 16.5), (1000, 32.101), (8000, 164.884), (32000, 933.364)],
)
def test_prefill_polynomial_at_known_points(tokens: int, expected_ms: float) -> None:
    assert ClusterConfig().prefill_ms(tokens) == pytest.approx(expected_ms, abs=1e-3)


@pytest.mark.parametrize(
    ("kv_usage", "expected_ms"),
    [(0.0, 5.74), (0.5, 26.31), (1.0, 34.01)],
)
def test_decode_polynomial_at_known_points(kv_usage: float, expected_ms: float) -> None:
    assert ClusterConfig().decode_ms(kv_usage) == pytest.approx(expected_ms, abs=1e-3)


def test_decode_step_never_drops_below_its_floor() -> None:
    config = ClusterConfig(decode_base_ms=-100.0)
    assert config.decode_ms(0.0) == 1.0


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("workers", 0, "workers must be at least 1"),
        ("dp_ranks", 0, "dp_ranks must be at least 1"),
        ("capacity_blocks", 0, "capacity_blocks must be at least 1"),
        ("max_num_seqs", 0, "max_num_seqs must be at least 1"),
        ("router", "sticky", "unknown cluster router 'sticky'"),
        ("dynamo_version", "1.1", "unknown dynamo_version '1.1'"),
        ("time_scale", -1.0, "time_scale must be 0 or more"),
        ("session_sweep_s", 0.0, "session_sweep_s must be positive"),
        ("kv_approx_ttl_s", -5.0, "kv_approx_ttl_s must be positive"),
        ("header_affinity_ttl_s", 0.0, "header_affinity_ttl_s must be positive or None"),
    ],
)
def test_invalid_settings_are_rejected_with_a_spec_error(
    field: str, value: object, fragment: str
) -> None:
    with pytest.raises(SpecError, match=fragment):
        ClusterConfig(**{field: value})  # type: ignore[arg-type]


def test_chained_keys_name_the_whole_prefix_not_just_the_block() -> None:
    a = chain_block_keys([1, 2, 3])
    b = chain_block_keys([9, 2, 3])
    assert len(a) == 3
    assert len(set(a)) == 3
    assert not set(a) & set(b)  # same block contents after a different first block
    assert chain_block_keys([1, 2]) == a[:2]


def test_extending_from_the_last_key_equals_keying_the_whole_prompt() -> None:
    whole = chain_block_keys(range(10))
    head = chain_block_keys(range(6))
    assert head + chain_block_keys(range(6, 10), seed=head[-1]) == whole


def test_token_blocks_text_and_bytes_are_accepted_parts() -> None:
    keys = chain_block_keys([(1, 2, 3), "system prompt", b"\x00\x01", 7])
    assert len(keys) == 4
    assert chain_block_keys(["abc"]) == chain_block_keys([b"abc"])
    assert chain_block_keys(["abc"]) != chain_block_keys(["abd"])


def test_keys_are_the_same_in_every_process() -> None:
    script = "from runner.cluster import chain_block_keys as c; print(c(['x', (1, 2), 3]))"
    outputs = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        run = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
        )
        outputs.add(run.stdout)
    assert outputs == {str(chain_block_keys(["x", (1, 2), 3])) + "\n"}
