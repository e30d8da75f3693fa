"""Named run presets: a benchmark's published settings as spec knobs, in one place.

`agentx` is InferenceX's AgentX scenario (aiperf's `inferencex-agentx-mvp`, as its recipes run
it: `--trajectory-start-min-ratio 0.25 --trajectory-start-max-ratio 0.75
--warmup-requests-per-lane 10 --trace-idle-gap-cap-seconds 300 --failed-request-threshold
0.10 --random-seed 42`, an hour's profile): Claude Code traces, each lane starting its first
tree at 25-75 % of the tree's span, its first ten requests unmeasured, recorded pauses cut to
five minutes, the run stopped when more than 10 % of its requests fail. Every summary then
says whether InferenceX would count the run (`validity`: errors at most 10 %, TTFT measured on
at least 98 % of completed requests; runner/validity.py). The CLI's `--preset` and the
service's scenario presets read this table; knobs given explicitly win over a preset's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.errors import SpecError

__all__ = ["PRESETS", "Preset", "apply_preset"]


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    description: str
    knobs: Mapping[str, Any]  # RunSpec fields
    target_knobs: Mapping[str, Any] = field(default_factory=dict)  # endpoint targets only
    needs_traces: bool = False


AGENTX = Preset(
    name="agentx",
    description="InferenceX AgentX: Claude Code traces, lanes starting at 25-75 % of their "
    "trees, 10 warmup requests per lane, idle gaps capped at 300 s, stop above 10 % failed "
    "requests, one hour; the summary's validity applies InferenceX's rules",
    knobs={
        "timing": "lanes",
        "start_window": (0.25, 0.75),
        "warmup_per_lane": 10,
        "max_idle_s": 300.0,
        "duration_s": 3600.0,
        "seed": 42,
        "policy": "spawn-pin",
    },
    target_knobs={"stop_error_share": 0.10},
    needs_traces=True,
)

PRESETS: Mapping[str, Preset] = {AGENTX.name: AGENTX}


def apply_preset(name: str, spec: Mapping[str, Any], *, given: frozenset[str]) -> dict[str, Any]:
    """`spec` (a RunSpec as data) with the preset's knobs, except those in `given` (knobs the
    user set: dotted for the target's, e.g. "target.stop_error_share")."""
    preset = PRESETS.get(name)
    if preset is None:
        raise SpecError(f"no preset {name!r}: use one of {', '.join(sorted(PRESETS))}")
    data = dict(spec)
    if preset.needs_traces and not (data.get("workload") or {}).get("traces"):
        raise SpecError(f"the {name} preset replays Claude Code traces: give --trace FILE")
    for knob, value in preset.knobs.items():
        if knob not in given:
            data[knob] = list(value) if isinstance(value, tuple) else value
    target = data.get("target")
    if isinstance(target, Mapping) and target.get("kind", "endpoint") == "endpoint":
        target = dict(target)
        for knob, value in preset.target_knobs.items():
            if f"target.{knob}" not in given:
                target[knob] = value
        data["target"] = target
    return data
