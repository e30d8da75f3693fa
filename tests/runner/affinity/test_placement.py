"""Placement books (where the server put each tree): splits, children on the root's worker,
expected vs serving worker, and the state they keep only while a tree lives."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from runner import ListSink, RunSpec, parse_spec, run
from runner.affinity.placement import PlacementBook, placement_pcts
from runner.cluster import ClusterConfig
from runner.mockserver import MockServerConfig, start_mock_server
from tests.runner.factories import credit, fork, spawn


def test_no_serving_worker_reported_means_unknown_placement_not_perfect():
    assert PlacementBook().figures() is None


def test_a_tree_served_by_one_worker_is_whole_and_its_children_follow_the_root():
    book = PlacementBook()
    book.served(credit("r", 0, of=2), 1, key="r")
    book.served(spawn("c", 0, of=1, parent="r"), 1, key="r")
    book.served(spawn("g", 0, of=1, parent="c", root="r", depth=2), 1, key="r")  # grandchild
    book.served(credit("r", 1, of=2), 1, key="r")
    assert book.figures() == {
        "trees": 1,
        "trees_split": 0,
        "child_requests": 2,
        "child_requests_on_root_worker": 2,
        "keyed_requests": 4,
        "key_misses": 0,
        "trees_split_pct": 0.0,
        "child_requests_on_root_worker_pct": 100.0,
        "key_misses_pct": 0.0,
    }


def test_a_child_elsewhere_splits_the_tree_once_and_misses_its_lineage_key():
    book = PlacementBook()
    book.served(credit("r", 0, of=3), 0, key="r")
    book.served(spawn("a", 0, of=1, parent="r"), 1, key="r")
    book.served(fork("b", 0, of=1, parent="r"), 2, key="r")  # a third worker: still one split
    figures = book.figures()
    assert figures is not None
    assert figures["trees_split"] == 1
    assert (figures["child_requests"], figures["child_requests_on_root_worker"]) == (2, 0)
    assert figures["key_misses"] == 2
    # The percentages ride in the figures, computed once here (one decimal).
    assert figures["trees_split_pct"] == 100.0
    assert figures["child_requests_on_root_worker_pct"] == 0.0
    assert figures["key_misses_pct"] == 66.7


def test_conversation_keys_are_expected_on_their_own_first_worker():
    book = PlacementBook()
    book.served(credit("r", 0, of=2), 0, key="r")
    book.served(spawn("c", 0, of=2, parent="r"), 1, key="c")  # its own key: no miss
    book.served(spawn("c", 1, of=2, parent="r"), 1, key="c")
    figures = book.figures()
    assert figures is not None
    assert figures["key_misses"] == 0 and figures["trees_split"] == 1


def test_children_of_a_rootless_lane_have_no_root_to_follow():
    book = PlacementBook()
    book.served(spawn("c", 0, of=2, parent="gone"), 0, key=None)
    book.served(spawn("d", 0, of=2, parent="gone"), 1, key=None)
    figures = book.figures()
    assert figures is not None
    assert figures["child_requests"] == 0 and figures["trees_split"] == 1
    assert figures["keyed_requests"] == 0
    # No whole, no percentage (not 0 %).
    assert figures["child_requests_on_root_worker_pct"] is None
    assert figures["key_misses_pct"] is None


def test_state_is_dropped_when_sessions_and_trees_end():
    book = PlacementBook()
    book.served(credit("r", 0, of=2), 0, key="r")
    book.served(spawn("c", 0, of=1, parent="r"), 0, key="c")
    assert book.tracked == 3  # the tree, its key and the child's key
    book.session_ended("c")
    book.tree_ended("r")
    assert book.tracked == 0
    # A later tree reusing nothing starts clean; the counts stay cumulative.
    book.served(credit("r2", 0, of=1), 1, key="r2")
    figures = book.figures()
    assert figures is not None and figures["trees"] == 2


def test_counts_stored_before_the_percentages_get_them_from_the_same_rule() -> None:
    old = {"trees": 3, "trees_split": 1, "child_requests": 0, "child_requests_on_root_worker": 0}
    assert placement_pcts(old) == {
        "trees_split_pct": 33.3,
        "child_requests_on_root_worker_pct": None,
        "key_misses_pct": None,
    }
    book = PlacementBook()
    book.served(credit("r", 0, of=1), 0, key="r")
    figures = book.figures()
    assert figures is not None
    assert placement_pcts(figures) == {k: figures[k] for k in placement_pcts(figures)}  # type: ignore[literal-required]


def _placement_checked(figures: dict[str, object] | None) -> int:
    """The percentages a snapshot or summary carries are the engine's rule over its counts."""
    assert figures is not None
    assert {k: figures[k] for k in placement_pcts(figures)} == placement_pcts(
        {k: v for k, v in figures.items() if not k.endswith("_pct")}
    )
    trees = figures["trees"]
    assert isinstance(trees, int)
    return trees


def _spec(target: Mapping[str, object], **knobs: object) -> RunSpec:
    return parse_spec(
        {
            "workload": {"synthetic": {"trees": 6}},
            "concurrency": 4,
            "affinity": "dynamo-nvext",
            "scope": "lineage",
            "duration_s": 60,
            "target": target,
            **knobs,
        }
    )


def test_a_simulated_runs_snapshots_and_summary_carry_the_percentages() -> None:
    sink = ListSink()
    simulated = {"kind": "simulated", "time_scale": 0.1, "snapshot_interval_s": 10}
    result = run(_spec(simulated), sink=sink)
    placed = [s["placement"] for s in sink.snapshots if s["placement"] is not None]
    assert placed and all(_placement_checked(dict(p)) > 0 for p in placed)
    assert _placement_checked(dict(result.summary["placement"] or {})) > 0


@pytest.mark.slow  # a replay on the wall clock against a mock server
def test_a_live_runs_snapshots_and_summary_carry_the_percentages() -> None:
    config = MockServerConfig(cluster=ClusterConfig(workers=2, time_scale=0.0))
    with start_mock_server(config) as server:
        sink = ListSink()
        target = {"kind": "endpoint", "url": server.url, "model": "mock-model"}
        spec = _spec(target, duration_s=1.5, speedup=50.0, snapshot_interval_s=0.3)
        result = run(spec, sink=sink)
    placed = [s["placement"] for s in sink.snapshots if s["placement"] is not None]
    assert placed and all(_placement_checked(dict(p)) > 0 for p in placed)
    assert _placement_checked(dict(result.summary["placement"] or {})) > 0
