"""What the cluster decides, as seen over HTTP: cached tokens, worker ids, session affinity,
workers going down and up."""

from __future__ import annotations

import threading
import time
from typing import Any

from tests.runner.mockserver.conftest import Mock, MockFactory, chat_body, json_chunks, words

_BIND_REJECTED_BY_12 = (
    "Failed to deserialize the JSON body into the target type: nvext.session_control.action: "
    "unknown variant `bind`, expected `open` or `close`"
)


def _control(session_id: str, action: str | None = None) -> dict[str, Any]:
    control: dict[str, Any] = {"session_id": session_id}
    if action is not None:
        control["action"] = action
    return {"nvext": {"session_control": control, "extra_fields": ["worker_id"]}}


def _worker(response: Any) -> int:
    assert response.status_code == 200, response.text
    return int(response.headers["x-worker-id"])


def _served_by(server: Mock, session_id: str | None = None, action: str | None = None) -> int:
    """The worker that answers one short request (with session_control when given)."""
    extra = _control(session_id, action) if session_id is not None else {}
    return _worker(server.chat(chat_body("hi", stream=False, **extra)))


def test_repeating_a_prompt_reports_its_cached_blocks(mock: MockFactory) -> None:
    server = mock(router="kv", block_size_tokens=64)
    prompt = words(300)
    _, first = server.stream_raw(chat_body(prompt, max_tokens=2))
    _, second = server.stream_raw(chat_body(prompt, max_tokens=2))
    _, longer = server.stream_raw(chat_body(prompt + " " + words(100, "x"), max_tokens=2))

    usages = [json_chunks(raw)[-1]["usage"] for raw in (first, second, longer)]
    cached = [usage["prompt_tokens_details"]["cached_tokens"] for usage in usages]
    # 300 words = 4 full blocks; the last token is always recomputed, so 4 blocks can hit.
    assert cached == [0, 256, 256]
    totals = server.stats()["cluster"]["totals"]
    assert totals["cached_tokens"] == 512
    assert server.stats()["server"]["cached_tokens"] == 512


def test_worker_id_is_in_the_header_always_and_in_nvext_when_asked(mock: MockFactory) -> None:
    server = mock(workers=3)
    ids = []
    for _ in range(3):
        body = chat_body("hi", max_tokens=2, nvext={"extra_fields": ["worker_id"]})
        response, raw = server.stream_raw(body)
        nvext = json_chunks(raw)[0]["nvext"]["worker_id"]
        assert nvext["decode_worker_id"] == nvext["prefill_worker_id"]
        assert nvext["decode_dp_rank"] == 0
        assert int(response.headers["x-worker-id"]) == nvext["decode_worker_id"]
        ids.append(nvext["decode_worker_id"])
    assert ids == [0, 1, 2]  # round-robin

    plain = server.chat(chat_body("hi", stream=False, max_tokens=2))
    assert "nvext" not in plain.json()
    assert plain.headers["x-worker-id"] == "0"


def test_bind_pins_later_requests_of_the_session_to_one_worker(mock: MockFactory) -> None:
    server = mock(workers=4)
    bound = _served_by(server, "s1", "bind")
    later = [_served_by(server, "s1") for _ in range(6)]
    others = [_served_by(server) for _ in range(4)]

    assert set(later) == {bound}
    assert sorted(others) == [0, 1, 2, 3]  # unbound traffic still rotates
    workers = server.stats()["cluster"]["workers"]
    assert workers[bound]["bound_keys"] == 1
    assert workers[bound]["binds"] == 1


def test_close_goes_to_the_bound_worker_then_unbinds(mock: MockFactory) -> None:
    server = mock(workers=4)
    bound = _served_by(server, "s2", "bind")
    closed = _served_by(server, "s2", "close")
    after = [_served_by(server, "s2") for _ in range(4)]

    assert closed == bound
    assert sorted(after) == [0, 1, 2, 3]  # a bare session_id creates no binding
    totals = server.stats()["cluster"]["totals"]
    assert (totals["binds"], totals["closes"], totals["bound_keys"]) == (1, 1, 0)


def test_dynamo_1_2_rejects_bind_with_400_but_accepts_open(mock: MockFactory) -> None:
    server = mock(dynamo_version="1.2")
    rejected = server.chat(chat_body("hi", stream=False, **_control("s3", "bind")))
    opened = server.chat(chat_body("hi", stream=False, **_control("s3", "open")))

    assert rejected.status_code == 400
    assert rejected.json()["error"]["message"] == _BIND_REJECTED_BY_12
    assert rejected.json()["error"]["type"] == "invalid_request_error"
    assert opened.status_code == 200
    stats = server.stats()
    assert stats["server"]["requests"] == {"200": 1, "400": 1}
    assert stats["cluster"]["totals"]["rejections"] == {"400": 1}


def test_session_header_binds_when_header_affinity_is_on(mock: MockFactory) -> None:
    server = mock(workers=4, header_affinity_ttl_s=60.0)
    headers = {"X-Dynamo-Session-ID": "conv-7"}
    seen = {_worker(server.chat(chat_body("hi", stream=False), headers=headers)) for _ in range(5)}
    assert len(seen) == 1


def test_a_worker_taken_down_gets_no_traffic_until_it_is_up_again(mock: MockFactory) -> None:
    server = mock(workers=3)
    assert server.admin("/admin/workers/1/down") == {
        "worker_id": 1,
        "up": False,
        "requests_failed": 0,
    }
    while_down = [_served_by(server) for _ in range(6)]
    health = server.client.get("/health").json()
    assert server.admin("/admin/workers/1/up") == {"worker_id": 1, "up": True}
    after = [_served_by(server) for _ in range(6)]

    assert 1 not in while_down
    assert health == {"status": "healthy", "workers_up": 2, "workers": 3}
    assert 1 in after
    assert server.stats()["cluster"]["workers"][1]["up"] is True


def test_taking_a_bound_worker_down_drops_its_binding(mock: MockFactory) -> None:
    server = mock(workers=2)
    bound = _served_by(server, "s4", "bind")
    server.admin(f"/admin/workers/{bound}/down")
    moved = _served_by(server, "s4")

    assert moved != bound
    assert server.stats()["cluster"]["totals"]["bindings_dropped"] == 1


def test_every_worker_down_gives_503_and_unhealthy(mock: MockFactory) -> None:
    server = mock(workers=2)
    server.admin("/admin/workers/0/down")
    server.admin("/admin/workers/1/down")
    response = server.chat(chat_body("hi", stream=False))

    assert response.status_code == 503
    assert response.json()["error"]["message"] == "no inference worker is up"
    assert server.client.get("/health").status_code == 503


def test_a_stream_on_a_worker_taken_down_ends_with_an_error_event(mock: MockFactory) -> None:
    # time_scale 1: 300 tokens at >= 5.7 ms each keep the stream running for over 1.7 s.
    server = mock(workers=1, time_scale=1.0)
    result: dict[str, Any] = {}

    def stream() -> None:
        response, raw = server.stream_raw(chat_body("hi", max_tokens=300))
        result["worker"], result["raw"] = int(response.headers["x-worker-id"]), raw

    reader = threading.Thread(target=stream)
    reader.start()
    deadline = time.monotonic() + 5
    while server.stats()["server"]["in_flight"] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    answer = server.admin("/admin/workers/0/down")
    reader.join(5)

    assert answer["requests_failed"] == 1
    assert result["worker"] == 0
    raw: bytes = result["raw"]
    assert raw.endswith(b"data: [DONE]\n\n")
    assert b'"error": {"message": "worker 0 went down"' in raw
    assert b'"finish_reason":"length"' not in raw
    server_stats = server.stats()["server"]
    assert server_stats["streams_broken"] == 1
    assert server_stats["worker_down_failures"] == 1
