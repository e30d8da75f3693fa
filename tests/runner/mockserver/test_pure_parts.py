"""The I/O-free parts behind the HTTP surface: block keys, fault draws, config checks."""

from __future__ import annotations

import pytest

from runner.errors import SpecError
from runner.mockserver import FaultConfig, MockServerConfig
from runner.mockserver.faults import FaultInjector
from runner.mockserver.parse import block_keys


def test_block_keys_are_chained_over_full_blocks_only() -> None:
    a = ["one", "two", "three", "four", "five", "six", "seven"]
    b = ["one", "two", "three", "four", "FIVE", "six", "seven", "eight"]

    keys_a, keys_b = block_keys(a, 2), block_keys(b, 2)
    assert len(keys_a) == 3 and len(keys_b) == 4  # the odd last word is no block
    assert keys_a[:2] == keys_b[:2]  # equal prefixes, equal keys
    assert keys_a[2] != keys_b[2]  # a changed block changes its key ...
    assert block_keys(["x", "y", *a[2:]], 2)[1:] != keys_a[1:]  # ... and every later one


def test_fault_draws_repeat_with_the_seed_and_break_mid_stream() -> None:
    config = FaultConfig(disconnect_rate=0.5, stall_rate=0.5, seed=5)
    one, other = FaultInjector(config), FaultInjector(config)
    draws = [one.draw(10) for _ in range(200)]
    again = [other.draw(10) for _ in range(200)]

    assert draws == again
    assert {d.kind for d in draws} == {"disconnect", "stall"}
    assert all(1 <= d.at_token <= 9 for d in draws)
    assert FaultInjector(config).draw(1).at_token == 0  # one token: it breaks before it


def test_no_faults_configured_draws_nothing() -> None:
    injector = FaultInjector(FaultConfig())
    assert {injector.draw(5).kind for _ in range(100)} == {None}


@pytest.mark.parametrize(
    "build",
    [
        lambda: FaultConfig(error_rate=-0.1),
        lambda: FaultConfig(stall_rate=float("nan")),
        lambda: FaultConfig(error_rate=0.5, overload_rate=0.6),
        lambda: FaultConfig(stall_s=-1),
        lambda: MockServerConfig(model=""),
        lambda: MockServerConfig(api_key=""),
        lambda: MockServerConfig(default_max_tokens=0),
    ],
)
def test_bad_settings_are_refused_with_a_spec_error(build: object) -> None:
    with pytest.raises(SpecError):
        build()  # type: ignore[operator]
