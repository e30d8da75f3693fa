"""Early closes counted by their definition, and affinity books that forget what is done."""

from __future__ import annotations

from runner.affinity.emitters import AffinityConfig, AffinityEmitter, AffinityKind
from runner.affinity.ledger import AffinityLedger
from runner.replay.engine import Engine, EngineConfig
from runner.replay.scheduler import ReplayConfig
from runner.trace.model import Branch, BranchMode, Session, Turn
from tests.runner.factories import credit, spawn, tree, turns, with_branches
from tests.runner.replay.test_engine import drive

NVEXT = AffinityKind.DYNAMO_NVEXT


def emitter(**kw) -> AffinityEmitter:
    return AffinityEmitter(AffinityConfig(kind=NVEXT, **kw))


def record_all(e: AffinityEmitter, ledger: AffinityLedger, *credits, worker: int = 0) -> None:
    for c in credits:
        ledger.record(c, e.decide(c, client_worker=worker))


# --------------------------------------------------------------------------- early closes


def test_a_close_before_a_spawned_child_has_sent_is_early_once_the_child_sends():
    e = emitter(scope="lineage", close_on="root-final")
    ledger = AffinityLedger()
    record_all(e, ledger, credit("root", 0, of=2), credit("root", 1, of=2))
    assert ledger.closes == 1 and ledger.early_closes == 0  # nothing known is pending yet
    # The child was spawned by the root's first turn and waited on its delay.
    record_all(e, ledger, spawn("child", 0, of=2, parent="root", root="root"))
    assert ledger.early_closes == 1
    record_all(e, ledger, spawn("child", 1, of=2, parent="root", root="root"))
    assert ledger.early_closes == 1  # one close, counted once


def test_a_close_nothing_follows_is_not_early():
    e = emitter(scope="lineage", close_on="root-final")
    ledger = AffinityLedger()
    record_all(e, ledger, credit("root", 0, of=2), credit("root", 1, of=2))
    ledger.forget("root")  # the tree drained
    assert ledger.early_closes == 0 and ledger.tracked_keys == 0


def delayed_child_tree():
    # The root's first turn spawns a child that waits 10 s; the root ends at 2-3 s.
    root_turns = turns(2)
    root_turns[0] = with_branches(root_turns[0], Branch(BranchMode.SPAWN, ("c",)))
    child_turns = list(turns(2, start_s=11.0))
    child_turns[0] = Turn(index=0, input_tokens=100, output_tokens=10, delay_s=10.0, t_s=11.0)
    child = Session("c", tuple(child_turns), parent_id="root", mode=BranchMode.SPAWN, depth=1)
    return tree(Session("root", tuple(root_turns)), child)


def lineage_run(close_on: str) -> Engine:
    engine = Engine(
        [delayed_child_tree()],
        ReplayConfig(concurrency=1, max_trees=1),
        EngineConfig(
            affinity=AffinityConfig(kind=NVEXT, scope="lineage", close_on=close_on)  # type: ignore[arg-type]
        ),
    )
    drive(engine)
    return engine


def test_root_final_closes_are_early_when_a_registered_child_has_not_sent_yet():
    ledger = lineage_run("root-final").ledger
    assert ledger.closes == 1 and ledger.early_closes == 1


def test_tree_final_closes_stay_on_time_when_a_child_starts_late():
    ledger = lineage_run("tree-final").ledger
    assert (ledger.closes, ledger.early_closes, ledger.tracked_keys) == (1, 0, 0)


# -------------------------------------------------------------------------- open (1.2.x)


def test_a_close_forgets_the_key_on_every_client_worker_that_opened_it():
    e = emitter(scope="lineage", close_on="root-final", actions="open")
    e.decide(credit("root", 0, of=2), client_worker=0)
    e.decide(spawn("c", 0, of=3, parent="root", root="root"), client_worker=1)
    e.decide(credit("root", 1, of=2), client_worker=0)  # close: the server unbinds the key
    # A bare session id would follow a binding that no longer exists: open it again.
    decision = e.decide(spawn("c", 1, of=3, parent="root", root="root"), client_worker=1)
    assert decision.session_control is not None
    assert decision.session_control["action"] == "open"


def test_a_bounced_session_leaves_no_opened_pairs_behind():
    e = emitter(actions="open")
    e.decide(credit("s", 0, of=3), client_worker=0)
    e.decide(credit("s", 1, of=3), client_worker=1)  # bounced to another worker
    e.decide(credit("s", 2, of=3), client_worker=1)  # close
    assert e.tracked_keys == 0


def test_a_session_that_ends_early_is_forgotten_under_conversation_scope():
    e = emitter(actions="open")
    e.decide(credit("s", 0, of=3), client_worker=0)
    e.session_ended("s")
    assert e.tracked_keys == 0


def test_a_session_that_ends_early_keeps_its_trees_key_under_lineage():
    e = emitter(scope="lineage", actions="open")
    e.decide(spawn("c", 0, of=3, parent="root", root="root"), client_worker=0)
    e.session_ended("c")
    assert e.tracked_keys == 1
    e.forget("root")  # the tree drained
    assert e.tracked_keys == 0
