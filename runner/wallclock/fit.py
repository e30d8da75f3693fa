"""`fit_context`: how much of a live endpoint's context window a workload's requests take, so
the run can shrink them to fit (runner/trace/scale.py does the shrinking).

The window is the model's `max_model_len` from `/v1/models` (vLLM and SGLang list it; a Dynamo
frontend says `context_window`). A trace counts words, the server counts its own tokens: two
one-token requests of synthesized words, short and long (from the same word pool every replayed
prompt is made of, behind a tree marker), give the server's tokens per word and its fixed cost
per request (the chat template and marker) from `usage.prompt_tokens`. A margin covers how the
words of one prompt differ from the sample's. Nothing is cached for later: the texts are fresh
words under a random salt.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Final

import httpx

from runner.client import ChatRequest, EndpointError, InferenceClient, Timeouts
from runner.trace import instance_marker, synthesize_prompt
from runner.trace.scale import ContextCost

__all__ = ["SHORT_WORDS", "measure_context"]

SHORT_WORDS: Final = 16
_LONG_SHARE: Final = 8  # the long sample: max_model_len / 8 words, well inside the window
_MAX_LONG_WORDS: Final = 2_048
_MARGIN: Final = 0.04  # per-word cost measured on ~500 words; one prompt's words vary by ~1 %


async def measure_context(
    endpoint: str,
    *,
    model: str,
    api_key: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 60.0,
) -> ContextCost:
    """The endpoint's context window and what a trace's words cost in it. Raises
    EndpointError (what, where, how to fix) when the endpoint does not say its window or does
    not count prompt tokens."""
    timeouts = Timeouts(connect_s=10.0, read_s=timeout_s, total_s=2 * timeout_s)
    async with InferenceClient(
        endpoint, concurrency=1, api_key=api_key, headers=headers, timeouts=timeouts
    ) as client:
        window = await _max_model_len(client, model)
        long_words = max(4 * SHORT_WORDS, min(_MAX_LONG_WORDS, window // _LONG_SHARE))
        salt = uuid.uuid4().hex
        short = await _prompt_tokens(client, model, SHORT_WORDS, salt)
        long = await _prompt_tokens(client, model, long_words, salt)
    per_word = (long - short) / (long_words - SHORT_WORDS)
    if per_word <= 0:
        raise EndpointError(
            f"fit_context: {endpoint} counted {short} prompt tokens for {SHORT_WORDS} words and "
            f"{long} for {long_words}: its usage does not grow with the prompt, so it cannot "
            "be fitted; give length_scale as a factor instead",
            url=endpoint,
        )
    return ContextCost(
        max_model_len=window,
        per_word=per_word * (1 + _MARGIN),
        overhead=short - per_word * SHORT_WORDS,
    )


async def _max_model_len(client: InferenceClient, model: str) -> int:
    url = str(client.url("/v1/models"))
    fix = "give length_scale as a factor instead (about max_model_len / the longest request)"
    try:
        response = await client.get("/v1/models")
        entries = json.loads(response.content)["data"] if response.status_code == 200 else []
        # vLLM and SGLang say max_model_len, a Dynamo frontend context_window.
        found = [
            e.get("max_model_len", e.get("context_window")) for e in entries if e.get("id") == model
        ]
    except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise EndpointError(
            f"fit_context: cannot read the models of {url} ({type(exc).__name__}); {fix}",
            url=url,
        ) from None
    if not found or not isinstance(found[0], int) or found[0] <= 0:
        raise EndpointError(
            f"fit_context: {url} does not give a max_model_len for model {model!r} (vLLM and "
            f"SGLang list one, a Dynamo frontend its engine's context_window, 0 for a mocker); "
            f"{fix}",
            url=url,
        )
    return found[0]


async def _prompt_tokens(client: InferenceClient, model: str, words: int, salt: str) -> int:
    text = synthesize_prompt(
        input_tokens=words,
        hash_ids=(),
        block_size=64,
        scope="fit-context",
        request_key=f"{salt}/{words}",
        marker=instance_marker(f"{salt}/{words}"),
    )
    request = ChatRequest(
        model=model, messages=[{"role": "user", "content": text}], max_tokens=1, ignore_eos=True
    )
    url = str(client.url(request.path))
    answer = await client.send(request)
    if answer.error is not None:
        said = answer.error_detail or answer.error
        raise EndpointError(
            f"fit_context: {url} refused a {words}-word test prompt ({said}); check the "
            "endpoint, or give length_scale as a factor instead",
            url=url,
        )
    if answer.prompt_tokens is None:
        raise EndpointError(
            f"fit_context: {url} reports no usage.prompt_tokens, so what a word costs there is "
            "unknown; give length_scale as a factor instead",
            url=url,
        )
    return answer.prompt_tokens
