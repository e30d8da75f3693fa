"""The `real_dynamo` fixture serves an OpenAI chat API with Dynamo's extensions: the model is
listed, a stream carries tokens, the usage chunk has cached-token details, and `nvext` reports
the worker that served the request."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.dynamo.cluster import DynamoCluster

pytestmark = pytest.mark.dynamo


def test_the_model_is_listed(real_dynamo: DynamoCluster) -> None:
    models = httpx.get(f"{real_dynamo.base_url}/v1/models", timeout=10).json()
    assert real_dynamo.model in [m["id"] for m in models["data"]]


def test_a_streaming_chat_returns_tokens_usage_and_the_worker_id(
    real_dynamo: DynamoCluster,
) -> None:
    body = {
        "model": real_dynamo.model,
        "messages": [{"role": "user", "content": "Write a line about the sea."}],
        "max_tokens": 8,
        "stream": True,
        "stream_options": {"include_usage": True},
        "nvext": {"extra_fields": ["worker_id"]},
    }
    chunks: list[dict[str, Any]] = []
    with httpx.stream(
        "POST", f"{real_dynamo.base_url}/v1/chat/completions", json=body, timeout=30
    ) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line.removeprefix("data: ")))

    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text
    usage = chunks[-1]["usage"]
    assert usage["completion_tokens"] == 8
    assert usage["prompt_tokens"] > 0
    assert isinstance(usage["prompt_tokens_details"]["cached_tokens"], int)
    worker = next(c["nvext"]["worker_id"] for c in chunks if "nvext" in c)
    assert set(worker) >= {"decode_worker_id", "prefill_worker_id"}
    assert isinstance(worker["decode_worker_id"], int)
    assert 0 <= worker["decode_worker_id"] < 2**64
