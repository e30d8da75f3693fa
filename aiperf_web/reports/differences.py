"""What differs between runs, and whether a difference stands out of the noise: the column heads
and legends of the comparison, its "all runs: ..." line, the scenario history's lines, the
verdict word of each compared figure and one plain sentence per compared configuration.

Pure: runs come in as `RunConfig`s (built by `run_config` from a run's stored spec), figures as
plain numbers. The statistics (spread over repeats, overlap) are the engine's
(runner.sweep.stats), as a sweep's are.

Noise (issue 20 item 6): runs of the same configuration in one comparison are repeats. A
figure of one configuration against the reference's is
- `within noise` when the ranges of their repeats overlap (or a single run falls inside the
  other's range): never coloured;
- `better` / `worse` only when both have repeats, the ranges are apart, and the means differ by
  more than the figure's tolerance;
- `same` when the figures are within the tolerance;
- `no repeats` otherwise: one run each (or one side single and outside the other's range), so
  no claim either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from aiperf_web.runs.verdict import Metric, metric_check
from runner import default_concurrency, overlap, spread_of

__all__ = [
    "CONFIG_FIELDS",
    "NO_REPEATS",
    "Group",
    "NoiseWord",
    "RunConfig",
    "config_groups",
    "config_head",
    "differing_fields",
    "noise_verdict",
    "pair_sentence",
    "run_config",
    "same_for_all",
]

# The fields a comparison's heads are made of, in the order a head reads.
CONFIG_FIELDS: tuple[str, ...] = (
    "scenario",
    "endpoint",
    "server",
    "policy",
    "affinity",
    "scope",
    "timing",
    "concurrency",
    "rate",
    "duration",
    "slo",
)
FIELD_NAMES = {
    "scenario": "scenario",
    "endpoint": "endpoint",
    "server": "server",
    "policy": "policy",
    "affinity": "affinity",
    "scope": "scope",
    "timing": "timing",
    "concurrency": "concurrency",
    "rate": "rate",
    "duration": "duration",
    "slo": "SLOs",
}
NO_REPEATS = "one run each: no repeats to judge noise"

NoiseWord = Literal[
    "reference", "repeat", "better", "worse", "within noise", "same", "no repeats", "n/a"
]


@dataclass(frozen=True)
class RunConfig:
    """The configuration of one run, each field as a head shows it."""

    values: tuple[tuple[str, str], ...]  # (field, text) in CONFIG_FIELDS order

    def get(self, name: str) -> str:
        return dict(self.values)[name]

    @property
    def key(self) -> tuple[str, ...]:
        return tuple(text for _, text in self.values)


def _num(x: Any) -> str:
    value = float(x)
    return f"{value:g}"


def _slo_text(spec: Mapping[str, Any]) -> str:
    parts = []
    names = (("slo_ttft_ms", "TTFT"), ("slo_itl_ms", "ITL"), ("slo_latency_ms", "latency"))
    for key, name in names:
        value = spec.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            parts.append(f"{name} ≤ {_num(value)} ms")
    return "SLO " + ", ".join(parts) if parts else "no SLO"


def run_config(
    spec: Mapping[str, Any] | None,
    *,
    scenario: str,
    endpoint: str,
    target_kind: str,
    server_kind: str | None,
) -> RunConfig:
    """A run's configuration from its stored spec and names. Fields that do not apply read as
    such (no scope without affinity, no rate on lanes), so that they never split runs that
    are the same experiment."""
    spec = spec or {}
    timing = str(spec.get("timing") or "lanes")
    affinity = spec.get("affinity")
    concurrency = spec.get("concurrency")
    rate = spec.get("rate_per_s")
    duration = spec.get("duration_s")
    values = {
        "scenario": scenario or "?",
        "endpoint": endpoint or "?",
        "server": "simulated" if target_kind == "simulated" else (server_kind or "endpoint"),
        "policy": str(spec.get("policy") or "?"),
        "affinity": "no affinity" if affinity in (None, "none") else f"affinity {affinity}",
        "scope": "—" if affinity in (None, "none") else str(spec.get("scope") or "?"),
        "timing": timing,
        # Without one, the engine's default for the timing (lanes on lanes, no cap on rate).
        "concurrency": (
            f"c={concurrency}"
            if isinstance(concurrency, int)
            else (f"c={lanes}" if (lanes := default_concurrency(timing)) else "no cap")
        ),
        "rate": f"{_num(rate)} trees/s" if timing == "rate" and rate else "—",
        "duration": f"{_num(duration)} s" if duration else "no time limit",
        "slo": _slo_text(spec),
    }
    return RunConfig(tuple((name, values[name]) for name in CONFIG_FIELDS))


def differing_fields(configs: Sequence[RunConfig]) -> list[str]:
    """The fields whose value is not the same for every run, in CONFIG_FIELDS order."""
    return [
        name for i, name in enumerate(CONFIG_FIELDS) if len({c.values[i][1] for c in configs}) > 1
    ]


def config_head(config: RunConfig, fields: Sequence[str]) -> str:
    """The head of a run from the differing fields only: 'c=8 · legacy'. A field that does not
    apply to this run (scope without affinity, rate on lanes) is left out."""
    parts = [config.get(f) for f in fields if config.get(f) != "—"]
    return " · ".join(parts) if parts else "same configuration"


def same_for_all(configs: Sequence[RunConfig], fields_differing: Sequence[str]) -> str:
    """The one line of what every run shares: 'all runs: scenario demo, endpoint ..., ...'."""
    if not configs:
        return ""
    first = configs[0]
    parts = []
    for name in CONFIG_FIELDS:
        if name in fields_differing or first.get(name) == "—":
            continue
        text = first.get(name)
        label = FIELD_NAMES[name]
        # Texts that already name themselves ('c=16', 'no affinity', 'SLO ...') stand alone.
        if text.startswith(("c=", "no ", "affinity ", "SLO")) or name == "duration":
            parts.append(text)
        else:
            parts.append(f"{label} {text}")
    return "all runs: " + ", ".join(parts)


@dataclass(frozen=True)
class Group:
    """Runs of one configuration (repeats of each other) and their head."""

    key: tuple[str, ...]
    head: str
    members: tuple[int, ...]  # indexes into the compared runs


def config_groups(configs: Sequence[RunConfig], fields: Sequence[str]) -> list[Group]:
    """The compared runs grouped by configuration, in order of first appearance."""
    order: dict[tuple[str, ...], list[int]] = {}
    for i, config in enumerate(configs):
        order.setdefault(config.key, []).append(i)
    return [
        Group(key=key, head=config_head(configs[members[0]], fields), members=tuple(members))
        for key, members in order.items()
    ]


def noise_verdict(
    metric: Metric, reference: Sequence[float | None], other: Sequence[float | None]
) -> NoiseWord:
    """One figure of a configuration's runs against the reference configuration's runs."""
    ref_spread, spread = spread_of(reference), spread_of(other)
    if ref_spread is None or spread is None or metric.better == "none":
        return "n/a"
    check = metric_check(metric, spread.mean, ref_spread.mean)
    if check["status"] == "ok":
        return "same"
    if ref_spread.n >= 2 and spread.n >= 2:
        if overlap(ref_spread, spread):
            return "within noise"
        return "better" if check["status"] == "improved" else "worse"
    # One side single: inside the other's range it is noise; outside, one spread is not
    # enough to tell.
    if (ref_spread.n >= 2 or spread.n >= 2) and overlap(ref_spread, spread):
        return "within noise"
    return "no repeats"


# -- one sentence per compared configuration -----------------------------------------------------

# The figures a sentence names, in this order, when they moved beyond their tolerance.
SENTENCE_KEYS: tuple[str, ...] = (
    "orphaned_session_copies",
    "worker_switches",
    "errors",
    "ttft_ms.p50",
    "ttft_ms.p99",
    "itl_ms.p99",
    "latency_ms.p99",
    "requests_per_s",
    "goodput.good_ratio",
    "goodput.goodput_per_s",
    "prefix_cache_hit_ratio",
    "child_first_turn_hit_ratio",
    "placement.trees_split",
)
SENTENCE_PARTS = 4
# Counts read "150 → 0 orphaned copies"; the rest by their label.
COUNT_NAMES = {
    "orphaned_session_copies": "orphaned copies",
    "worker_switches": "client-worker switches",
    "errors": "errors",
    "placement.trees_split": "trees split",
}


def _figure(value: float) -> str:
    if value == int(value):
        return f"{int(value):,}"
    return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.3g}"


def _part(metric: Metric, ref: float, value: float) -> str:
    if metric.key in COUNT_NAMES:
        return f"{_figure(ref)} → {_figure(value)} {COUNT_NAMES[metric.key]}"
    if metric.key.rsplit(".", 1)[-1].endswith("_ratio"):
        return f"{metric.label} {100 * ref:.1f} % → {100 * value:.1f} %"
    if ref == 0:
        return f"{metric.label} {_figure(ref)} → {_figure(value)}"
    pct = 100.0 * (value - ref) / abs(ref)
    sign = "+" if pct > 0 else "−"
    return f"{metric.label} {sign}{abs(pct):.0f} %"


def pair_sentence(
    *,
    head: str,
    ref_head: str,
    metrics: Sequence[Metric],
    reference: Mapping[str, Sequence[float | None]],
    other: Mapping[str, Sequence[float | None]],
    words: Mapping[str, NoiseWord],
) -> str:
    """'spawn-pin against legacy: 150 → 0 orphaned copies, TTFT p50 −50 % (one run each: no
    repeats to judge noise).' The figures are means over each side's repeats; with repeats,
    each figure says whether it stands out of the noise."""
    by_key = {m.key: m for m in metrics}
    parts: list[str] = []
    noisy = 0
    for key in SENTENCE_KEYS:
        metric = by_key.get(key)
        if metric is None or len(parts) >= SENTENCE_PARTS:
            continue
        ref_s, s = spread_of(reference.get(key, ())), spread_of(other.get(key, ()))
        if ref_s is None or s is None:
            continue
        word = words.get(key, "n/a")
        if word in ("same", "n/a", "repeat", "reference"):
            continue
        part = _part(metric, ref_s.mean, s.mean)
        if word == "within noise":
            part += " (within noise)"
            noisy += 1
        elif word in ("better", "worse"):
            part += f" ({word}, beyond noise)"
        parts.append(part)
    n_ref = max((len([v for v in vs if v is not None]) for vs in reference.values()), default=0)
    n = max((len([v for v in vs if v is not None]) for vs in other.values()), default=0)
    said = ", ".join(parts) if parts else "no figure moved beyond its tolerance"
    if n_ref < 2 and n < 2:
        note = NO_REPEATS
    elif n_ref >= 2 and n >= 2:
        note = f"{n} runs against {n_ref}" if n != n_ref else f"{n} runs each"
    else:
        note = f"{n} run{'s' if n != 1 else ''} against {n_ref}: too few repeats on one side"
    return f"{head} against {ref_head}: {said} ({note})."
