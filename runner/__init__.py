"""aiperf-web's benchmark engine: replay agentic LLM workloads live or in virtual time.

The public face; everything outside `runner/` (the web service, scripts) imports only these
names (a test enforces it):

    RunSpec, parse_spec            one run, validated once (workload, timing, routing, target)
    default_concurrency(timing)    the lanes a spec without `concurrency` runs (None: no cap)
    POLICIES, AFFINITIES, DYNAMO_AFFINITIES, SCOPES, TIMING_MODES, ARRIVALS
                                   the knobs' vocabularies (RunSpec's own choices), for forms
    MAX_DURATION_S                 the longest run a spec accepts (AIPERF_MAX_DURATION_S)
    HEADERS_MAX, HEADER_NAME_CHARS, HEADER_VALUE_CHARS   the bounds of a target's headers
    EndpointTarget, SimulatedTarget, Workload, SyntheticConfig
    run(spec, *, traces, sink, stop, fleet) -> RunResult   either clock, blocking
    run_async(...)                                      the same inside an event loop
    FleetPlan(redis_url, start_hosts)                   client workers as processes (fleet)
    serve_hosts(redis_url, run_key, workers, secret=)   a host process's client workers, blocking
    Sink, ListSink, Snapshot, Summary, RecordDict       what a run reports while it goes
    load_workload, load_trace, inspect_trace, Trace, DEFAULT_MAX_BYTES, FILE_FORMATS
    dump_native(trace) -> str                           a loaded trace as native JSON lines
    check_endpoint(...)                                 the preflight alone ("test connection")
    check_affinity(...) -> AffinityDetection            the Dynamo affinity generation and modes
    Generation, GENERATIONS, NO_SESSION_CONTROL_LABEL   Dynamo's generations and what each speaks
    accepted_affinities(dynamo=, detected=, generation=, header_affinity=)
                                   the affinity modes a server accepts (launches, preflight)
    KeyScope                       what one affinity key covers (RunSpec.key_scope)
    RunnerError > BadInput > (SpecError, TraceError, EndpointError); RunnerError > FleetError
    verify_summary(summary, records) -> VerifyReport    a summary recomputed from its records
    verify_checked(summary, records) -> dict, verify_text(checked, source=) -> str
                                   verify's answer as JSON, and as the lines a person reads
    gaps_from_text(text) -> bytes, gaps_to_text(bytes) -> str
                                   a record's inter-chunk gaps (chunk_gaps_us) packed and back
    PRESETS, apply_preset                               named benchmark settings (agentx)
    SweepSpec, parse_sweep, Planner, Point, PointResult, PointTally, point_result, SweepReport,
    build_report, csv_rows, sweep_group_key, SWEEP_FIGURES, SWEEP_PERCENTILES
                                   sweeps (runner.sweep), driven point by point by the service
    wait_until_drained(...)        wait for a server to finish its previous run's requests
    Spread, spread_of, overlap     a figure's spread over repeats, and whether two overlap

Nothing here imports a web framework, and the HTTP server stack (the mock server) loads only
when its command runs.
"""

from typing import TYPE_CHECKING, Any

from runner.affinity.emitters import KeyScope
from runner.affinity.placement import PLACEMENT_PCTS, PlacementFigures, placement_pcts
from runner.client import EndpointError, EndpointInfo
from runner.dynamo import GENERATIONS, NO_SESSION_CONTROL_LABEL, Generation
from runner.ending import EndedBy, Ending, RunStatus
from runner.errors import BadInput, RunnerError, SpecError, TraceError
from runner.fleet import FleetError, FleetPlan
from runner.limits import MAX_DURATION_S
from runner.metrics.gaps import gaps_from_text, gaps_to_text
from runner.metrics.records import ERROR_CATEGORIES, ErrorCategory
from runner.metrics.verify import VerifyReport, verify_checked, verify_text
from runner.metrics.verify import verify as verify_summary
from runner.output import (
    LATENCY_KEYS,
    SUMMARY_KEYS,
    ClientWorkerArrays,
    InferenceWorkerArrays,
    ListSink,
    RecordDict,
    Sink,
    Snapshot,
    Summary,
)
from runner.preflight import check_affinity, check_endpoint
from runner.presets import PRESETS, apply_preset
from runner.run import RunResult, load_workload, run, run_async
from runner.spec import (
    AFFINITIES,
    ARRIVALS,
    DYNAMO_AFFINITIES,
    HEADER_NAME_CHARS,
    HEADER_VALUE_CHARS,
    HEADERS_MAX,
    POLICIES,
    SCOPES,
    TIMING_MODES,
    EndpointTarget,
    RunSpec,
    SimulatedTarget,
    Workload,
    accepted_affinities,
    default_concurrency,
    parse_spec,
)
from runner.sweep import FIGURES as SWEEP_FIGURES
from runner.sweep import PERCENTILES as SWEEP_PERCENTILES
from runner.sweep import (
    Planner,
    Point,
    PointResult,
    PointTally,
    Spread,
    SweepReport,
    SweepSpec,
    build_report,
    csv_rows,
    overlap,
    parse_sweep,
    point_result,
    spread_of,
    wait_until_drained,
)
from runner.sweep import group_key as sweep_group_key
from runner.trace import (
    DEFAULT_MAX_BYTES,
    FILE_FORMATS,
    SyntheticConfig,
    Trace,
    dump_native,
    inspect_trace,
    load_trace,
)
from runner.wallclock.probe import AffinityDetection

if TYPE_CHECKING:
    from runner.fleet.host import serve_hosts

__all__ = [
    "AFFINITIES",
    "ARRIVALS",
    "DEFAULT_MAX_BYTES",
    "DYNAMO_AFFINITIES",
    "ERROR_CATEGORIES",
    "FILE_FORMATS",
    "GENERATIONS",
    "HEADERS_MAX",
    "HEADER_NAME_CHARS",
    "HEADER_VALUE_CHARS",
    "LATENCY_KEYS",
    "MAX_DURATION_S",
    "NO_SESSION_CONTROL_LABEL",
    "PLACEMENT_PCTS",
    "POLICIES",
    "PRESETS",
    "SCOPES",
    "SUMMARY_KEYS",
    "SWEEP_FIGURES",
    "SWEEP_PERCENTILES",
    "TIMING_MODES",
    "AffinityDetection",
    "BadInput",
    "ClientWorkerArrays",
    "EndedBy",
    "Ending",
    "EndpointError",
    "EndpointInfo",
    "EndpointTarget",
    "ErrorCategory",
    "FleetError",
    "FleetPlan",
    "Generation",
    "InferenceWorkerArrays",
    "KeyScope",
    "ListSink",
    "PlacementFigures",
    "Planner",
    "Point",
    "PointResult",
    "PointTally",
    "RecordDict",
    "RunResult",
    "RunSpec",
    "RunStatus",
    "RunnerError",
    "SimulatedTarget",
    "Sink",
    "Snapshot",
    "SpecError",
    "Spread",
    "Summary",
    "SweepReport",
    "SweepSpec",
    "SyntheticConfig",
    "Trace",
    "TraceError",
    "VerifyReport",
    "Workload",
    "accepted_affinities",
    "apply_preset",
    "build_report",
    "check_affinity",
    "check_endpoint",
    "csv_rows",
    "default_concurrency",
    "dump_native",
    "gaps_from_text",
    "gaps_to_text",
    "inspect_trace",
    "load_trace",
    "load_workload",
    "overlap",
    "parse_spec",
    "parse_sweep",
    "placement_pcts",
    "point_result",
    "run",
    "run_async",
    "serve_hosts",
    "spread_of",
    "sweep_group_key",
    "verify_checked",
    "verify_summary",
    "verify_text",
    "wait_until_drained",
]


def __getattr__(name: str) -> Any:
    # serve_hosts brings the Redis client: loaded when a host process asks for it, never with
    # the face (a test holds the face free of server stacks).
    if name == "serve_hosts":
        from runner.fleet.host import serve_hosts

        return serve_hosts
    raise AttributeError(f"module 'runner' has no attribute {name!r}")
