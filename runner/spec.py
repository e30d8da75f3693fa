"""The run specification: everything one run needs, validated once, frozen, JSON round-trip.

The CLI builds it from its arguments, the web service from its forms, API bodies and stored
scenarios; below this point nobody reads raw dicts or argparse namespaces. It owns validation
and the mapping onto the engine's internal config objects; it never runs anything.

The endpoint's API key is a secret: it is held as `SecretStr` and left out of every
serialization (JSON, `model_dump`), so a stored or exported spec never carries it. Callers
that persist specs keep the key elsewhere (the service encrypts it) and attach it at run time
with `with_api_key`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, get_args
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from runner.affinity.emitters import AffinityConfig, AffinityKind, HeaderSource, KeyScope, Scope
from runner.client import Timeouts
from runner.cluster import ClusterConfig
from runner.cluster.config import (
    DynamoVersion,
    HeaderAffinityMode,
    RouterMode,
    canonical_dynamo_version,
)
from runner.dynamo import GENERATION_ALIASES, GENERATIONS, Generation, NvextActions
from runner.errors import SpecError
from runner.limits import (
    MAX_CLIENT_WORKERS,
    MAX_CONCURRENCY,
    MAX_DURATION_S,
    MAX_RATE_PER_S,
    MAX_REQUESTS,
)
from runner.replay.engine import EngineConfig
from runner.replay.scheduler import (
    ARRIVALS,
    MIN_BURSTINESS,
    TIMINGS,
    Arrival,
    Joins,
    ReplayConfig,
    Timing,
)
from runner.routing.router import Policy
from runner.servermetrics import metrics_url_for
from runner.trace import DEFAULT_MAX_BYTES, SyntheticConfig

__all__ = [
    "AFFINITIES",
    "ARRIVALS",
    "DYNAMO_AFFINITIES",
    "HEADERS_MAX",
    "HEADER_NAME_CHARS",
    "HEADER_VALUE_CHARS",
    "POLICIES",
    "SCOPES",
    "TIMING_MODES",
    "URL_CHARS",
    "EndpointTarget",
    "RunSpec",
    "SimulatedTarget",
    "Target",
    "Workload",
    "accepted_affinities",
    "parse_spec",
]

AffinityActions = NvextActions
CloseOn = Literal["tree-final", "root-final"]
PolicyName = Literal["spawn-pin", "legacy", "least-loaded"]
# The affinity modes only NVIDIA Dynamo reads (nvext.session_control, the X-Dynamo-* headers),
# in the order a scope comparison prefers them; `scope` decides their key. Every server can key
# on a plain `header`.
DynamoAffinityName = Literal["dynamo-nvext", "dynamo-headers"]
AffinityName = Literal["none", DynamoAffinityName, "header"]

# The CLI and the web service derive their choices from these (exported by `runner`), so a
# value is never listed twice; tests/runner/test_face.py holds the enums to them.
TIMING_MODES: tuple[str, ...] = TIMINGS
JOINS: tuple[str, ...] = get_args(Joins)
POLICIES: tuple[str, ...] = get_args(PolicyName)
AFFINITIES: tuple[str, ...] = get_args(AffinityName)
DYNAMO_AFFINITIES: tuple[str, ...] = get_args(DynamoAffinityName)
SCOPES: tuple[str, ...] = get_args(Scope)
HEADER_SOURCES: tuple[str, ...] = get_args(HeaderSource)
AFFINITY_ACTIONS: tuple[str, ...] = get_args(AffinityActions)
CLOSE_ON: tuple[str, ...] = get_args(CloseOn)
ROUTER_MODES: tuple[str, ...] = get_args(RouterMode)
DYNAMO_VERSIONS: tuple[str, ...] = GENERATIONS

# Every float in a spec is finite: an Infinity duration or NaN rate is a typo, not a wish.
_MODEL = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

PositiveSeconds = Annotated[float, Field(gt=0)]
DEFAULT_LANES = 16


def accepted_affinities(
    *,
    dynamo: bool,
    detected: bool = False,
    generation: Generation | None = None,
    header_affinity: bool | None = None,
) -> tuple[str, ...]:
    """The affinity modes a server accepts, in AFFINITIES' order: the one answer the launch
    form, the launch service, an endpoint's page and a live run's preflight all give.

    Every server keys on a plain `header` (and `none` sends nothing); only Dynamo reads the
    DYNAMO_AFFINITIES. Until a detection ran (`detected` False) a Dynamo server is offered all
    of them. After one (`check_affinity`: `generation` None when the server has no
    session_control), dynamo-nvext needs a generation with session_control, and
    dynamo-headers a generation with header affinity (or none found) where the probe did not
    find it off (`header_affinity` None: it could not be told, so the run may try).
    """
    if not dynamo:
        return tuple(mode for mode in AFFINITIES if mode not in DYNAMO_AFFINITIES)
    if not detected:
        return AFFINITIES
    refused: set[str] = set()
    if generation is None or not generation.session_control:
        refused.add(AffinityKind.DYNAMO_NVEXT.value)
    if header_affinity is False or (generation is not None and not generation.header_affinity):
        refused.add(AffinityKind.DYNAMO_HEADERS.value)
    return tuple(mode for mode in AFFINITIES if mode not in refused)


def default_concurrency(timing: str) -> int | None:
    """What a spec without `concurrency` runs at: DEFAULT_LANES lanes when its timing replays
    trees on lanes (lanes, closed); None (no cap) for the other timings."""
    return DEFAULT_LANES if timing in ("lanes", "closed") else None


MAX_TRACE_BYTES = 4 * 1024**3  # a ceiling on the ceiling: loaders hold a file in memory
# Every numeric knob has a ceiling; those an operator may raise come from runner.limits (one
# environment variable each, named in the field's description). Rate and schedule timings
# start trees when the workload says so; without a cap asked for, MAX_CONCURRENCY only
# guards against a runaway.
_RAISE = "(raise with the environment variable {})"
Count = Annotated[
    int,
    Field(ge=1, le=MAX_REQUESTS, description=_RAISE.format("AIPERF_MAX_REQUESTS")),
]
Timeout = Annotated[float, Field(gt=0, le=3_600)]
SloMs = Annotated[float, Field(gt=0, le=3_600_000)]  # an hour: beyond any request's life
MIN_TIME_SCALE = 0.001  # other than 0 (instant): the cluster's latencies at 1/1000
# Text a spec carries to the server on every request, bounded like everything else: a stored
# spec is copied into each run and each snapshot's reader. URLs far past any real one (browsers
# stop near 2 KB); headers as many servers take them (nginx's default buffers hold 8 KB a line).
URL_CHARS = 2048
TRACE_PATH_CHARS = 4096  # PATH_MAX on Linux
HEADERS_MAX = 64
HEADER_NAME_CHARS = 256
HEADER_VALUE_CHARS = 8192
HeaderName = Annotated[str, Field(max_length=HEADER_NAME_CHARS)]
HeaderValue = Annotated[str, Field(max_length=HEADER_VALUE_CHARS)]


class Workload(BaseModel):
    """What to replay: trace files (format detected from the content), the synthetic
    generator, or both. Neither given means the synthetic generator with its defaults."""

    model_config = _MODEL

    traces: tuple[Annotated[str, Field(max_length=TRACE_PATH_CHARS)], ...] = Field(
        default=(), description="trace file paths to replay"
    )
    synthetic: SyntheticConfig | None = Field(
        default=None, description="synthetic agentic generator parameters"
    )
    max_trace_bytes: int = Field(
        default=DEFAULT_MAX_BYTES,
        ge=1,
        le=MAX_TRACE_BYTES,
        description="refuse trace files larger than this (loading time grows with size)",
    )

    @property
    def uses_synthetic(self) -> bool:
        return self.synthetic is not None or not self.traces


class EndpointTarget(BaseModel):
    """A live OpenAI-compatible endpoint, replayed over HTTP on the wall clock."""

    model_config = _MODEL

    kind: Literal["endpoint"] = "endpoint"
    url: str = Field(
        max_length=URL_CHARS, description="base URL, e.g. http://127.0.0.1:8100 (or .../v1)"
    )
    model: str = Field(min_length=1, max_length=512, description="model name to request")
    # Never serialized: see the module docstring.
    api_key: SecretStr | None = Field(default=None, exclude=True, repr=False)
    headers: dict[HeaderName, HeaderValue] = Field(
        default_factory=dict,
        max_length=HEADERS_MAX,
        description=f"extra headers on every request (at most {HEADERS_MAX})",
    )
    connect_timeout_s: Timeout = Field(default=10.0, description="at most an hour")
    read_timeout_s: Timeout = Field(
        default=300.0, description="first-byte and stall timeout per request (at most an hour)"
    )
    want_worker_id: bool = Field(
        default=True, description="ask for nvext.worker_id (Dynamo; the built-in mock honours it)"
    )
    failure_threshold: int = Field(
        default=50,
        ge=0,
        le=1_000_000,
        description="stop after this many consecutive failures (0: never)",
    )
    stop_error_share: float | None = Field(
        default=None,
        gt=0,
        le=1,
        description="stop when more than this share of the requests that ran their course "
        "failed, once 100 have (InferenceX's AgentX: 0.10); None = never",
    )
    metrics_url: str | None = Field(
        default=None,
        max_length=URL_CHARS,
        description="the server's Prometheus page, scraped during the run: None = /metrics "
        "on the endpoint's origin, a URL, or off",
    )
    metrics_interval_s: float = Field(
        default=2.0, gt=0, le=3600, description="seconds between scrapes of metrics_url"
    )

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url!r} is not an http(s) URL with a host")
        return url.rstrip("/")

    @field_validator("metrics_url")
    @classmethod
    def _metrics_url(cls, url: str | None) -> str | None:
        if url is None or url.strip().lower() == "off":
            return None if url is None else "off"
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url!r} is not an http(s) URL with a host, nor off")
        return url

    @field_validator("headers")
    @classmethod
    def _header_names(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            if not name or any(c in name for c in " :\r\n\t") or any(c in value for c in "\r\n"):
                raise ValueError(f"header {name!r} is not a valid NAME: VALUE pair")
        return headers

    @property
    def timeouts(self) -> Timeouts:
        return Timeouts(connect_s=self.connect_timeout_s, read_s=self.read_timeout_s)

    @property
    def api_key_value(self) -> str | None:
        return None if self.api_key is None else self.api_key.get_secret_value()

    @property
    def metrics_scrape_url(self) -> str | None:
        """The Prometheus page scraped during a run; None when metrics_url is off."""
        return metrics_url_for(self.url, self.metrics_url)


class SimulatedTarget(BaseModel):
    """The simulated inference cluster, replayed in virtual time (an hour in seconds)."""

    model_config = _MODEL

    kind: Literal["simulated"] = "simulated"
    workers: int = Field(default=8, ge=1, le=4096, description="inference workers")
    router: RouterMode = Field(default="round-robin", description="frontend router mode")
    dp_ranks: int = Field(default=1, ge=1, le=64, description="data-parallel ranks per worker")
    time_scale: float = Field(
        default=1.0,
        ge=0,
        le=1000,
        description="multiplies every modelled latency; 0 = instant, else at least 0.001",
    )
    block_size: int = Field(default=64, ge=1, le=65536, description="prefix-cache block, tokens")
    cache_blocks: int = Field(
        default=16384, ge=1, le=100_000_000, description="prefix-cache blocks per worker rank"
    )
    max_num_seqs: int = Field(default=256, ge=1, le=65536, description="batch slots per rank")
    dynamo_version: DynamoVersion = Field(
        default=Generation.BIND.value,
        description="Dynamo generation: "
        + ", ".join(f"{g.value}: {g.label}" for g in Generation)
        + "; "
        + ", ".join(
            f"{old} is a deprecated name for {g.value}" for old, g in GENERATION_ALIASES.items()
        ),
    )
    session_control_kv_only: bool = Field(
        default=False, description="honour session_control only with the kv routers"
    )
    header_affinity_ttl_s: PositiveSeconds | None = Field(
        default=None,
        le=86_400,
        description="X-Dynamo-Session-ID affinity idle TTL; None = off. Needs a dynamo_version "
        "with header affinity ("
        + ", ".join(g.value for g in Generation if g.header_affinity)
        + "): with "
        + ", ".join(g.value for g in Generation if not g.header_affinity)
        + " a spec that sets it is refused",
    )
    header_affinity_mode: HeaderAffinityMode = Field(
        default="hard",
        description="header affinity: hard sends to the bound worker; soft prefers it (our "
        "model: unless it has no free batch slot)",
    )
    # Virtual time runs hundreds of times faster than the wall: a snapshot per simulated
    # second would be thousands per run, so simulated runs report on their own interval.
    snapshot_interval_s: float = Field(
        default=10.0, ge=0.1, le=86_400, description="simulated seconds between snapshots"
    )

    @field_validator("dynamo_version", mode="before")
    @classmethod
    def _version_alias(cls, value: object) -> object:
        return canonical_dynamo_version(value)  # stored specs may still say "1.3"

    @field_validator("time_scale")
    @classmethod
    def _time_scale(cls, scale: float) -> float:
        # 1e-300 is not "instant" but would make every latency vanish below the clock's
        # resolution all the same, without the stop rules that 0 gets.
        if 0 < scale < MIN_TIME_SCALE:
            raise ValueError(f"must be 0 (instant) or at least {MIN_TIME_SCALE}")
        return scale

    @model_validator(mode="after")
    def _header_affinity_exists(self) -> SimulatedTarget:
        generation = Generation(self.dynamo_version)
        if self.header_affinity_ttl_s is not None and not generation.header_affinity:
            with_headers = " or ".join(g.value for g in Generation if g.header_affinity)
            raise ValueError(
                f"Dynamo {generation.value} has no header affinity: header_affinity_ttl_s "
                f"needs dynamo_version {with_headers}"
            )
        return self

    def cluster_config(self, *, seed: int) -> ClusterConfig:
        return ClusterConfig(
            workers=self.workers,
            dp_ranks=self.dp_ranks,
            router=self.router,
            time_scale=self.time_scale,
            block_size_tokens=self.block_size,
            capacity_blocks=self.cache_blocks,
            max_num_seqs=self.max_num_seqs,
            dynamo_version=Generation(self.dynamo_version),
            honour_session_control=not self.session_control_kv_only,
            header_affinity_ttl_s=self.header_affinity_ttl_s,
            header_affinity_mode=self.header_affinity_mode,
            seed=seed,
        )


Target = Annotated[EndpointTarget | SimulatedTarget, Field(discriminator="kind")]


class RunSpec(BaseModel):
    """One run: workload, timing, stop conditions, routing, affinity, SLOs and target.

    Knobs are flat so that overrides (`{"duration_s": 20}`) name them directly.
    """

    model_config = _MODEL

    workload: Workload = Field(default_factory=Workload)

    # -- timing (docs/product.md §4.2)
    timing: Timing = Field(
        default="lanes",
        description="lanes: N lanes each replaying one tree; rate: trees arrive at rate_per_s; "
        "schedule: trees start at their recorded timestamps; closed: each lane sends the next "
        "turn when the previous returns",
    )
    concurrency: int | None = Field(
        default=None,
        ge=1,
        le=MAX_CONCURRENCY,
        description="lanes (default 16), or with timing rate a cap on active trees (default "
        "none); schedule replays every tree at its timestamp and takes no cap "
        + _RAISE.format("AIPERF_MAX_CONCURRENCY"),
    )
    rate_per_s: PositiveSeconds | None = Field(
        default=None,
        le=MAX_RATE_PER_S,
        description="tree arrivals per second (timing=rate) "
        + _RAISE.format("AIPERF_MAX_RATE_PER_S"),
    )
    arrival: Arrival = Field(default="poisson", description="inter-arrival distribution (rate)")
    burstiness: float = Field(
        default=1.0,
        ge=MIN_BURSTINESS,
        le=1000,
        description="gamma shape: < 1 burstier, 1 poisson-like (at least 0.01: below, the "
        "draws overflow)",
    )
    speedup: float = Field(
        default=1.0, ge=0.001, le=1e6, description="divides every recorded delay"
    )
    start_window: tuple[float, float] = Field(
        default=(0.0, 0.0),
        description="fractions of a tree's span where a lane's first tree starts (t*)",
    )
    joins: Joins = Field(
        default="recorded", description="recorded: parents keep their clock; strict: they wait"
    )
    warmup_s: float = Field(
        default=0.0,
        ge=0,
        le=MAX_DURATION_S,
        description="requests issued before are unmeasured (at most the longest duration)",
    )
    warmup_per_lane: int = Field(
        default=0,
        ge=0,
        le=1_000_000,
        description="each lane's first this many requests are unmeasured (lanes' caches warm)",
    )
    max_idle_s: float | None = Field(
        default=None,
        ge=0,
        le=MAX_DURATION_S,
        description="cap on a recorded pause between turns, in trace seconds before speedup "
        "(idle users and long tool calls replayed shorter); None = as recorded",
    )
    prime: bool = Field(
        default=False, description="send each live stream's last turn before t* first (unmeasured)"
    )

    # -- stop conditions
    duration_s: PositiveSeconds | None = Field(
        default=None,
        le=MAX_DURATION_S,
        description="stop issuing after this run time (s) "
        + _RAISE.format("AIPERF_MAX_DURATION_S"),
    )
    max_requests: Count | None = Field(
        default=None,
        description="stop after this many requests " + _RAISE.format("AIPERF_MAX_REQUESTS"),
    )
    max_trees: Count | None = Field(
        default=None,
        description="start at most this many trees " + _RAISE.format("AIPERF_MAX_REQUESTS"),
    )

    # -- client-side routing (§4.4)
    policy: PolicyName = Field(default="spawn-pin", description="sticky routing policy")
    client_workers: int = Field(
        default=8,
        ge=1,
        le=MAX_CLIENT_WORKERS,
        description="client workers, each caching its sessions "
        + _RAISE.format("AIPERF_MAX_CLIENT_WORKERS"),
    )
    client_worker_processes: bool = Field(
        default=False,
        description="live runs: each client worker in a process of its own (its own "
        "connections, session copies and memory), fed over Redis; routing stays in one place",
    )
    client_workers_per_host: int = Field(
        default=1,
        ge=1,
        le=MAX_CLIENT_WORKERS,
        description="with client_worker_processes: client workers one host process serves "
        "together, each still with its own connections and session copies (their RSS and CPU "
        "are the process's); the run needs ceil(client_workers / this) host processes",
    )

    # -- server-side affinity (§4.5)
    affinity: AffinityName = Field(default="none", description="what requests carry")
    scope: Scope = Field(
        default="conversation",
        description="dynamo-nvext / dynamo-headers key: own id, or the tree root's id for the "
        "whole agent tree (closed only by its tree-final request)",
    )
    affinity_timeout_s: int = Field(default=300, ge=1, le=86_400, description="bind timeout")
    affinity_actions: AffinityActions = Field(
        default="bind",
        description="dynamo-nvext actions: bind (development builds) or open (Dynamo 1.2.x); "
        "releases from 1.3 on have no session_control (use dynamo-headers)",
    )
    close_on: CloseOn = Field(
        default="tree-final", description="lineage close discipline; root-final shows the hazard"
    )
    header_name: str = Field(
        default="X-Session-ID", max_length=256, description="header for affinity=header"
    )
    header_source: HeaderSource = Field(default="own", description="id affinity=header carries")
    parent_header: bool = Field(
        default=False,
        description="dynamo-headers with scope conversation: also send "
        "X-Dynamo-Parent-Session-ID (Dynamo 1.6 then groups siblings apart from their parent)",
    )

    # -- SLOs for goodput (a request is good when it meets every one set)
    slo_ttft_ms: SloMs | None = None
    slo_itl_ms: SloMs | None = None
    slo_latency_ms: SloMs | None = None

    seed: int = Field(default=0, ge=0, le=2**63 - 1, description="every random choice")
    isolate_trees: bool = Field(
        default=True,
        description="a marker per replayed tree instance: two lanes never share prefix cache",
    )
    length_scale: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="multiplies every prompt and output length of the workload, its hash-id "
        "blocks included, so shared prefixes stay shared (rounded down to whole tokens per "
        "block): a trace recorded on a long-context model replayed on a small one",
    )
    fit_context: bool = Field(
        default=False,
        description="live runs: shrink lengths further, when needed, until the longest request "
        "fits the endpoint's max_model_len (read from /v1/models, the server's tokens per word "
        "measured with two test prompts); refused when the endpoint does not say it or nothing "
        "fits",
    )
    snapshot_interval_s: float = Field(
        default=1.0, ge=0.1, le=3600, description="run time between live snapshots"
    )

    target: Target = Field(default_factory=SimulatedTarget)

    @field_validator("start_window")
    @classmethod
    def _window(cls, window: tuple[float, float]) -> tuple[float, float]:
        lo, hi = window
        if not 0.0 <= lo <= hi <= 1.0:
            raise ValueError(f"{lo}:{hi} is not LO:HI with 0 <= LO <= HI <= 1")
        return window

    @field_validator("client_workers_per_host")
    @classmethod
    def _per_host(cls, per_host: int, info: ValidationInfo) -> int:
        # Named by the field (the launch form shows it there): client_worker_processes is
        # declared before it, so already validated.
        if per_host > 1 and not info.data.get("client_worker_processes"):
            raise ValueError(
                f"{per_host} per host needs client_worker_processes (without it, every client "
                "worker shares the run's one process)"
            )
        return per_host

    @model_validator(mode="after")
    def _consistent(self) -> RunSpec:
        if self.timing == "rate" and self.rate_per_s is None:
            raise ValueError("timing 'rate' needs rate_per_s (tree arrivals per second)")
        if self.timing in ("rate", "schedule") and self.start_window != (0.0, 0.0):
            raise ValueError(
                f"timing {self.timing!r} starts every tree from its beginning: "
                "start_window applies to lanes and closed timing only"
            )
        if self.timing == "schedule" and self.concurrency is not None:
            raise ValueError("timing 'schedule' starts trees at their timestamps: no concurrency")
        if self.target.kind == "endpoint" and not (
            self.duration_s or self.max_requests or self.max_trees
        ):
            raise ValueError("a live run needs a stop: duration_s, max_requests or max_trees")
        if (
            isinstance(self.target, SimulatedTarget)
            and self.target.time_scale == 0
            and self.timing == "closed"
            and not (self.max_requests or self.max_trees)
        ):
            raise ValueError(
                "closed timing on an instant cluster (time_scale 0) never moves the simulated "
                "clock: give max_requests or max_trees, or a time_scale of at least "
                f"{MIN_TIME_SCALE}"
            )
        if self.fit_context and isinstance(self.target, SimulatedTarget):
            raise ValueError(
                "fit_context reads a live endpoint's max_model_len: a simulated run has none "
                "(give length_scale as a factor instead)"
            )
        if self.client_worker_processes and isinstance(self.target, SimulatedTarget):
            raise ValueError(
                "client_worker_processes applies to live runs (an endpoint target): a "
                "simulated run has no processes to spread"
            )
        if self.affinity == "header":
            AffinityConfig(kind=AffinityKind.HEADER, header_name=self.header_name)
        if self.parent_header and (
            self.affinity != "dynamo-headers" or self.scope != "conversation"
        ):
            raise ValueError(
                "parent_header applies to affinity dynamo-headers with scope conversation: "
                "under lineage Dynamo 1.6 would key children on their parent's sibling group "
                "and split the tree"
            )
        return self

    # -- derived engine configs ------------------------------------------------------------

    @property
    def slo_ms(self) -> dict[str, float]:
        slos = {
            "ttft_ms": self.slo_ttft_ms,
            "itl_ms": self.slo_itl_ms,
            "latency_ms": self.slo_latency_ms,
        }
        return {name: value for name, value in slos.items() if value is not None}

    @property
    def key_scope(self) -> KeyScope:
        """What one affinity key covers: lineage (a whole agent tree), conversation, or none
        (AffinityConfig.key_scope, the emitter's own answer)."""
        return self.engine_config().affinity.key_scope

    @property
    def effective_concurrency(self) -> int:
        if self.concurrency is not None:
            return self.concurrency
        return default_concurrency(self.timing) or MAX_CONCURRENCY

    def replay_config(self) -> ReplayConfig:
        return ReplayConfig(
            concurrency=self.effective_concurrency,
            duration_s=self.duration_s,
            max_requests=self.max_requests,
            max_trees=self.max_trees,
            start_window=self.start_window,
            joins=self.joins,
            speedup=self.speedup,
            warmup_s=self.warmup_s,
            warmup_per_lane=self.warmup_per_lane,
            max_idle_s=self.max_idle_s,
            prime=self.prime,
            seed=self.seed,
            timing=self.timing,
            rate_per_s=self.rate_per_s,
            arrival=self.arrival,
            burstiness=self.burstiness,
        )

    def engine_config(self) -> EngineConfig:
        return EngineConfig(
            policy=Policy(self.policy),
            client_workers=self.client_workers,
            affinity=AffinityConfig(
                kind=AffinityKind(self.affinity),
                scope=self.scope,
                timeout_s=self.affinity_timeout_s,
                actions=self.affinity_actions,
                close_on=self.close_on,
                header_name=self.header_name,
                header_source=self.header_source,
                parent_header=self.parent_header,
            ),
        )

    # -- changing a spec ---------------------------------------------------------------------

    def with_overrides(self, overrides: Mapping[str, Any]) -> RunSpec:
        """A new validated spec: `overrides` replace top-level knobs; a dict given for
        `workload` or `target` updates that object's fields (switching `target.kind` replaces
        it). Raises SpecError naming each bad field."""
        data = self.model_dump(mode="json")
        for name, value in overrides.items():
            current = data.get(name)
            if isinstance(value, Mapping) and isinstance(current, dict):
                if value.get("kind", current.get("kind")) != current.get("kind"):
                    data[name] = dict(value)
                else:
                    data[name] = {**current, **value}
            else:
                data[name] = value
        spec = parse_spec(data)
        old, new = self.target, spec.target
        if (
            isinstance(old, EndpointTarget)
            and isinstance(new, EndpointTarget)
            and new.api_key is None
            and new.url == old.url
        ):
            spec = spec.with_api_key(old.api_key_value)
        return spec

    def with_api_key(self, api_key: str | None) -> RunSpec:
        """The same spec with the endpoint's secret attached (a no-op for simulated runs)."""
        if not isinstance(self.target, EndpointTarget):
            return self
        secret = None if api_key is None else SecretStr(api_key)
        return self.model_copy(
            update={"target": self.target.model_copy(update={"api_key": secret})}
        )


def parse_spec(data: Mapping[str, Any] | str | bytes) -> RunSpec:
    """Validate a dict or JSON text into a RunSpec; SpecError with every problem on one line,
    each prefixed by its field (`duration_s: must be greater than 0`). `SpecError.fields`
    maps field paths to messages for forms that show them next to the field."""
    try:
        if isinstance(data, str | bytes):
            return RunSpec.model_validate_json(data)
        return RunSpec.model_validate(dict(data))
    except ValidationError as exc:
        fields: dict[str, str] = {}
        for error in exc.errors(include_url=False):
            loc = ".".join(str(part) for part in error["loc"] if not _is_union_tag(part))
            fields.setdefault(loc or "spec", _clean_message(error["msg"]))
        raise SpecError(
            "invalid run spec: " + "; ".join(f"{name}: {msg}" for name, msg in fields.items()),
            fields=fields,
        ) from None


def _is_union_tag(part: int | str) -> bool:
    # Discriminated unions add the tag to the location ("target.endpoint.url"): drop it.
    return part in ("endpoint", "simulated")


def _clean_message(message: str) -> str:
    message = message.removeprefix("Value error, ")
    # One line whatever the input held; long echoed values shortened.
    message = " ".join(message.split())
    return message if len(message) <= 200 else message[:197] + "..."
