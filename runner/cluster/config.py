"""The simulated cluster's configuration and its latency polynomials.

Owns every knob of `runner/cluster` with its documented default, validated once when built
(bad values raise SpecError). No state, no clock: the latency functions map a load to a
duration and nothing else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Literal, get_args

from runner.dynamo import GENERATION_ALIASES, GENERATIONS, Generation, GenerationName
from runner.errors import SpecError

__all__ = [
    "ClusterConfig",
    "DynamoVersion",
    "HeaderAffinityMode",
    "RouterMode",
    "canonical_dynamo_version",
]

RouterMode = Literal["round-robin", "random", "least-loaded", "kv", "kv-approx"]
# The Dynamo generation the frontend behaves as: runner.dynamo.Generation says what each
# speaks (nvext actions, header affinity); a spec names it by value.
DynamoVersion = GenerationName
# --router-session-affinity-mode (#13907): hard dispatches exactly to the bound worker; soft
# passes it as a preference (modelled in cluster.py: followed unless it has no free slot).
HeaderAffinityMode = Literal["hard", "soft"]

_ROUTER_MODES: tuple[str, ...] = get_args(RouterMode)
_HEADER_AFFINITY_MODES: tuple[str, ...] = get_args(HeaderAffinityMode)


def canonical_dynamo_version(value: object) -> object:
    """`value` with a deprecated alias (runner.dynamo.GENERATION_ALIASES) replaced by its
    generation's value; anything else unchanged, for the caller's own validation to judge."""
    if isinstance(value, str) and value in GENERATION_ALIASES:
        return GENERATION_ALIASES[value].value
    return value


# Upper bounds that keep a configuration buildable (one engine object per worker rank, one
# list slot per batch slot) and every modelled duration finite.
_MAX_ENGINES = 4096
_MAX_INT_KNOB = 1 << 40


@dataclass(frozen=True, kw_only=True, slots=True)
class ClusterConfig:
    """How the simulated inference cluster is built and how fast it is.

    Defaults follow Dynamo's mocker (ai-dynamo/dynamo lib/mocker): 64-token blocks, 16384 KV blocks
    and 256 sequences per engine, and its default polynomial timing. An engine is one
    (worker, dp rank); each has its own prefix cache, batch slots and prefill queue.
    """

    workers: int = 8
    dp_ranks: int = 1  # data-parallel ranks per worker
    block_size_tokens: int = 64  # mocker --block-size (vLLM mode)
    capacity_blocks: int = 16384  # mocker --num-gpu-blocks-override, per engine
    max_num_seqs: int = 256  # mocker --max-num-seqs: running requests per engine
    # Dynamo's frontend default is round-robin (its --router-mode).
    router: RouterMode = "round-robin"
    # ApproxKvIndexer: predicted blocks expire after --router-ttl-secs, default 120 s.
    kv_approx_ttl_s: float = 120.0
    # prefill_ms(T) = a·T² + b·T + c, T = uncached prompt tokens (mocker default, §1.7).
    prefill_ms_per_token_sq: float = 4.21e-7
    prefill_ms_per_token: float = 0.01518
    prefill_overhead_ms: float = 16.5
    # decode_ms(p) = max(floor, a·p² + b·p + c), p = active KV fraction (mocker default, §1.7).
    decode_ms_per_usage_sq: float = -25.74
    decode_ms_per_usage: float = 54.01
    decode_base_ms: float = 5.74
    decode_floor_ms: float = 1.0
    # Multiplies every modelled latency (prefill, decode); 0 gives a zero-latency cluster.
    # Protocol timeouts (binding TTLs, sweeps) are in the caller's clock and are not scaled.
    time_scale: float = 1.0
    # Which generation's affinity contract the frontend speaks (a value given as text, an
    # alias included, becomes its Generation).
    dynamo_version: Generation = Generation.BIND
    # Real Dynamo honours session_control only with --router-mode kv (§1.5 case c), which is
    # what False gives (kv and kv-approx only); our experiments use round-robin plus
    # affinity, so the default honours it in every mode.
    honour_session_control: bool = True
    session_sweep_s: float = 30.0  # the sticky-session reaper's period (§1.2)
    # X-Dynamo-Session-ID affinity (--router-session-affinity-ttl-secs, §1.3); None = off,
    # and then the headers change nothing. Only generations with header affinity.
    header_affinity_ttl_s: float | None = None
    header_affinity_mode: HeaderAffinityMode = "hard"  # --router-session-affinity-mode
    # v1.6 subagent grouping (#14521): a request with a parent header binds under the
    # parent's group key, so siblings share a worker while the parent keeps its own.
    header_parent_grouping: bool = True
    # Header affinity limits (§1.3): a longer X-Dynamo-Session-ID gets HTTP 400 (observed on
    # 1.6.1, which takes a longer parent id); a new binding past the entry limit gets HTTP 429
    # "resource exhausted" (assumed: not reproduced on a real Dynamo).
    header_affinity_max_id_bytes: int = 256
    header_affinity_max_sessions: int = 65_536
    seed: int = 0  # the random router's seed
    # Prompt plus output tokens one request may hold; the frontend answers HTTP 400 beyond it,
    # as a server does past its context length. The default only keeps the timing model finite
    # (a 10^309-token request would overflow it); lower it to model a real context window.
    max_request_tokens: int = 1 << 31

    def __post_init__(self) -> None:
        # A value given as text (a spec's, a command line's, a deprecated alias) becomes its
        # Generation.
        try:
            generation = Generation.parse(self.dynamo_version)
        except ValueError:
            raise SpecError(
                f"unknown dynamo_version {self.dynamo_version!r}; "
                f"choose one of {', '.join(GENERATIONS)}"
            ) from None
        object.__setattr__(self, "dynamo_version", generation)
        for name in (
            "workers",
            "dp_ranks",
            "block_size_tokens",
            "capacity_blocks",
            "max_num_seqs",
            "max_request_tokens",
            "header_affinity_max_id_bytes",
            "header_affinity_max_sessions",
        ):
            value = getattr(self, name)
            if value < 1:
                raise SpecError(f"cluster {name} must be at least 1, got {value}")
            if value > _MAX_INT_KNOB:
                raise SpecError(f"cluster {name} must be at most {_MAX_INT_KNOB}, got {value}")
        if self.workers * self.dp_ranks > _MAX_ENGINES:
            raise SpecError(
                f"cluster workers x dp_ranks must be at most {_MAX_ENGINES}, "
                f"got {self.workers * self.dp_ranks}"
            )
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise SpecError(f"cluster {f.name} must be a finite number, got {value}")
        if self.router not in _ROUTER_MODES:
            raise SpecError(
                f"unknown cluster router {self.router!r}; choose one of {', '.join(_ROUTER_MODES)}"
            )
        if self.header_affinity_mode not in _HEADER_AFFINITY_MODES:
            raise SpecError(
                f"unknown header_affinity_mode {self.header_affinity_mode!r}; "
                f"choose one of {', '.join(_HEADER_AFFINITY_MODES)}"
            )
        if self.time_scale < 0:
            raise SpecError(f"time_scale must be 0 or more, got {self.time_scale}")
        for name in ("kv_approx_ttl_s", "session_sweep_s"):
            if getattr(self, name) <= 0:
                raise SpecError(f"cluster {name} must be positive, got {getattr(self, name)}")
        if self.header_affinity_ttl_s is not None and self.header_affinity_ttl_s <= 0:
            raise SpecError(
                f"header_affinity_ttl_s must be positive or None (off), "
                f"got {self.header_affinity_ttl_s}"
            )
        if self.header_affinity_ttl_s is not None and not self.dynamo_version.header_affinity:
            # Real 1.2.x has no --router-session-affinity-ttl-secs: its frontend would not start.
            with_headers = " or ".join(g.value for g in Generation if g.header_affinity)
            raise SpecError(
                f"Dynamo {self.dynamo_version.value} has no header affinity: header_affinity_ttl_s "
                f"needs dynamo_version {with_headers}"
            )

    @property
    def engines(self) -> int:
        return self.workers * self.dp_ranks

    def prefill_ms(self, uncached_tokens: int) -> float:
        """Unscaled prefill time of `uncached_tokens` new tokens (1k → 32 ms, 8k → 165 ms)."""
        t = uncached_tokens
        return (
            self.prefill_ms_per_token_sq * t * t
            + self.prefill_ms_per_token * t
            + (self.prefill_overhead_ms)
        )

    def decode_ms(self, kv_usage: float) -> float:
        """Unscaled decode step time at KV usage fraction `kv_usage` (5.74 ms idle, 34 ms full)."""
        p = kv_usage
        step_ms = self.decode_ms_per_usage_sq * p * p + self.decode_ms_per_usage * p
        return max(self.decode_floor_ms, step_ms + self.decode_base_ms)
