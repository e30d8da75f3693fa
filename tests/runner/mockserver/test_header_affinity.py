"""The Dynamo 1.3-1.6 generation over HTTP: `nvext.session_control` refused, affinity by
`X-Dynamo-Session-*` headers only where the header TTL is set, and its counters. Requests and
answers quoted here are real Dynamo 1.6.1's, verbatim from docs/dynamo-observed.md."""

from __future__ import annotations

import json

import pytest

from tests.runner.mockserver.conftest import Mock, MockFactory, chat_body, json_chunks, words

_EXPECTED_NVEXT = (
    "expected one of `greed_sampling`, `use_raw_prompt`, `annotations`, `backend_instance_id`, "
    "`token_data`, `max_thinking_tokens`, `cache_salt`, `extra_fields`, `metadata_upload`, "
    "`prefill_worker_id`, `decode_worker_id`, `dp_rank`, `prefill_dp_rank`, `agent_hints`, "
    "`request_timestamp_ms`, `routing_constraints`, `router`"
)
# The request bodies of the observed curl calls: _HI plus `, "nvext": {...}}` or `}`.
_HI = '{"model": "dynamo-tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1'
_INVALID = b'{"message":"Invalid request","type":"Bad Request","code":400}'
_BIND = '{"session_control": {"session_id": "x", "action": "bind", "timeout": 300}}'
_OPEN = '{"session_control": {"session_id": "x", "action": "open", "timeout": 300}}'
_CLOSE = '{"session_control": {"session_id": "x", "action": "close"}}'
_CONTEXT = '{"agent_context": {"session_type_id": "t", "session_id": "s", "trajectory_id": "j"}}'


def _refusal(field: str, column: int) -> bytes:
    return (
        '{"message":"Failed to deserialize the JSON body into the target type: unknown field '
        f'`{field}`, {_EXPECTED_NVEXT} at line 1 column {column}","type":"Bad Request","code":400}}'
    ).encode()


def _worker(server: Mock, prompt: str = "hi", **headers: str) -> int:
    """The worker (from nvext.worker_id) that answers one short request with these headers."""
    body = chat_body(prompt, stream=False, max_tokens=2, nvext={"extra_fields": ["worker_id"]})
    response = server.chat(body, headers={k.replace("_", "-"): v for k, v in headers.items()})
    assert response.status_code == 200, response.text
    worker_id: int = response.json()["nvext"]["worker_id"]["decode_worker_id"]
    return worker_id


def _post_raw(server: Mock, body: str, **headers: str) -> tuple[int, str, bytes]:
    response = server.client.post(
        "/v1/chat/completions",
        content=body.encode(),
        headers={"content-type": "application/json", **headers},
    )
    return response.status_code, response.headers["content-type"], response.content


@pytest.mark.parametrize(
    ("nvext", "field", "column"),
    [
        (_BIND, "session_control", 118),
        (_OPEN, "session_control", 118),
        (_CLOSE, "session_control", 118),
        ('{"bogus_field": 1}', "bogus_field", 114),
        (_CONTEXT, "agent_context", 116),
    ],
)
def test_dynamo_16_refuses_session_control_and_unknown_nvext_keys_verbatim(
    mock: MockFactory, nvext: str, field: str, column: int
) -> None:
    server = mock(dynamo_version="1.6", model="dynamo-tiny")
    status, content_type, body = _post_raw(server, _HI + f', "nvext": {nvext}}}')
    assert (status, content_type) == (400, "application/json")
    assert body == _refusal(field, column)
    assert server.stats()["server"]["requests"] == {"400": 1}


def test_the_bind_era_ignores_unknown_nvext_keys(mock: MockFactory) -> None:
    server = mock(model="dynamo-tiny")
    assert _post_raw(server, _HI + ', "nvext": {"bogus_field": 1}}')[0] == 200


def test_dynamo_16_ignores_session_headers_without_the_ttl(mock: MockFactory) -> None:
    server = mock(workers=4, dynamo_version="1.6")
    seen = [_worker(server, X_Dynamo_Session_ID="conv") for _ in range(4)]
    assert sorted(seen) == [0, 1, 2, 3]
    assert server.stats()["cluster"]["totals"]["bound_keys"] == 0


def test_one_session_id_pins_different_prompts_to_one_worker(mock: MockFactory) -> None:
    server = mock(workers=4, dynamo_version="1.6", header_affinity_ttl_s=60.0)
    seen = {_worker(server, words(80, f"p{i}"), X_Dynamo_Session_ID="conv") for i in range(5)}
    assert len(seen) == 1
    worker = server.stats()["cluster"]["workers"][seen.pop()]
    assert (worker["header_binds"], worker["header_follows"], worker["bound_keys"]) == (1, 4, 1)


def test_session_final_does_not_unpin(mock: MockFactory) -> None:
    server = mock(workers=4, dynamo_version="1.6", header_affinity_ttl_s=60.0)
    bound = _worker(server, X_Dynamo_Session_ID="conv")
    final = _worker(server, X_Dynamo_Session_ID="conv", X_Dynamo_Session_Final="true")
    after = [_worker(server, X_Dynamo_Session_ID="conv") for _ in range(3)]
    assert final == bound
    assert set(after) == {bound}
    assert server.stats()["cluster"]["totals"]["bound_keys"] == 1


def test_siblings_share_a_worker_apart_from_their_parent(mock: MockFactory) -> None:
    server = mock(workers=4, dynamo_version="1.6", header_affinity_ttl_s=60.0)
    parent = _worker(server, X_Dynamo_Session_ID="p")
    children = [
        _worker(server, X_Dynamo_Session_ID=f"c{i}", X_Dynamo_Parent_Session_ID="p")
        for i in range(3)
    ]
    assert len(set(children)) == 1
    assert children[0] != parent
    assert _worker(server, X_Dynamo_Session_ID="p") == parent


def test_a_session_id_over_256_bytes_is_refused_verbatim_and_counted(mock: MockFactory) -> None:
    server = mock(workers=2, dynamo_version="1.6", header_affinity_ttl_s=60.0, model="dynamo-tiny")
    assert _post_raw(server, _HI + "}", **{"X-Dynamo-Session-ID": "a" * 256})[0] == 200
    assert server.stats()["cluster"]["totals"]["header_binds"] == 1
    refused = _post_raw(server, _HI + "}", **{"X-Dynamo-Session-ID": "a" * 257})
    assert refused == (400, "application/json", _INVALID)
    long_parent = {"X-Dynamo-Session-ID": "s1", "X-Dynamo-Parent-Session-ID": "p" * 257}
    assert _post_raw(server, _HI + "}", **long_parent)[0] == 200
    metrics = server.client.get("/metrics").text
    assert 'mock_header_refusals_total{reason="id_too_long"} 1' in metrics


def test_a_long_session_id_is_fine_while_header_affinity_is_off(mock: MockFactory) -> None:
    server = mock(workers=2, dynamo_version="1.6", model="dynamo-tiny")
    assert _post_raw(server, _HI + "}", **{"X-Dynamo-Session-ID": "a" * 257})[0] == 200


def test_header_counters_are_in_stats_and_metrics(mock: MockFactory) -> None:
    server = mock(workers=2, dynamo_version="1.6", header_affinity_ttl_s=60.0)
    bound = _worker(server, X_Dynamo_Session_ID="conv")
    _worker(server, X_Dynamo_Session_ID="conv")
    server.admin(f"/admin/workers/{bound}/down")
    moved = _worker(server, X_Dynamo_Session_ID="conv")

    assert moved != bound
    workers = server.stats()["cluster"]["workers"]
    assert (workers[bound]["header_follows"], workers[bound]["header_invalidations"]) == (1, 1)
    assert workers[moved]["header_binds"] == 1
    metrics = server.client.get("/metrics").text
    assert f'mock_worker_header_binds_total{{worker="{bound}"}} 1' in metrics
    assert f'mock_worker_header_follows_total{{worker="{bound}"}} 1' in metrics
    assert f'mock_worker_header_invalidations_total{{worker="{bound}"}} 1' in metrics
    # The families other tools scrape keep their names and count header bindings too.
    assert f'mock_worker_binds_total{{worker="{moved}"}} 1' in metrics
    assert f'mock_worker_bindings_dropped_total{{worker="{bound}"}} 1' in metrics


def test_worker_id_rides_every_chunk_with_choices_and_follows_usage_in_a_whole_body(
    mock: MockFactory,
) -> None:
    # Real 1.6.1 (dynamo-observed.md §b): streamed, every chunk that has `choices` carries the
    # same nvext.worker_id and the usage chunk none; whole, one top-level nvext after usage.
    server = mock(workers=3, dynamo_version="1.6")
    asked = {"extra_fields": ["worker_id"]}
    _, raw = server.stream_raw(chat_body("tell me a story", max_tokens=3, nvext=asked))
    chunks = json_chunks(raw)
    with_choices = [chunk for chunk in chunks if chunk["choices"]]
    assert len(with_choices) >= 4  # role, three tokens, finish
    ids = {json.dumps(chunk["nvext"], sort_keys=True) for chunk in with_choices}
    assert len(ids) == 1
    assert set(json.loads(ids.pop())["worker_id"]) == {
        "prefill_worker_id",
        "prefill_dp_rank",
        "decode_worker_id",
        "decode_dp_rank",
    }
    usage_chunk = chunks[-1]
    assert usage_chunk["choices"] == [] and "nvext" not in usage_chunk

    whole = server.chat(chat_body("tell me a story", stream=False, max_tokens=3, nvext=asked))
    assert list(whole.json())[-2:] == ["usage", "nvext"]
    _, plain = server.stream_raw(chat_body("tell me a story", max_tokens=3))
    assert all("nvext" not in chunk for chunk in json_chunks(plain))
