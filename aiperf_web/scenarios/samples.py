"""The built-in sample traces shipped in `samples/` (see its README for sources and licenses)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SAMPLES_DIR = Path(__file__).resolve().parent / "samples"


@dataclass(frozen=True)
class Sample:
    key: str
    filename: str
    title: str

    @property
    def path(self) -> Path:
        return SAMPLES_DIR / self.filename


SAMPLES: dict[str, Sample] = {
    s.key: s
    for s in (
        Sample(
            "claude-code-subagents",
            "trace_0282.json",
            "Claude Code session with 3 Explore subagents (SPAWN), 103 requests over 4 h",
        ),
        Sample(
            "claude-code-single",
            "trace_0022.json",
            "Claude Code session without subagents, 7 requests",
        ),
        Sample("dag-spawn-minimal", "spawn_minimal.dag.jsonl", "aiperf dag_jsonl: one SPAWN"),
        Sample(
            "dag-fork-fanout",
            "bg_fork_fanout.dag.jsonl",
            "aiperf dag_jsonl: background FORK fan-out",
        ),
        Sample("dag-small", "small.dag.jsonl", "aiperf dag_jsonl: a small FORK tree"),
        Sample(
            "mooncake-template",
            "aiperf_template_production_trace.jsonl",
            "Mooncake-style lines as aiperf templates ship them",
        ),
    )
}
