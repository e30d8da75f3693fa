"""Saturation named (issue 27 item 5): the client's CPU or event loop past its thresholds, or a
simulated cluster whose queue outgrew the schedule, is named on the run page's report; nothing
is named for a run within its means."""

from __future__ import annotations

from typing import Any

from aiperf_web.reports.cards.saturation import LoadPoint, load_point, saturation_assess
from aiperf_web.runs.models import RunSample
from tests.web.conftest import World
from tests.web.test_reports import _finished, _summary


def _live(cpus: list[float], lags: list[float]) -> list[LoadPoint]:
    return [
        LoadPoint(t_s=float(i), wall_s=float(i), client={"cpu_pct": c, "loop_lag_ms": g})
        for i, (c, g) in enumerate(zip(cpus, lags, strict=True))
    ]


def test_a_client_past_85_percent_cpu_limits_the_run() -> None:
    got = saturation_assess(_live([40, 92, 95, 97, 60], [5] * 5), simulated=False, duration_s=5)
    assert got["limits"] == ["client"] and got["cpu_peak_pct"] == 97
    (warning,) = got["warnings"]
    assert warning.startswith("The client, not the server, limits this run")
    assert "97 % of a core" in warning and "aiperf warns past 85 %" in warning


def test_a_late_event_loop_limits_the_run_and_one_busy_second_does_not() -> None:
    late = saturation_assess(_live([50] * 4, [10, 150, 220, 180]), simulated=False, duration_s=4)
    assert late["limits"] == ["client"] and "woke up to 220 ms late" in late["warnings"][0]
    once = saturation_assess(_live([99, 20, 20, 20], [300, 5, 5, 5]), simulated=False, duration_s=4)
    assert once["limits"] == [] and once["warnings"] == []


def test_client_worker_processes_are_judged_by_their_cpu_seconds() -> None:
    points = [
        load_point(float(t), {"wall_s": float(t), "client": None,
                              "hosts": [{"host": "vm:1", "worker": 0, "cpu_s": 0.9 * t},
                                        {"host": "vm:2", "worker": 1, "cpu_s": 0.2 * t}]})
        for t in range(6)
    ]  # fmt: skip
    got = saturation_assess(points, simulated=False, duration_s=6)
    assert got["limits"] == ["client"] and "(vm:1)" in got["warnings"][0]


def test_a_client_worker_process_whose_loop_woke_late_is_named() -> None:
    """Hosts report their own loop's lag in each heartbeat: vm:2's loop woke 180-400 ms late
    in 3 beats (its CPU within bounds), vm:1's never; vm:2 is named. A beat seen again by a
    later sample (same cpu_s and lag: the host is slower to beat than samples come, or lost
    and kept as last reported) counts once."""

    def hosts(t: int, lag2: float) -> list[dict[str, Any]]:
        return [
            {"host": "vm:1", "worker": 0, "cpu_s": 0.3 * t, "loop_lag_ms": 4.0},
            {"host": "vm:2", "worker": 1, "cpu_s": 0.4 * t, "loop_lag_ms": lag2},
        ]

    lags = [3.0, 180.0, 400.0, 250.0, 6.0]
    points = [
        load_point(float(t), {"wall_s": float(t), "client": None, "hosts": hosts(t, lag)})
        for t, lag in enumerate(lags)
    ]
    got = saturation_assess(points, simulated=False, duration_s=5)
    assert got["limits"] == ["client"] and got["lag_peak_ms"] == 400
    (warning,) = got["warnings"]
    assert "its event loop (vm:2) woke up to 400 ms late, past 100 ms in 3 snapshots" in warning
    assert "vm:1" not in warning and "% of a core" not in warning
    # The same two late beats read again by later samples, then a lost host's last beat: 2
    # heartbeats past the threshold, not 3 or more snapshots.
    stale = [*points[:3], points[2], points[2]]
    lost = {"host": "vm:3", "worker": 2, "cpu_s": 1.0, "loop_lag_ms": 900.0, "lost_at_s": 1.0}
    stale += [load_point(float(t), {"wall_s": float(t), "hosts": [lost]}) for t in range(5, 9)]
    quiet = saturation_assess(stale, simulated=False, duration_s=9)
    assert quiet["limits"] == [] and quiet["samples_over"] == 2


def test_the_run_page_names_the_host_whose_loop_woke_late(world: World) -> None:
    """Stored samples as a run with client-worker processes writes them: the report's "What
    limits this run" card names the host from its heartbeats' loop lag."""
    run = _finished(world, summary=_summary(), spec={"client_worker_processes": True})
    for seq, lag in enumerate([5.0, 150.0, 320.0, 210.0, 8.0]):
        RunSample.objects.create(run=run, seq=seq, t_s=float(seq), data={
            "t_s": float(seq), "wall_s": float(seq), "requests": seq * 10, "recent": [],
            "hosts": [{"worker": 0, "host": "vm:7", "cpu_s": 0.2 * seq, "loop_lag_ms": 3.0,
                       "lost_at_s": None},
                      {"worker": 1, "host": "vm:8", "cpu_s": 0.5 * seq, "loop_lag_ms": lag,
                       "lost_at_s": None}]})  # fmt: skip
    html = world.client("viewer").get(f"/runs/{run.uuid}/").content.decode()
    assert 'id="saturation"' in html and "The client, not the server, limits this run" in html
    assert "its event loop (vm:8) woke up to 320 ms late, past 100 ms in 3 snapshots" in html


def _sim(t_end: float, p99s: list[float]) -> list[LoadPoint]:
    recent: list[dict[str, Any]] = [
        {"t_s": 10.0 * i, "requests": 3, "ttft_ms": {"p50": v / 2, "p90": v, "p99": v}}
        for i, v in enumerate(p99s)
    ]
    return [load_point(t_end, {"wall_s": 0.02, "recent": recent})]


def test_a_simulated_cluster_that_queued_is_named_the_bottleneck() -> None:
    got = saturation_assess(_sim(96.0, [2600, 9000, 49000]), simulated=True, duration_s=30)
    assert got["limits"] == ["cluster"]
    (warning,) = got["warnings"]
    assert warning.startswith("The simulated cluster is the bottleneck")
    assert "the 30 s schedule took 96 s of virtual time" in warning
    assert "TTFT p99 rose from 2,600 ms in the first answered interval to 49,000 ms" in warning


def test_a_simulated_cluster_within_its_means_is_not_named() -> None:
    got = saturation_assess(_sim(31.0, [800, 900, 850]), simulated=True, duration_s=30)
    assert got == {"limits": [], "warnings": [], "cpu_peak_pct": None, "lag_peak_ms": None,
                   "samples_over": 0}  # fmt: skip
