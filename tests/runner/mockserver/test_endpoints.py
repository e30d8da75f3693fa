"""The non-completion endpoints: models, health, Prometheus metrics, JSON stats, reset; and
the non-streaming answers."""

from __future__ import annotations

from runner.trace.tokens import count_tokens
from tests.runner.mockserver.conftest import MODEL, MockFactory, chat_body, words


def test_models_lists_the_served_model(mock: MockFactory) -> None:
    server = mock(model="served-x")
    body = server.client.get("/v1/models").json()

    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["served-x"]
    assert body["data"][0]["object"] == "model"


def test_non_streaming_chat_answer_has_the_whole_text_and_usage(mock: MockFactory) -> None:
    server = mock()
    response = server.chat(
        chat_body(words(70), stream=False, max_tokens=9, nvext={"extra_fields": ["worker_id"]})
    )

    body = response.json()
    assert response.headers["content-type"] == "application/json"
    assert body["object"] == "chat.completion"
    assert body["model"] == MODEL
    choice = body["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert count_tokens(choice["message"]["content"]) == 9
    assert choice["finish_reason"] == "length"
    assert body["usage"] == {
        "prompt_tokens": 70,
        "completion_tokens": 9,
        "total_tokens": 79,
        "prompt_tokens_details": {"cached_tokens": 0},
    }
    assert body["nvext"]["worker_id"]["decode_worker_id"] == int(response.headers["x-worker-id"])


def test_non_streaming_completion_answer_has_text_and_usage(mock: MockFactory) -> None:
    server = mock()
    body = server.client.post(
        "/v1/completions", json={"model": MODEL, "prompt": "one two three", "max_tokens": 5}
    ).json()

    assert body["object"] == "text_completion"
    assert count_tokens(body["choices"][0]["text"]) == 5
    assert body["usage"]["prompt_tokens"] == 3


def test_stats_has_per_worker_cluster_stats_and_server_counters(mock: MockFactory) -> None:
    server = mock(workers=2)
    for _ in range(3):
        server.chat(chat_body(words(10), max_tokens=4))
    server.chat({**chat_body("x"), "model": "nope"})
    stats = server.stats()

    assert stats["model"] == MODEL
    assert stats["process_cpu_s"] > 0
    assert stats["server"]["requests"] == {"200": 3, "404": 1}
    assert stats["server"]["prompt_tokens"] == 30
    assert stats["server"]["completion_tokens"] == 12
    assert stats["server"]["in_flight"] == 0
    assert stats["server"]["coalesced_tokens"] == 0  # zero latency: nothing was late
    assert set(stats["server"]["faults_injected"]) == {
        "error",
        "rate_limit",
        "overload",
        "disconnect",
        "stall",
    }
    workers = stats["cluster"]["workers"]
    assert [w["worker_id"] for w in workers] == [0, 1]
    assert [w["requests"] for w in workers] == [2, 1]
    assert {"running", "queued", "bound_keys", "binds", "closes", "expiries"} <= set(workers[0])
    assert stats["cluster"]["totals"]["requests"] == 3


def test_metrics_are_prometheus_text_with_per_worker_series(mock: MockFactory) -> None:
    server = mock(workers=2)
    server.chat(chat_body(words(10), max_tokens=4))
    response = server.client.get("/metrics")

    assert response.headers["content-type"].startswith("text/plain")
    lines = response.text.splitlines()
    samples = dict(line.rsplit(" ", 1) for line in lines if not line.startswith("#"))
    assert samples['mock_requests_total{status="200"}'] == "1"
    assert samples["mock_prompt_tokens_total"] == "10"
    assert samples["mock_cached_tokens_total"] == "0"
    assert samples['mock_faults_injected_total{kind="disconnect"}'] == "0"
    for worker in ("0", "1"):
        for name in ("running", "queued", "bound_keys", "binds_total", "closes_total"):
            assert f'mock_worker_{name}{{worker="{worker}"}}' in samples
        assert f'mock_worker_expiries_total{{worker="{worker}"}}' in samples
    assert samples['mock_worker_requests_total{worker="0"}'] == "1"
    assert "# TYPE mock_worker_running gauge" in lines
    assert "# TYPE mock_requests_total counter" in lines


def test_reset_gives_a_fresh_cluster_and_counters(mock: MockFactory) -> None:
    server = mock(workers=2)
    server.chat(chat_body("hi"))
    server.admin("/admin/workers/1/down")
    server.admin("/admin/reset")
    stats = server.stats()

    assert stats["server"]["requests"] == {}
    assert stats["cluster"]["totals"]["requests"] == 0
    assert all(w["up"] for w in stats["cluster"]["workers"])


def test_health_says_healthy_with_workers_up(mock: MockFactory) -> None:
    server = mock(workers=3)
    response = server.client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "healthy", "workers_up": 3, "workers": 3}
