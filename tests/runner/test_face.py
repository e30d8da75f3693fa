"""The engine's public face: the run spec, the one run call, typed snapshots, the import rule."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import runner
from runner import (
    EndpointTarget,
    ListSink,
    RunSpec,
    SpecError,
    parse_spec,
    run,
)
from runner.ending import EndedBy
from runner.limits import MAX_CONCURRENCY

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mock_url() -> Iterator[str]:
    from runner.cluster import ClusterConfig
    from runner.mockserver import MockServerConfig, start_mock_server

    config = MockServerConfig(cluster=ClusterConfig(workers=4, time_scale=0.0))
    with start_mock_server(config, process=True) as server:
        yield server.url


# -------------------------------------------------------------------------------- the spec


def test_a_spec_round_trips_through_json_exactly():
    spec = parse_spec(
        {
            "workload": {"synthetic": {"trees": 4, "seed": 3}},
            "timing": "rate",
            "rate_per_s": 2.5,
            "arrival": "gamma",
            "burstiness": 0.5,
            "duration_s": 60,
            "joins": "strict",
            "policy": "legacy",
            "affinity": "dynamo-nvext",
            "scope": "lineage",
            "slo_ttft_ms": 500,
            "target": {"kind": "simulated", "workers": 16, "router": "kv"},
        }
    )
    again = RunSpec.model_validate_json(spec.model_dump_json())
    assert again == spec
    assert json.loads(again.model_dump_json()) == json.loads(spec.model_dump_json())


def test_the_json_schema_names_every_knob_and_both_targets():
    schema = RunSpec.model_json_schema()
    for knob in ("timing", "concurrency", "policy", "scope", "duration_s", "target"):
        assert knob in schema["properties"]
    assert {"EndpointTarget", "SimulatedTarget"} <= set(schema["$defs"])


def test_bad_values_are_rejected_naming_each_field():
    with pytest.raises(SpecError) as caught:
        parse_spec(
            {
                "concurrency": 0,
                "start_window": [0.9, 0.1],
                "target": {"kind": "endpoint", "url": "ftp://x", "model": "m"},
                "duration_s": 10,
            }
        )
    fields = caught.value.fields
    assert set(fields) == {"concurrency", "start_window", "target.url"}
    assert "\n" not in str(caught.value)


def test_unknown_knobs_and_non_finite_numbers_are_refused():
    with pytest.raises(SpecError, match="concurency"):
        parse_spec({"concurency": 4})
    with pytest.raises(SpecError, match="speedup"):
        parse_spec('{"speedup": Infinity}')


def test_rate_timing_needs_a_rate_and_a_live_run_needs_a_stop():
    with pytest.raises(SpecError, match="rate_per_s"):
        parse_spec({"timing": "rate"})
    with pytest.raises(SpecError, match="needs a stop"):
        parse_spec({"target": {"kind": "endpoint", "url": "http://h:1", "model": "m"}})


def test_the_api_key_is_never_serialized_but_survives_overrides():
    spec = parse_spec(
        {
            "duration_s": 5,
            "target": {"kind": "endpoint", "url": "http://h:1", "model": "m", "api_key": "s3"},
        }
    )
    assert "s3" not in spec.model_dump_json() and "s3" not in repr(spec)
    longer = spec.with_overrides({"duration_s": 20, "target": {"read_timeout_s": 9}})
    assert isinstance(longer.target, EndpointTarget)
    assert longer.target.api_key_value == "s3" and longer.duration_s == 20
    assert longer.target.read_timeout_s == 9


def test_overrides_can_switch_the_target_kind_and_are_validated():
    spec = parse_spec({"duration_s": 5})
    live = spec.with_overrides({"target": {"kind": "endpoint", "url": "http://h:2", "model": "m"}})
    assert isinstance(live.target, EndpointTarget)
    with pytest.raises(SpecError) as caught:
        spec.with_overrides({"duration_s": -1})
    assert list(caught.value.fields) == ["duration_s"]


def test_the_spec_maps_onto_the_engine_configs():
    spec = parse_spec({"policy": "legacy", "affinity": "dynamo-nvext", "scope": "lineage"})
    engine = spec.engine_config()
    assert engine.policy.value == "legacy" and engine.affinity.scope == "lineage"
    assert spec.replay_config().concurrency == 16  # lanes by default
    rate = parse_spec({"timing": "rate", "rate_per_s": 5})
    assert rate.replay_config().concurrency == MAX_CONCURRENCY  # no cap unless asked
    assert rate.with_overrides({"concurrency": 32}).replay_config().concurrency == 32


# ---------------------------------------------------------------------------- the run call


def _small_sim(**knobs: object) -> RunSpec:
    data = {
        "workload": {"synthetic": {"trees": 6}},
        "concurrency": 4,
        "duration_s": 600,
        "target": {"kind": "simulated", "time_scale": 0.1, "snapshot_interval_s": 30},
    }
    data.update(knobs)
    return parse_spec(data)


def test_a_simulated_run_reports_snapshots_records_and_a_summary():
    sink = ListSink()
    result = run(_small_sim(), sink=sink)
    summary = result.summary
    assert result.status == "succeeded" and summary["status"] == "succeeded"
    assert summary["requests"] > 0
    assert len(sink.record_list) == summary["requests"] + summary["warmup_requests"]
    assert len(sink.snapshots) >= 5
    last = sink.snapshots[-1]
    assert last["requests"] == summary["requests"] and last["progress"] == 1.0
    assert last["inference_workers"]["bound_keys"] is not None
    assert [s["t_s"] for s in sink.snapshots] == sorted(s["t_s"] for s in sink.snapshots)


def test_a_stop_set_before_a_simulated_run_cancels_it_keeping_the_partial_result():
    stop = threading.Event()
    stop.set()
    sink = ListSink()
    spec = _small_sim(duration_s=3600)
    # The workload given: a stop met while generating it would end the run before the
    # simulator starts (test_cancel_before_start.py).
    traces = runner.load_workload(spec.workload, seed=spec.seed)
    result = run(spec, traces=traces, sink=sink, stop=stop)
    assert result.status == "cancelled" and result.ended_by.by == EndedBy.CANCELLED
    assert sink.snapshots[-1]["requests"] == result.summary["requests"]


def test_slos_give_goodput_in_the_summary_and_snapshots():
    sink = ListSink()
    result = run(_small_sim(slo_ttft_ms=3_600_000, slo_latency_ms=3_600_000), sink=sink)
    assert result.summary["requests"] > 0
    assert sink.snapshots[-1]["goodput_per_s"] == pytest.approx(
        sink.snapshots[-1]["requests_per_s"]
    )


def test_a_live_and_a_simulated_snapshot_have_the_same_shape(mock_url: str):
    sim, live = ListSink(), ListSink()
    run(_small_sim(duration_s=60), sink=sim)
    live_spec = _small_sim(
        duration_s=1.0,
        speedup=50.0,
        snapshot_interval_s=0.3,
        target={"kind": "endpoint", "url": mock_url, "model": "mock-model"},
    )
    run(live_spec, sink=live)
    assert live.snapshots and sim.snapshots
    for a, b in zip(sim.snapshots[-1].items(), live.snapshots[-1].items(), strict=True):
        assert a[0] == b[0]
        assert type(a[1]) is type(b[1]) or None in (a[1], b[1]), a[0]


def test_a_snapshot_at_64_client_and_64_inference_workers_stays_under_16_kb():
    # A legacy run with rootless lanes bounces sessions over every worker: the migration
    # matrix is as full as it gets.
    spec = parse_spec(
        {
            "workload": {"synthetic": {"trees": 64}},
            "concurrency": 128,
            "client_workers": 64,
            "policy": "legacy",
            "start_window": [0, 1],
            "affinity": "dynamo-nvext",
            "scope": "lineage",
            "duration_s": 900,
            "target": {
                "kind": "simulated",
                "workers": 64,
                "time_scale": 0.05,
                "snapshot_interval_s": 300,
            },
        }
    )
    sink = ListSink()
    run(spec, sink=sink)
    last = sink.snapshots[-1]
    assert len(last["client_workers"]["in_flight"]) == 64
    assert len(last["inference_workers"]["ids"]) == 64
    assert last["migrations_total"] > 0
    sizes = [len(json.dumps(s, separators=(",", ":"))) for s in sink.snapshots]
    assert max(sizes) < 16 * 1024, sizes


# ------------------------------------------------------------------------ the vocabularies


def test_the_exported_vocabularies_are_the_specs_choices_and_the_engines_own_enums():
    from typing import get_args

    from runner.affinity.emitters import AffinityKind
    from runner.routing.router import Policy

    def choices(knob: str) -> tuple[str, ...]:
        return get_args(RunSpec.model_fields[knob].annotation)

    assert runner.POLICIES == choices("policy") == tuple(p.value for p in Policy)
    assert runner.AFFINITIES == choices("affinity") == tuple(k.value for k in AffinityKind)
    assert set(runner.DYNAMO_AFFINITIES) < set(runner.AFFINITIES)
    assert "header" not in runner.DYNAMO_AFFINITIES and "none" not in runner.DYNAMO_AFFINITIES
    assert choices("scope") == runner.SCOPES
    assert choices("timing") == runner.TIMING_MODES
    assert choices("arrival") == runner.ARRIVALS


# ------------------------------------------------------------------------ the import rule


def _runner_imports(path: Path) -> list[str]:
    """Every `runner...` module a file imports, as written."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "runner" or node.module.startswith("runner."):
                found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(a.name for a in node.names if a.name.split(".")[0] == "runner")
    return found


def test_code_outside_the_engine_imports_only_its_public_names():
    outside = [
        path
        for folder in ("aiperf_web", "scripts")
        if (ROOT / folder).is_dir()
        for path in (ROOT / folder).rglob("*.py")
    ]
    outside += [p for p in (ROOT / "manage.py",) if p.exists()]
    offenders = {
        str(path.relative_to(ROOT)): modules
        for path in outside
        if (modules := [m for m in _runner_imports(path) if m != "runner"])
    }
    assert offenders == {}, "import only `from runner import X` outside runner/"


def test_every_public_name_exists_and_neither_face_nor_cli_imports_a_server_stack():
    for name in runner.__all__:
        assert hasattr(runner, name), name
    code = (
        "import sys, runner, runner.cli; runner.cli.build_parser(); "
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('django', 'celery', 'channels', 'redis', 'plotly', 'uvicorn', 'uvloop')]; "
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------------------------ the drain check


def _seed_run(policy: str, trace: Path) -> dict:
    spec = parse_spec(
        {
            "workload": {"traces": [str(trace)]},
            "concurrency": 256,
            "duration_s": 3600,
            "start_window": [0, 1],
            "policy": policy,
            "target": {"kind": "simulated"},
        }
    )
    return dict(run(spec).summary)


def test_the_drain_check_flags_legacy_leaks_and_passes_spawn_pin(seed_trace: Path):
    legacy = _seed_run("legacy", seed_trace)["drain"]
    pinned = _seed_run("spawn-pin", seed_trace)["drain"]
    assert legacy["verdict"] == "leaked" and legacy["orphaned_copies"] > 0
    assert sum(legacy["orphaned_copies_by_worker"]) == legacy["orphaned_copies"]
    assert "orphaned session copies left (worker" in legacy["message"]
    assert pinned["verdict"] == "drained" and pinned["orphaned_copies"] == 0
    # Both runs were cut by the duration: live sessions' copies remain, and are not leaks.
    assert pinned["copies_of_cut_sessions"] == pinned["session_copies"] > 0


def test_a_run_whose_trees_all_drain_leaves_no_copies_and_no_bound_keys():
    spec = parse_spec(
        {
            "workload": {"synthetic": {"trees": 3}},
            "concurrency": 3,
            "max_trees": 3,
            "affinity": "dynamo-nvext",
            "scope": "lineage",
            "target": {"kind": "simulated", "time_scale": 0.01},
        }
    )
    summary = run(spec).summary
    drain = summary["drain"]
    assert summary["trees_completed"] == 3
    assert drain["verdict"] == "drained"
    assert drain["session_copies"] == 0 and drain["affinity_keys_bound"] == 0
    assert drain["affinity_keys_bound_server"] == 0


def test_the_published_json_schema_is_the_specs_own():
    published = json.loads((ROOT / "docs" / "run-spec.schema.json").read_text(encoding="utf-8"))
    assert published == json.loads(json.dumps(RunSpec.model_json_schema())), (
        "regenerate docs/run-spec.schema.json from RunSpec.model_json_schema()"
    )


def test_start_windows_and_caps_only_go_with_the_timings_that_use_them():
    with pytest.raises(SpecError, match="start_window applies to lanes"):
        parse_spec({"timing": "rate", "rate_per_s": 1, "start_window": [0, 1]})
    with pytest.raises(SpecError, match="no concurrency"):
        parse_spec({"timing": "schedule", "concurrency": 4})
    assert parse_spec({"timing": "closed", "start_window": [0, 1]}).timing == "closed"


def test_every_summary_carries_the_stable_keys_the_face_names():
    summary = run(_small_sim(duration_s=60)).summary
    assert set(runner.SUMMARY_KEYS) | set(runner.LATENCY_KEYS) <= set(summary)
    for name in runner.LATENCY_KEYS:
        assert {"p50", "p90", "p99"} <= set(summary[name])  # type: ignore[literal-required]
