"""Serving workers as record indices: the mock's small ids kept, a real Dynamo's 64-bit instance
ids (often above 2^63) renumbered in order of appearance and reported."""

from __future__ import annotations

from runner.wallclock.served import ServedIndex


def test_small_worker_ids_are_their_own_index():
    index = ServedIndex()
    assert [index.index(w) for w in ("3", "0", "3")] == [3, 0, 3]
    assert index.labels == {}


def test_instance_ids_are_renumbered_and_labelled():
    index = ServedIndex()
    big = ("17676039716322150182", "4885877244969446432")
    assert [index.index(w) for w in (*big, big[0])] == [0, 1, 0]
    assert index.labels == {0: big[0], 1: big[1]}


def test_renumbered_ids_never_take_an_index_a_small_id_holds():
    index = ServedIndex()
    assert index.index("0") == 0
    assert index.index("worker-a") == 1
    assert index.index(None) is None
