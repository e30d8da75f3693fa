"""Bad requests get OpenAI-style errors with the right status; the API key guards /v1 and
/admin."""

from __future__ import annotations

from typing import Any

import pytest

from tests.runner.mockserver.conftest import MODEL, MockFactory, chat_body


def _error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body: dict[str, Any] = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    error: dict[str, Any] = body["error"]
    return error


def test_missing_or_wrong_api_key_gets_401_and_the_right_key_passes(mock: MockFactory) -> None:
    server = mock(api_key="sekrit")
    body = chat_body("hi", stream=False)
    missing = server.client.post("/v1/chat/completions", json=body, headers={"authorization": ""})
    wrong = server.client.post(
        "/v1/chat/completions", json=body, headers={"authorization": "Bearer nope"}
    )
    models = server.client.get("/v1/models", headers={"authorization": "Bearer nope"})
    admin = server.client.post("/admin/reset", headers={"authorization": "Bearer nope"})

    assert _error(missing, 401)["code"] == "invalid_api_key"
    assert _error(wrong, 401)["code"] == "invalid_api_key"
    _error(models, 401)
    _error(admin, 401)
    assert server.chat(body).status_code == 200
    assert server.client.get("/v1/models").status_code == 200
    assert server.client.get("/health", headers={"authorization": ""}).status_code == 200
    assert server.stats()["server"]["requests"] == {"200": 1, "401": 2}


def test_unknown_model_gets_404_model_not_found(mock: MockFactory) -> None:
    server = mock()
    error = _error(server.chat({**chat_body("hi"), "model": "gpt-9"}), 404)

    assert error["code"] == "model_not_found"
    assert error["param"] == "model"
    assert "gpt-9" in error["message"]


@pytest.mark.parametrize(
    ("body", "param", "phrase"),
    [
        (b"{not json", None, "not valid JSON"),
        (b"[1, 2]", None, "must be a JSON object"),
        (b'{"messages": [{"role": "user", "content": "x"}]}', "model", "`model` is required"),
        (b'{"model": "mock-model"}', "messages", "`messages` must be a non-empty list"),
        (b'{"model": "mock-model", "messages": []}', "messages", "non-empty list"),
        (b'{"model": "mock-model", "messages": ["hi"]}', "messages", "messages[0]"),
        (
            b'{"model": "mock-model", "messages": [{"role": "user", "content": "x"}], '
            b'"max_tokens": 0}',
            "max_tokens",
            "`max_tokens` must be an integer",
        ),
        (
            b'{"model": "mock-model", "messages": [{"role": "user", "content": "x"}], '
            b'"stream": "yes"}',
            "stream",
            "`stream` must be true or false",
        ),
        (
            b'{"model": "mock-model", "messages": [{"role": "user", "content": "x"}], '
            b'"nvext": {"session_control": {"action": "bind"}}}',
            None,
            "missing field `session_id`",
        ),
    ],
)
def test_bad_bodies_get_400_naming_the_problem(
    mock: MockFactory, body: bytes, param: str | None, phrase: str
) -> None:
    server = mock()
    error = _error(server.client.post("/v1/chat/completions", content=body), 400)

    assert phrase in error["message"]
    assert error["param"] == param
    assert error["type"] == "invalid_request_error"


def test_completions_prompt_must_be_text_or_token_ids(mock: MockFactory) -> None:
    server = mock()
    bad = server.client.post("/v1/completions", json={"model": MODEL, "prompt": {"a": 1}})
    ids = server.client.post("/v1/completions", json={"model": MODEL, "prompt": [1, 2, 3]})

    assert _error(bad, 400)["param"] == "prompt"
    assert ids.json()["usage"]["prompt_tokens"] == 3


def test_unknown_route_is_404_and_wrong_method_is_405(mock: MockFactory) -> None:
    server = mock()
    assert _error(server.client.get("/v1/nothing"), 404)["code"] == "not_found"
    wrong = server.client.get("/v1/chat/completions")
    _error(wrong, 405)
    assert wrong.headers["allow"] == "POST"
    assert _error(server.client.post("/admin/workers/9/down"), 404)["code"] == "not_found"
    assert _error(server.client.post("/admin/workers/x/up"), 404)["code"] == "not_found"
