"""The built-in sample traces: public traces read in place from AIPERF_SAMPLES_DIR (the
shared/traces folder beside the checkout), never copied into the project. A sample whose file
is not there is not offered; the demo scenario then falls back to the synthetic workload."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.conf import settings


@dataclass(frozen=True)
class Sample:
    key: str
    relpath: str  # below AIPERF_SAMPLES_DIR
    title: str

    @property
    def filename(self) -> str:
        return Path(self.relpath).name

    @property
    def path(self) -> Path:
        return Path(settings.AIPERF_SAMPLES_DIR) / self.relpath

    @property
    def available(self) -> bool:
        return self.path.is_file()


SAMPLES: dict[str, Sample] = {
    s.key: s
    for s in (
        Sample(
            "claude-code-subagents",
            "weka_claude_code/trace_0282.json",
            "Claude Code session with 3 Explore subagents (SPAWN), 103 requests over 4 h",
        ),
        Sample(
            "claude-code-single",
            "weka_claude_code/trace_0022.json",
            "Claude Code session without subagents, 7 requests",
        ),
        Sample(
            "dag-spawn-minimal", "aiperf_dag/spawn_minimal.dag.jsonl", "aiperf dag_jsonl: one SPAWN"
        ),
        Sample(
            "dag-fork-fanout",
            "aiperf_dag/bg_fork_fanout.dag.jsonl",
            "aiperf dag_jsonl: background FORK fan-out",
        ),
        Sample("dag-small", "aiperf_dag/small.dag.jsonl", "aiperf dag_jsonl: a small FORK tree"),
        Sample(
            "mooncake-template",
            "aiperf_dag/aiperf_template_production_trace.jsonl",
            "Mooncake-style lines as aiperf templates ship them",
        ),
        Sample(
            "mooncake-conversations",
            "mooncake/conversation_trace.head2000.jsonl",
            "Mooncake conversation trace, first 2,000 requests (arrival timestamps)",
        ),
        Sample(
            "azure-conversations",
            "azure/AzureLLMInferenceTrace_conv.csv",
            "Azure LLM inference trace, conversation service (arrival timestamps)",
        ),
    )
}


def available_samples() -> list[Sample]:
    return [sample for sample in SAMPLES.values() if sample.available]
