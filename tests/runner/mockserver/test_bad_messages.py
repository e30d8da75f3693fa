"""Malformed chat messages get a 400 naming the message, as vLLM answers them; the mock never
answers 200 to a body a real server refuses, nor 500 to any body."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.runner.mockserver.conftest import MODEL, MockFactory


def _body(messages: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": messages, "max_tokens": 2, "stream": False}


@pytest.mark.parametrize(
    ("messages", "phrase"),
    [
        ([{"role": "robot", "content": "hi"}], "messages[0].role must be one of"),
        ([{"role": "user", "content": "a"}, {"role": "", "content": "b"}], "messages[1].role"),
        ([{"role": "user"}], "messages[0].content is required for role 'user'"),
        ([{"role": "system", "content": None}], "content is required"),
        ([{"role": "user", "content": 5}], "must be a string or a list of content parts"),
        ([{"role": "user", "content": ["hi"]}], "messages[0].content[0] must be an object"),
        ([{"role": "user", "content": [{"text": "hi"}]}], "with a string `type`"),
        ([{"role": "user", "content": [{"type": "text", "text": 3}]}], "text must be a string"),
        ([{"role": "user", "content": "hi", "name": 7}], "messages[0].name must be a string"),
    ],
)
def test_malformed_messages_get_400_naming_the_message(
    mock: MockFactory, messages: Any, phrase: str
) -> None:
    server = mock()
    response = server.chat(_body(messages))

    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert phrase in error["message"]
    assert (error["type"], error["param"]) == ("invalid_request_error", "messages")
    assert server.stats()["server"]["requests"] == {"400": 1}


def test_well_formed_messages_of_every_role_are_served(mock: MockFactory) -> None:
    server = mock()
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "developer", "content": "really"},
        {"role": "user", "content": [{"type": "text", "text": "two words"}, {"type": "image_url"}]},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "content": "result", "tool_call_id": "x"},
        {"role": "user", "content": "go", "name": "me"},
    ]
    response = server.chat(_body(messages))

    assert response.status_code == 200, response.text
    assert response.json()["usage"]["prompt_tokens"] == 7


def test_a_deeply_nested_body_gets_400_not_500(mock: MockFactory) -> None:
    server = mock()
    deep = "[" * 100_000 + "]" * 100_000
    body = json.dumps(_body([{"role": "user", "content": "x"}]))[:-1] + f', "x": {deep}}}'
    response = server.client.post("/v1/chat/completions", content=body.encode())

    assert response.status_code == 400, response.text
    assert "too deeply" in response.json()["error"]["message"]
