"""Checks an endpoint before a run, so a wrong URL, key or model fails in one clear line.

Owns the diagnosis only: it lists `/v1/models`, sends one 1-token request the way a run would
and turns what goes wrong into an `EndpointError` (what, where, how to fix). It never retries
and never starts load; the request path is the run's own (`InferenceClient.send`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import httpx

from runner.client.errors import EndpointError
from runner.client.http import ErrorCategory, InferenceClient, ResponseResult, Timeouts
from runner.client.openai import ChatRequest, CompletionRequest, InferenceRequest

__all__ = ["EndpointInfo", "preflight"]

_SHOWN_MODELS = 8  # a long model list would break the one-line message


@dataclass(frozen=True, slots=True, kw_only=True)
class EndpointInfo:
    """What the checks learned; the run can warn when the endpoint reports less than asked."""

    url: str  # the completions URL that answered
    models: tuple[str, ...] | None  # from /v1/models; None when the server has no such route
    reports_usage: bool  # usage arrived: output token counts are the server's, not chunk counts
    reports_cached_tokens: bool  # prompt_tokens_details.cached_tokens: prefix reuse is measurable
    served_by: str | None  # the worker id of the test request, when the endpoint tells


def _model_list(models: tuple[str, ...]) -> str:
    shown = ", ".join(models[:_SHOWN_MODELS])
    if len(models) > _SHOWN_MODELS:
        shown += f" and {len(models) - _SHOWN_MODELS} more"
    return shown or "none"


async def preflight(
    base_url: str,
    *,
    model: str,
    api_key: str | None = None,
    headers: Mapping[str, str] | None = None,
    kind: Literal["chat", "completions"] = "chat",
    stream: bool = True,
    want_worker_id: bool = False,
    timeout_s: float = 10.0,
    transport: httpx.AsyncBaseTransport | None = None,
) -> EndpointInfo:
    """Validate `base_url` for a run of `model`; raise `EndpointError` if it cannot serve it.

    Send the test request as the run will (`kind`, `stream`, `want_worker_id`): an endpoint
    that rejects Dynamo's `nvext` (api.openai.com does) should fail here, not mid-run.
    """
    timeouts = Timeouts(connect_s=timeout_s, read_s=timeout_s, total_s=2 * timeout_s)
    async with InferenceClient(
        base_url,
        concurrency=1,
        api_key=api_key,
        headers=headers,
        timeouts=timeouts,
        transport=transport,
    ) as client:
        models = await _list_models(client, model=model, has_key=bool(api_key))
        request: InferenceRequest
        if kind == "chat":
            request = ChatRequest(
                model=model,
                messages=[{"role": "user", "content": "Say OK."}],
                max_tokens=1,
                stream=stream,
                want_worker_id=want_worker_id,
            )
        else:
            request = CompletionRequest(
                model=model,
                prompt="Say OK.",
                max_tokens=1,
                stream=stream,
                want_worker_id=want_worker_id,
            )
        url = str(client.url(request.path))
        record = await client.send(request)
        if record.error is not None:
            raise _diagnose(record, url=url, model=model, models=models, has_key=bool(api_key))
        return EndpointInfo(
            url=url,
            models=models,
            reports_usage=record.prompt_tokens is not None,
            reports_cached_tokens=record.cached_tokens is not None,
            served_by=record.served_by,
        )


async def _list_models(
    client: InferenceClient, *, model: str, has_key: bool
) -> tuple[str, ...] | None:
    url = str(client.url("/v1/models"))
    try:
        response = await client.get("/v1/models")
    except httpx.ConnectError as exc:
        raise EndpointError(
            f"cannot reach {url} ({client.redact(str(exc))}); check the URL and that the "
            f"server is running",
            url=url,
        ) from None
    except httpx.ConnectTimeout:
        raise EndpointError(
            f"cannot reach {url}: no connection within the timeout; check the host, port "
            f"and firewall",
            url=url,
        ) from None
    except httpx.TimeoutException:
        raise EndpointError(
            f"{url} accepted a connection but did not answer in time; check that the server "
            f"is healthy and speaks plain HTTP on that port",
            url=url,
        ) from None
    except httpx.HTTPError as exc:
        raise EndpointError(
            f"{url} broke off the exchange ({client.redact(str(exc))}); check that the port "
            f"serves HTTP (not HTTPS or another protocol)",
            url=url,
        ) from None
    status = response.status_code
    if status in (401, 403):
        raise EndpointError(_key_message(url, status, has_key), url=url)
    if status != 200:
        return None  # some servers have no /v1/models (404) or fail it: the test request decides
    try:
        data = json.loads(response.content)["data"]
        ids = tuple(str(entry["id"]) for entry in data)
    except (ValueError, KeyError, TypeError):
        content_type = response.headers.get("content-type", "no content type")
        snippet = client.redact(response.content[:80].decode("utf-8", "replace"))
        raise EndpointError(
            f"{url} did not answer like an OpenAI-compatible API ({content_type}: {snippet}); "
            f"point the URL at the API root, e.g. http://host:8000/v1",
            url=url,
        ) from None
    if model not in ids:
        raise EndpointError(
            f"model {model!r} is not served by {url}; available: {_model_list(ids)}; "
            f"use one of these names",
            url=url,
        )
    return ids


def _key_message(url: str, status: int, has_key: bool) -> str:
    if has_key:
        return f"API key rejected by {url} (HTTP {status}); check the endpoint's API key"
    return f"{url} requires an API key (HTTP {status}); set the endpoint's API key"


def _diagnose(
    record: ResponseResult,
    *,
    url: str,
    model: str,
    models: tuple[str, ...] | None,
    has_key: bool,
) -> EndpointError:
    detail = record.error_detail or ""
    category = record.error
    if category is ErrorCategory.CONNECT:
        message = f"cannot reach {url} ({detail}); check the URL and that the server is running"
    elif record.status in (401, 403):
        message = _key_message(url, record.status, has_key)
    elif category is ErrorCategory.HTTP_4XX and "model" in detail.lower():
        known = f"; available: {_model_list(models)}" if models is not None else ""
        message = f"{url} rejected model {model!r} ({detail}){known}; check the model name"
    elif category is ErrorCategory.HTTP_4XX and record.status == 404:
        message = f"no completions route at {url} ({detail}); check the URL and endpoint type"
    elif category is ErrorCategory.HTTP_4XX:
        message = f"{url} rejected a 1-token test request ({detail}); check the endpoint options"
    elif category is ErrorCategory.HTTP_429:
        message = f"{url} is rate-limiting already ({detail}); wait or raise its limit"
    elif category is ErrorCategory.HTTP_5XX:
        message = f"{url} failed a 1-token test request ({detail}); check the server's logs"
    elif category is ErrorCategory.TIMEOUT:
        message = f"{url} did not answer a 1-token test request in time ({detail}); check its load"
    elif category is ErrorCategory.BAD_PAYLOAD:
        message = (
            f"{url} did not answer like an OpenAI-compatible endpoint ({detail}); check the URL "
            f"and endpoint type"
        )
    else:
        message = f"{url} broke off a 1-token test answer ({detail}); check the server's logs"
    return EndpointError(message, url=url)
