"""The service offers the engine's presets as scenarios (scenarios/services.py
scenario_create_preset): AgentX's settings on the team's traces, or on the built-in Claude
Code sample imported for the team."""

from __future__ import annotations

import pytest

from aiperf_web.core.errors import Invalid
from aiperf_web.scenarios.samples import SAMPLES
from aiperf_web.scenarios.services import scenario_create_preset, scenario_run_spec
from tests.web.conftest import World


def test_an_agentx_scenario_carries_the_presets_knobs_on_the_teams_trace(world: World):
    scenario = scenario_create_preset(
        actor=world.owner, team=world.team, preset="agentx", trace_ids=[world.trace.uuid]
    )
    spec = scenario_run_spec(scenario=scenario)
    assert spec.start_window == (0.25, 0.75)
    assert spec.warmup_per_lane == 10 and spec.max_idle_s == 300.0
    assert spec.duration_s == 3600.0 and spec.seed == 42
    assert list(scenario.traces.all()) == [world.trace]
    assert scenario.name == "agentx" and "preset" in scenario.tags


def test_without_traces_the_claude_code_sample_is_imported(world: World):
    if not SAMPLES["claude-code-subagents"].available:
        pytest.skip("the public sample traces are not installed here")
    scenario = scenario_create_preset(
        actor=world.owner, team=world.team, preset="agentx", name="agentx sample"
    )
    (trace,) = scenario.traces.all()
    assert trace.sample == "claude-code-subagents"


def test_an_unknown_preset_is_refused(world: World):
    with pytest.raises(Invalid, match="no preset"):
        scenario_create_preset(actor=world.owner, team=world.team, preset="nope")
