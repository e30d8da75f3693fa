"""RequestRecord: derived measurements, identity from credits, and the JSONL line."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from runner.credit import Credit
from runner.metrics import ERROR_CATEGORIES, RequestRecord
from runner.trace.model import BranchMode
from tests.runner.metrics.builders import request


def test_derived_latencies_are_in_milliseconds() -> None:
    record = request(start_s=10.0, first_token_s=10.25, end_s=12.0, output_tokens=350)
    assert record.ttft_ms == pytest.approx(250.0)
    assert record.latency_ms == pytest.approx(2000.0)
    assert record.output_tokens_per_s == pytest.approx(175.0)


def test_ttft_is_none_when_no_token_arrived() -> None:
    assert request(ttft_ms=None).ttft_ms is None


def test_output_rate_is_none_when_the_request_took_no_time() -> None:
    assert request(latency_ms=0.0).output_tokens_per_s is None


def test_cached_ratio_is_none_when_the_server_did_not_report() -> None:
    assert request(prompt_tokens=200, cached_tokens=150).cached_ratio == 0.75
    assert request(prompt_tokens=200, cached_tokens=None).cached_ratio is None


def test_records_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        request().end_s = 3.0  # type: ignore[misc]


def test_a_root_credit_gives_a_root_record_with_its_identity() -> None:
    root = Credit(id=41, session_id="a", root_id="a", turn_index=1, num_turns=3)
    record = RequestRecord.from_credit(
        root,
        client_worker=2,
        start_s=1.0,
        end_s=2.0,
        prompt_tokens=10,
        output_tokens=3,
        inference_worker=7,
    )
    assert (record.request_id, record.session_id, record.root_id) == (root.id, "a", "a")
    assert (record.turn_index, record.num_turns, record.depth) == (1, 3, 0)
    assert record.branch_mode == "root" and record.parent_id is None
    assert (record.client_worker, record.inference_worker) == (2, 7)


def test_fork_and_spawn_credits_name_their_branch_mode_and_parent() -> None:
    for branch_mode, mode in ((BranchMode.FORK, "fork"), (BranchMode.SPAWN, "spawn")):
        child = Credit(
            id=42,
            session_id="c",
            root_id="a",
            turn_index=0,
            num_turns=2,
            parent_id="a",
            branch_mode=branch_mode,
            depth=1,
        )
        record = RequestRecord.from_credit(
            child, client_worker=0, start_s=0.0, end_s=1.0, prompt_tokens=1, output_tokens=1
        )
        assert record.branch_mode == mode
        assert record.parent_id == "a"
        assert record.depth == 1


def test_a_warmup_credit_gives_a_warmup_record() -> None:
    warm = Credit(id=43, session_id="a", root_id="a", turn_index=0, num_turns=1, warmup=True)
    record = RequestRecord.from_credit(
        warm, client_worker=0, start_s=0.0, end_s=1.0, prompt_tokens=1, output_tokens=1
    )
    assert record.warmup


def test_json_line_round_trips() -> None:
    record = request(
        session_id="x",
        root_id="r",
        parent_id="p",
        depth=2,
        branch_mode="spawn",
        inference_worker=3,
        cached_tokens=64,
        error="stream_broken",
        status=200,
        warmup=True,
    )
    line = json.dumps(record.to_json_dict())
    assert RequestRecord.from_json_dict(json.loads(line)) == record


def test_json_line_carries_the_derived_measurements() -> None:
    data = request(ttft_ms=80.0, latency_ms=400.0).to_json_dict()
    assert data["ttft_ms"] == pytest.approx(80.0)
    assert data["latency_ms"] == pytest.approx(400.0)
    assert data["output_tokens_per_s"] == pytest.approx(25.0)


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"error": "oops"}, "error"),
        ({"branch_mode": "clone"}, "branch_mode"),
        ({"prompt_tokens": "100"}, "prompt_tokens"),
        ({"depth": True}, "depth"),
        ({"warmup": 0}, "warmup"),
        ({"start_s": None}, "start_s"),
    ],
)
def test_bad_json_lines_are_rejected_naming_the_field(
    change: dict[str, Any], complaint: str
) -> None:
    data: dict[str, Any] = {**request().to_json_dict(), **change}
    with pytest.raises(ValueError, match=complaint):
        RequestRecord.from_json_dict(data)


def test_a_json_line_missing_a_field_is_rejected() -> None:
    data: dict[str, Any] = dict(request().to_json_dict())
    del data["session_id"]
    with pytest.raises(ValueError, match="session_id"):
        RequestRecord.from_json_dict(data)


def test_error_categories_are_the_clients_plus_worker_lost() -> None:
    assert set(ERROR_CATEGORIES) == {
        "connect",
        "timeout",
        "http_4xx",
        "http_429",
        "http_5xx",
        "stream_broken",
        "bad_payload",
        "cancelled",
        "worker_lost",
    }
