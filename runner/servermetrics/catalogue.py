"""Which Prometheus series of each server mean what: the catalogue of canonical figures.

Owns the mapping from the families our mock, vLLM, SGLang and Dynamo print to five figures
(`kv_usage` as a 0–1 fraction, `queue_depth` and `running` in requests, `prefix_hit_ratio`,
`requests_total`), which label names a worker, and the few extra families worth keeping per
server. It reads one parsed exposition into a `Reading` (values per worker, raw counters);
turning counters into run deltas and readings into series is `books`'s. No I/O, no clock.

Names come from each server's own exposition: the mock's `render_prometheus`, vLLM's
`vllm:` families (V1 and the older V0 names), SGLang's `sglang:` gauges, and Dynamo's
frontend (`dynamo_frontend_*`, per-worker `dynamo_frontend_worker_*`) and worker
(`dynamo_component_kvstats_*`) families.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from runner.servermetrics.exposition import Exposition, Sample

__all__ = [
    "FIGURES",
    "GAUGE_FIGURES",
    "KINDS",
    "WORKER_LABELS",
    "Figure",
    "Reading",
    "ServerKind",
    "Source",
    "read_exposition",
]

Figure = Literal["kv_usage", "queue_depth", "running", "prefix_hit_ratio", "requests_total"]
FIGURES: Final[tuple[Figure, ...]] = (
    "kv_usage",
    "queue_depth",
    "running",
    "prefix_hit_ratio",
    "requests_total",
)
# Figures that are instantaneous levels (the rest may come from counters over the run).
GAUGE_FIGURES: Final[tuple[Figure, ...]] = ("kv_usage", "queue_depth", "running")
ServerKind = Literal["mock", "vllm", "sglang", "dynamo", "unknown"]

# Label names that say which worker (or engine rank) a series belongs to, most specific first.
WORKER_LABELS: Final = ("worker", "worker_id", "engine", "dp_rank", "instance", "pod")

How = Literal["gauge", "ratio", "counter", "counter_ratio"]


@dataclass(frozen=True, slots=True)
class Source:
    """Where one figure comes from on one server.

    gauge: the series' value; ratio: series[0] / series[1] now (per worker when the
    denominator is per worker, else over the one total); counter: the increase of series[0]
    over the run; counter_ratio: increase of series[0] / increase of series[1] (hits over
    queries). `scale` turns a percentage into a fraction where a server prints 0–100.
    """

    figure: Figure
    how: How
    series: tuple[str, ...]
    scale: float = 1.0


def _g(figure: Figure, *series: str, scale: float = 1.0) -> Source:
    return Source(figure, "gauge", series[:1], scale)


_MOCK: Final = (
    _g("kv_usage", "mock_worker_kv_usage"),
    _g("queue_depth", "mock_worker_queued"),
    _g("running", "mock_worker_running"),
    Source(
        "prefix_hit_ratio",
        "counter_ratio",
        ("mock_worker_cached_tokens_total", "mock_worker_prompt_tokens_total"),
    ),
    Source("requests_total", "counter", ("mock_worker_requests_total",)),
)
_VLLM: Final = (
    _g("kv_usage", "vllm:kv_cache_usage_perc"),  # V1: a fraction despite the name
    _g("kv_usage", "vllm:gpu_cache_usage_perc"),  # V0
    _g("queue_depth", "vllm:num_requests_waiting"),
    _g("running", "vllm:num_requests_running"),
    Source(
        "prefix_hit_ratio",
        "counter_ratio",
        ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"),
    ),
    Source(
        "prefix_hit_ratio",
        "counter_ratio",
        ("vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_queries_total"),
    ),
    _g("prefix_hit_ratio", "vllm:gpu_prefix_cache_hit_rate"),  # V0 gauge
    Source("requests_total", "counter", ("vllm:request_success_total",)),
)
_SGLANG: Final = (
    _g("kv_usage", "sglang:token_usage"),
    _g("queue_depth", "sglang:num_queue_reqs"),
    _g("running", "sglang:num_running_reqs"),
    _g("prefix_hit_ratio", "sglang:cache_hit_rate"),
    Source("requests_total", "counter", ("sglang:num_requests_total",)),
)
_DYNAMO: Final = (
    # Worker (system port) pages: per dp_rank, a fraction despite "percent" in the name.
    _g("kv_usage", "dynamo_component_kvstats_gpu_cache_usage_percent"),
    Source(
        "kv_usage",
        "ratio",
        ("dynamo_component_kvstats_active_blocks", "dynamo_component_kvstats_total_blocks"),
    ),
    # Frontend page (what 1.6.1 prints): the router's active blocks per worker over the
    # model's KV blocks per worker, and its cached / input token histograms' sums.
    Source(
        "kv_usage",
        "ratio",
        ("dynamo_frontend_worker_active_decode_blocks", "dynamo_frontend_model_total_kv_blocks"),
    ),
    _g("queue_depth", "dynamo_frontend_worker_waiting_requests"),  # later releases, per worker
    _g("queue_depth", "dynamo_frontend_queued_requests"),
    _g("queue_depth", "dynamo_frontend_router_queue_pending_requests"),
    _g("running", "dynamo_frontend_inflight_requests"),
    _g("running", "dynamo_component_inflight_requests"),
    _g("prefix_hit_ratio", "dynamo_component_kvstats_gpu_prefix_cache_hit_rate"),
    Source(
        "prefix_hit_ratio",
        "counter_ratio",
        ("dynamo_frontend_cached_tokens_sum", "dynamo_frontend_input_sequence_tokens_sum"),
    ),
    Source("requests_total", "counter", ("dynamo_frontend_requests_total",)),
    Source("requests_total", "counter", ("dynamo_component_requests_total",)),
)
CATALOGUE: Final[dict[ServerKind, tuple[Source, ...]]] = {
    "dynamo": _DYNAMO,
    "vllm": _VLLM,
    "sglang": _SGLANG,
    "mock": _MOCK,
}
KINDS: Final[tuple[ServerKind, ...]] = ("dynamo", "vllm", "sglang", "mock")
# A few more series per server, kept by name (summed over their labels) in the summary.
EXTRAS: Final[dict[ServerKind, tuple[str, ...]]] = {
    "dynamo": (
        "dynamo_frontend_active_requests",
        "dynamo_frontend_disconnected_clients",
        "dynamo_frontend_worker_active_prefill_tokens",
        "dynamo_frontend_router_queue_pending_requests",
        "dynamo_component_kvstats_active_blocks",
        "dynamo_component_kvstats_total_blocks",
    ),
    "vllm": (
        "vllm:num_preemptions_total",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:num_requests_swapped",
    ),
    "sglang": (
        "sglang:gen_throughput",
        "sglang:num_used_tokens",
        "sglang:prompt_tokens_total",
        "sglang:generation_tokens_total",
    ),
    "mock": (
        "mock_in_flight",
        "mock_worker_up",
        "mock_worker_bound_keys",
        "mock_streams_broken_total",
        "mock_cached_tokens_total",
        "mock_prompt_tokens_total",
    ),
}
_PREFIXES: Final[tuple[tuple[str, ServerKind], ...]] = (
    ("dynamo_", "dynamo"),
    ("vllm:", "vllm"),
    ("sglang:", "sglang"),
    ("mock_", "mock"),
)


@dataclass(slots=True)
class Reading:
    """One scrape, read: levels per worker ("" = a series without a worker label) and the raw
    cumulative counters the books turn into increases over the run."""

    kind: ServerKind
    gauges: dict[Figure, dict[str, float]] = field(default_factory=dict)
    # figure -> (numerator per worker, denominator per worker or None for plain counters)
    counters: dict[Figure, tuple[dict[str, float], dict[str, float] | None]] = field(
        default_factory=dict
    )
    sources: dict[Figure, str] = field(default_factory=dict)  # figure -> series read
    extras: dict[str, float] = field(default_factory=dict)
    families: int = 0  # families on the page
    other_families: int = 0  # families neither read for a figure nor kept as an extra


def read_exposition(exposition: Exposition) -> Reading:
    kind = _detect(exposition)
    reading = Reading(kind=kind, families=len(exposition.families))
    order = [kind, *(k for k in KINDS if k != kind)] if kind != "unknown" else list(KINDS)
    used: set[str] = set()
    for figure in FIGURES:
        # The detected server's sources first: a Dynamo worker page also prints its engine's.
        candidates = (s for server in order for s in CATALOGUE[server] if s.figure == figure)
        source = next((s for s in candidates if _read(reading, s, exposition)), None)
        if source is not None:
            used.update(source.series)
    for server in order:
        for name in EXTRAS[server]:
            samples = exposition.series(name)
            if samples and name not in used:
                reading.extras[name] = _finite_sum(s.value for s in samples)
                used.add(name)
    reading.other_families = sum(
        1
        for family in exposition.families.values()
        if family.samples and not any(s.name in used for s in family.samples[:1])
    )
    return reading


def _detect(exposition: Exposition) -> ServerKind:
    """Dynamo when a Dynamo process printed the page (its workers relay their engine's own
    `vllm:` series beside theirs), else the server whose catalogue matches most series, else
    the one a family's prefix names."""
    if any(name.startswith("dynamo_") for name in exposition.families):
        return "dynamo"
    best: ServerKind = "unknown"
    best_hits = 0
    for kind in KINDS:
        hits = sum(1 for s in CATALOGUE[kind] if exposition.series(s.series[0]))
        if hits > best_hits:
            best, best_hits = kind, hits
    if best_hits:
        return best
    for name in exposition.families:
        for prefix, kind in _PREFIXES:
            if name.startswith(prefix):
                return kind
    return "unknown"


def _read(reading: Reading, source: Source, exposition: Exposition) -> bool:
    """Read `source` into `reading`; False when the server does not print it."""
    first = exposition.series(source.series[0])
    if not first:
        return False
    figure = source.figure
    if source.how == "gauge":
        reading.gauges[figure] = _scaled(_by_worker(first, mean=figure == "kv_usage"), source.scale)
    elif source.how == "ratio":
        second = exposition.series(source.series[1])
        if not second:
            return False
        num, den = _by_worker(first), _by_worker(second)
        ratios: dict[str, float] = {}
        total_den = _finite_sum(den.values())
        for worker, value in num.items():
            d = den.get(worker, total_den if len(den) == 1 else 0.0)
            if d > 0:
                ratios[worker] = source.scale * value / d
        if not ratios:
            return False
        reading.gauges[figure] = ratios
    elif source.how == "counter":
        reading.counters[figure] = (_by_worker(first), None)
    else:
        second = exposition.series(source.series[1])
        if not second:
            return False
        reading.counters[figure] = (_by_worker(first), _by_worker(second))
    reading.sources[figure] = "/".join(source.series)
    return True


def _by_worker(samples: Sequence[Sample], *, mean: bool = False) -> dict[str, float]:
    """Values keyed by worker: series of one worker (other labels: model, status, ...) are
    summed, or averaged for fractions. Labels that never vary do not name workers unless
    nothing else does (one worker stays one worker, not an unlabelled total)."""
    present = [name for name in WORKER_LABELS if any(s.label(name) is not None for s in samples)]
    varying = [n for n in present if len({s.label(n) for s in samples}) > 1]
    keys = varying or present[:1]
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for sample in samples:
        if not math.isfinite(sample.value):
            continue
        worker = "/".join(sample.label(n) or "" for n in keys)
        sums[worker] = sums.get(worker, 0.0) + sample.value
        counts[worker] = counts.get(worker, 0) + 1
    if mean:
        return {w: v / counts[w] for w, v in sums.items()}
    return sums


def _scaled(values: dict[str, float], scale: float) -> dict[str, float]:
    return values if scale == 1.0 else {w: v * scale for w, v in values.items()}


def _finite_sum(values: Iterable[float]) -> float:
    return math.fsum(v for v in values if math.isfinite(v))
