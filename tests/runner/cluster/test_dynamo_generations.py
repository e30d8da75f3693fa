"""Which Dynamo generation the frontend speaks (config.DynamoVersion): 1.2's open/close, the
bind-era builds' open/bind/close, and released 1.3-1.6's refusal of `session_control`."""

from __future__ import annotations

import pytest

from runner.cli import build_parser
from runner.cli.options import simulated_target
from runner.cluster import ClusterConfig
from runner.errors import SpecError
from runner.spec import parse_spec
from tests.runner.cluster.builders import bind, close, cluster, follow, open_, rejected, request

# Real Dynamo 1.6.1's answer (docs/dynamo-observed.md §a) less the body position, which only
# a server holding the body can add.
_SESSION_CONTROL_REFUSED_BY_16 = (
    "Failed to deserialize the JSON body into the target type: unknown field `session_control`, "
    "expected one of `greed_sampling`, `use_raw_prompt`, `annotations`, `backend_instance_id`, "
    "`token_data`, `max_thinking_tokens`, `cache_salt`, `extra_fields`, `metadata_upload`, "
    "`prefill_worker_id`, `decode_worker_id`, `dp_rank`, `prefill_dp_rank`, `agent_hints`, "
    "`request_timestamp_ms`, `routing_constraints`, `router`"
)


@pytest.mark.parametrize("control", [bind("s"), open_("s"), close("s"), follow("s"), "junk"])
def test_dynamo_16_refuses_any_session_control_with_http_400(control: object) -> None:
    c = cluster(dynamo_version="1.6")
    rejection = rejected(c.submit(request(control=control), 0.0))
    assert (rejection.status, rejection.message) == (400, _SESSION_CONTROL_REFUSED_BY_16)
    totals = c.stats(0.0)["totals"]
    assert (totals["requests"], totals["rejections"], totals["bound_keys"]) == (0, {"400": 1}, 0)


def test_dynamo_12_has_no_header_affinity_to_turn_on() -> None:
    with pytest.raises(SpecError, match=r"1\.2 has no header affinity"):
        ClusterConfig(dynamo_version="1.2", header_affinity_ttl_s=60)
    with pytest.raises(SpecError, match=r"1\.2 has no header affinity"):
        parse_spec(
            {"target": {"kind": "simulated", "dynamo_version": "1.2", "header_affinity_ttl_s": 60}}
        )


def test_the_default_generation_is_the_bind_era_contract() -> None:
    assert ClusterConfig().dynamo_version == "bind"
    assert parse_spec({}).target.model_dump()["dynamo_version"] == "bind"


def test_1_3_is_a_deprecated_name_for_bind_in_config_spec_and_cli() -> None:
    assert ClusterConfig(dynamo_version="1.3").dynamo_version == "bind"  # type: ignore[arg-type]
    stored = parse_spec({"target": {"kind": "simulated", "dynamo_version": "1.3"}})
    assert stored.target.model_dump()["dynamo_version"] == "bind"
    for command in (["simulate"], ["mock-server"]):
        args = build_parser().parse_args([*command, "--dynamo-version", "1.3"])
        assert simulated_target(args).dynamo_version == "bind"


def test_header_affinity_options_reach_the_cluster_config() -> None:
    args = build_parser().parse_args(
        [
            "mock-server",
            "--dynamo-version",
            "1.6",
            "--header-affinity-ttl",
            "30",
            "--header-affinity-mode",
            "soft",
        ]
    )
    config = simulated_target(args).cluster_config(seed=0)
    assert (config.dynamo_version, config.header_affinity_ttl_s, config.header_affinity_mode) == (
        "1.6",
        30.0,
        "soft",
    )
