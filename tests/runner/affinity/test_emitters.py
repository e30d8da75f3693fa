"""Wire shapes of server-side affinity (docs/product.md §4.5) and the early-close books."""

from __future__ import annotations

import pytest

from runner.affinity.emitters import (
    Action,
    AffinityConfig,
    AffinityEmitter,
    AffinityKind,
    merge_nvext,
)
from runner.affinity.ledger import AffinityLedger
from runner.errors import SpecError
from tests.runner.factories import credit, spawn

NVEXT = AffinityKind.DYNAMO_NVEXT


def emitter(**kw) -> AffinityEmitter:
    return AffinityEmitter(AffinityConfig(kind=NVEXT, **kw))


def control(e: AffinityEmitter, c, worker: int = 0):
    return e.decide(c, client_worker=worker).session_control


# ------------------------------------------------------------------ conversation scope


def test_conversation_scope_binds_non_final_turns_with_the_own_id_and_default_timeout():
    assert control(emitter(), credit("s", 0, of=3)) == {
        "session_id": "s",
        "action": "bind",
        "timeout": 300,
    }


def test_conversation_scope_closes_on_the_sessions_own_final_turn_without_timeout():
    assert control(emitter(), credit("s", 2, of=3)) == {"session_id": "s", "action": "close"}


def test_conversation_scope_children_bind_their_own_id():
    c = spawn("child", 0, of=2, parent="root")
    assert control(emitter(), c)["session_id"] == "child"


def test_the_timeout_option_is_carried_on_every_bind():
    assert control(emitter(timeout_s=42), credit("s", 0, of=2))["timeout"] == 42


# ----------------------------------------------------------------------- lineage scope


def test_lineage_scope_binds_every_session_of_the_tree_with_the_root_id():
    e = emitter(scope="lineage")
    assert control(e, credit("root", 0, of=2))["session_id"] == "root"
    child = spawn("child", 0, of=2, parent="root", root="root")
    assert control(e, child) == {"session_id": "root", "action": "bind", "timeout": 300}


def test_lineage_children_never_close_even_on_their_final_turn():
    e = emitter(scope="lineage")
    child = spawn("child", 1, of=2, parent="root", root="root")
    assert control(e, child)["action"] == "bind"


def test_lineage_root_final_turn_binds_unless_it_is_stamped_tree_final():
    e = emitter(scope="lineage")
    assert control(e, credit("root", 1, of=2))["action"] == "bind"
    assert control(e, credit("root", 1, of=2, tree_final=True)) == {
        "session_id": "root",
        "action": "close",
    }


def test_lineage_closes_on_a_descendants_tree_final_request():
    e = emitter(scope="lineage")
    last = spawn("child", 0, of=1, parent="root", root="root", tree_final=True)
    assert control(e, last) == {"session_id": "root", "action": "close"}


def test_root_final_close_discipline_closes_on_the_roots_final_turn():
    e = emitter(scope="lineage", close_on="root-final")
    assert control(e, credit("root", 1, of=2))["action"] == "close"


# ------------------------------------------------------------------------ open (1.2.x)


def test_open_mode_opens_once_per_client_worker_then_sends_bare_session_ids():
    e = emitter(actions="open")
    assert control(e, credit("s", 0, of=4), 0) == {
        "session_id": "s",
        "action": "open",
        "timeout": 300,
    }
    assert control(e, credit("s", 1, of=4), 0) == {"session_id": "s"}
    # Another worker has not opened it: the trigger is the first request per worker.
    assert control(e, credit("s", 2, of=4), 1)["action"] == "open"
    assert control(e, credit("s", 3, of=4), 1) == {"session_id": "s", "action": "close"}


def test_open_mode_reopens_after_a_close():
    e = emitter(actions="open")
    control(e, credit("s", 0, of=2), 0)
    control(e, credit("s", 1, of=2), 0)  # close
    assert control(e, credit("s", 0, of=2), 0)["action"] == "open"


# ---------------------------------------------------------------------- header emitters


HEADERS = AffinityKind.DYNAMO_HEADERS


def dynamo_headers(e: AffinityEmitter, c) -> dict[str, str]:
    return dict(e.decide(c, client_worker=0).headers)


def test_dynamo_headers_conversation_keys_each_session_on_its_own_id_without_the_parent():
    e = AffinityEmitter(AffinityConfig(kind=HEADERS))
    d = e.decide(spawn("c", 0, of=2, parent="p"), client_worker=0)
    assert d.session_control is None
    assert dict(d.headers) == {"X-Dynamo-Session-ID": "c"}
    assert dynamo_headers(e, credit("p", 0, of=2)) == {"X-Dynamo-Session-ID": "p"}


def test_dynamo_headers_lineage_keys_the_whole_tree_on_the_root_id_and_never_the_parent():
    e = AffinityEmitter(AffinityConfig(kind=HEADERS, scope="lineage"))
    grandchild = spawn("g", 0, of=2, parent="c", root="r", depth=2)
    assert dynamo_headers(e, grandchild) == {"X-Dynamo-Session-ID": "r"}
    assert dynamo_headers(e, spawn("c", 0, of=2, parent="r")) == {"X-Dynamo-Session-ID": "r"}


def test_dynamo_headers_mark_only_the_tree_final_request_final_under_lineage():
    e = AffinityEmitter(AffinityConfig(kind=HEADERS, scope="lineage"))
    child_last = spawn("c", 1, of=2, parent="r")
    assert "X-Dynamo-Session-Final" not in dynamo_headers(e, child_last)
    root_last = credit("r", 3, of=4)  # the root's final turn while a child is outstanding
    assert "X-Dynamo-Session-Final" not in dynamo_headers(e, root_last)
    d = e.decide(spawn("c2", 0, of=1, parent="r", tree_final=True), client_worker=0)
    assert dict(d.headers) == {"X-Dynamo-Session-ID": "r", "X-Dynamo-Session-Final": "true"}
    assert d.action is Action.CLOSE


def test_dynamo_headers_conversation_marks_the_sessions_own_final_turn():
    e = AffinityEmitter(AffinityConfig(kind=HEADERS))
    assert dynamo_headers(e, spawn("c", 1, of=2, parent="p")) == {
        "X-Dynamo-Session-ID": "c",
        "X-Dynamo-Session-Final": "true",
    }


def test_dynamo_headers_count_the_first_request_under_a_key_as_its_bind():
    e = AffinityEmitter(AffinityConfig(kind=HEADERS, scope="lineage"))
    actions = [
        e.decide(c, client_worker=w).action
        for c, w in (
            (credit("r", 0, of=3), 0),
            (spawn("c", 0, of=2, parent="r"), 3),
            (credit("r", 1, of=3), 1),
        )
    ]
    assert actions == [Action.BIND, Action.FOLLOW, Action.FOLLOW]
    e.decide(credit("r", 2, of=3, tree_final=True), client_worker=0)
    assert e.decide(credit("r", 0, of=3), client_worker=0).action is Action.BIND  # next tree


def test_the_parent_header_is_an_opt_in_of_conversation_scope():
    e = AffinityEmitter(AffinityConfig(kind=HEADERS, parent_header=True))
    assert dynamo_headers(e, spawn("c", 0, of=2, parent="p")) == {
        "X-Dynamo-Session-ID": "c",
        "X-Dynamo-Parent-Session-ID": "p",
    }
    with pytest.raises(SpecError, match="sibling group"):
        AffinityConfig(kind=HEADERS, scope="lineage", parent_header=True)


@pytest.mark.parametrize(("source", "expected"), [("own", "c"), ("parent", "p"), ("root", "r")])
def test_the_header_emitter_carries_the_chosen_id(source, expected):
    e = AffinityEmitter(
        AffinityConfig(
            kind=AffinityKind.HEADER, header_name="X-SMG-Routing-Key", header_source=source
        )
    )
    c = spawn("c", 0, of=2, parent="p", root="r")
    assert e.decide(c, client_worker=0).headers == (("X-SMG-Routing-Key", expected),)


def test_a_header_name_that_is_not_an_http_token_is_rejected():
    with pytest.raises(SpecError, match="header name"):
        AffinityConfig(kind=AffinityKind.HEADER, header_name="Bad Header")


def test_no_affinity_adds_nothing():
    e = AffinityEmitter(AffinityConfig())
    d = e.decide(credit("s", 0, of=2), client_worker=0)
    assert d.session_control is None and d.headers == () and d.key is None


# ------------------------------------------------------------------------------- merge


def test_merge_keeps_other_nvext_keys_and_never_mutates_the_trace_body():
    body = {"nvext": {"extra_fields": ["worker_id"], "session_control": {"x": 1}}, "top": True}
    d = emitter().decide(credit("s", 0, of=2), client_worker=0)
    merged = merge_nvext(body, d)
    assert merged["nvext"]["extra_fields"] == ["worker_id"]
    assert merged["nvext"]["session_control"] == {
        "x": 1,
        "session_id": "s",
        "action": "bind",
        "timeout": 300,
    }
    assert body == {
        "nvext": {"extra_fields": ["worker_id"], "session_control": {"x": 1}},
        "top": True,
    }


def test_merge_replaces_a_non_dict_nvext():
    d = emitter().decide(credit("s", 0, of=2), client_worker=0)
    assert merge_nvext({"nvext": "junk"}, d)["nvext"] == {
        "session_control": dict(d.session_control)
    }


# ------------------------------------------------------------------------------ ledger


def test_an_early_close_is_a_close_while_another_bound_session_still_has_turns():
    e = emitter(scope="lineage", close_on="root-final")
    ledger = AffinityLedger()
    for c in (
        credit("root", 0, of=2),
        spawn("child", 0, of=3, parent="root", root="root"),
        credit("root", 1, of=2),
    ):
        ledger.record(c, e.decide(c, client_worker=0))
    assert ledger.closes == 1 and ledger.early_closes == 1


def test_a_tree_final_close_is_never_early():
    e = emitter(scope="lineage")
    ledger = AffinityLedger()
    seq = [
        credit("root", 0, of=2),
        spawn("child", 0, of=2, parent="root", root="root"),
        credit("root", 1, of=2),
        spawn("child", 1, of=2, parent="root", root="root", tree_final=True),
    ]
    for c in seq:
        ledger.record(c, e.decide(c, client_worker=0))
    assert (ledger.binds, ledger.closes, ledger.early_closes, ledger.keys_bound) == (3, 1, 0, 0)


def test_keys_never_closed_are_counted_as_bound_at_the_end():
    e = emitter(scope="lineage")
    ledger = AffinityLedger()
    c = credit("root", 0, of=3)
    ledger.record(c, e.decide(c, client_worker=0))
    assert ledger.keys_bound == 1


def test_a_session_that_ends_early_does_not_make_the_trees_close_early():
    e = emitter(scope="lineage")
    ledger = AffinityLedger()
    child = spawn("child", 0, of=3, parent="root", root="root")
    ledger.record(child, e.decide(child, client_worker=0))
    ledger.session_ended("child")  # errored out after its first turn
    last = credit("root", 0, of=1, tree_final=True)
    ledger.record(last, e.decide(last, client_worker=0))
    assert ledger.closes == 1 and ledger.early_closes == 0


def test_a_drained_tree_without_a_close_is_counted_once_and_forgotten():
    e = emitter(scope="lineage")
    ledger = AffinityLedger()
    c = credit("root", 0, of=2)
    ledger.record(c, e.decide(c, client_worker=0))
    ledger.forget("root")
    ledger.forget("root")
    assert ledger.keys_bound == 1
