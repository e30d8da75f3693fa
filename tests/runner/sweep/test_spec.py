"""The sweep spec: validated once, every arm checked at the axis's ends, one place a point
becomes a run spec, and its published JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner import SpecError
from runner.sweep import Point, SweepSpec, parse_sweep, sweep_json_schema

ROOT = Path(__file__).resolve().parents[3]
SIM = {"duration_s": 60, "target": {"kind": "simulated"}}


def sweep(**fields: Any) -> SweepSpec:
    return parse_sweep({"base": SIM, "concurrency": [1, 4, 16], **fields})


def test_loads_are_kept_ascending_and_one_arm_is_the_base_by_default():
    spec = parse_sweep({"base": SIM, "concurrency": [16, 1, 4]})
    assert spec.loads == (1.0, 4.0, 16.0)
    assert [arm.name for arm in spec.arms] == ["base"]
    assert spec.axis == "concurrency" and spec.load_text(16) == "c=16"


def test_a_point_runs_the_arm_at_its_load_with_the_sweeps_slos_and_the_repeats_seed():
    spec = sweep(
        arms=[{"name": "legacy", "overrides": {"policy": "legacy"}}],
        slo={"ttft_ms": 500, "goodput_fraction": 0.9},
        base={**SIM, "seed": 7, "slo_latency_ms": 9000},
    )
    run = spec.spec_for(Point(arm="legacy", load=4, repeat=2))
    assert run.concurrency == 4 and run.policy == "legacy" and run.seed == 9
    # The sweep's SLOs replace the base's: every arm is held to the same thresholds.
    assert run.slo_ms == {"ttft_ms": 500}


def test_a_rate_axis_runs_timing_rate_and_its_synchronous_point_one_tree_at_a_time():
    spec = parse_sweep(
        {
            "base": {**SIM, "timing": "rate", "rate_per_s": 1},
            "rate_per_s": [0.5, 2],
            "mode": "auto",
        }
    )
    free = spec.spec_for(Point(arm="base", load=2, phase="saturation"))
    synchronous = spec.spec_for(Point(arm="base", load=2, phase="synchronous"))
    assert free.rate_per_s == synchronous.rate_per_s == 2
    assert free.concurrency is None and synchronous.concurrency == 1
    assert spec.load_text(2, "synchronous") == "2/s one at a time"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"rate_per_s": [1]}, "give one load axis"),
        ({"concurrency": None}, "give one load axis"),
        ({"concurrency": [1, 1]}, "concurrency: a load appears twice"),
        ({"mode": "slo"}, "mode slo needs slo thresholds"),
        ({"slo": {"goodput_fraction": 0.9}}, "slo: set at least one of ttft_ms"),
        ({"arms": [{"name": "a"}, {"name": "a"}]}, "arms: two arms have the same name"),
        ({"arms": [{"name": "a", "overrides": {"seed": 3}}]}, "arm 'a' sets seed"),
        ({"arms": [{"name": "a", "overrides": {"concurrency": 3}}]}, "sets concurrency, the load"),
        (
            {"arms": [{"name": "a", "overrides": {"policy": "magic"}}]},
            "arm 'a' at c=1: policy: Input should be",
        ),
        (
            {
                "arms": [
                    {
                        "name": "a",
                        "overrides": {
                            "target": {"kind": "endpoint", "url": "http://h", "model": "m"}
                        },
                    }
                ]
            },
            "changes the target to endpoint",
        ),
        ({"arms": [{"name": "bad name"}]}, "arms.0.name"),
        ({"arms": [{"name": f"a{i}"} for i in range(7)]}, "arms: Tuple should have at most 6"),
        ({"repeats": 0}, "repeats: Input should be greater than or equal to 1"),
    ],
)
def test_a_bad_sweep_is_refused_naming_the_field_and_the_fix(fields, message):
    with pytest.raises(SpecError) as error:
        parse_sweep({"base": SIM, "concurrency": [1, 4, 16], **fields})
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_an_arm_whose_knob_breaks_only_at_the_top_load_is_refused_before_any_run():
    # closed timing on an instant cluster needs a request stop: the arm is fine as a knob, and
    # refused for what it makes of the points.
    with pytest.raises(SpecError, match=r"arm 'x' at c=1: .*closed timing on an instant"):
        parse_sweep(
            {
                "base": {**SIM, "target": {"kind": "simulated", "time_scale": 0}},
                "concurrency": [1, 8],
                "arms": [{"name": "x", "overrides": {"timing": "closed"}}],
            }
        )


def test_a_rate_axis_needs_every_arm_at_timing_rate():
    with pytest.raises(SpecError, match="a rate_per_s axis needs timing rate"):
        parse_sweep(
            {
                "base": {**SIM, "timing": "rate", "rate_per_s": 1},
                "rate_per_s": [1, 2],
                "arms": [{"name": "lanes", "overrides": {"timing": "lanes"}}],
            }
        )


def test_the_endpoints_key_reaches_every_point_and_is_never_written():
    live = {"duration_s": 5, "target": {"kind": "endpoint", "url": "http://h:1", "model": "m"}}
    spec = parse_sweep({"base": live, "concurrency": [1, 2]}).with_api_key("sk-secret")
    run = spec.spec_for(Point(arm="base", load=2))
    assert run.target.api_key_value == "sk-secret"  # type: ignore[union-attr]
    assert "sk-secret" not in spec.model_dump_json()
    again = parse_sweep(spec.model_dump_json())
    assert again == parse_sweep({"base": live, "concurrency": [1, 2]})


def test_the_published_json_schema_is_the_sweeps_own_and_refers_to_the_run_spec():
    published = json.loads((ROOT / "docs" / "sweep-spec.schema.json").read_text("utf-8"))
    assert published == json.loads(json.dumps(sweep_json_schema())), (
        "regenerate docs/sweep-spec.schema.json from runner.sweep.sweep_json_schema()"
    )
    assert published["properties"]["base"]["allOf"] == [{"$ref": "run-spec.schema.json"}]
    assert {"concurrency", "rate_per_s", "arms", "repeats", "mode", "slo", "validity"} <= set(
        published["properties"]
    )
