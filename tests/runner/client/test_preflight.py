"""Preflight: one clear line for each way an endpoint can be wrong before a run."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import pytest

from runner.client import EndpointError, EndpointInfo, preflight
from runner.errors import BadInput

if TYPE_CHECKING:  # the fixture's types, for annotations only
    from .conftest import Received, Reply, Wire

KEY = "sk-preflight-SECRET-42"
MODELS = {"object": "list", "data": [{"id": "llama-3-8b"}, {"id": "qwen-7b"}]}


def scripted(
    wire: Wire,
    *,
    models: Callable[[Reply], Awaitable[None]] | None = None,
    completion: Callable[[Received, Reply], Awaitable[None]] | None = None,
) -> Callable[[Received, Reply], Awaitable[None]]:
    """A server whose /v1/models and completions routes behave as given (default: healthy)."""

    async def handler(request: Received, reply: Reply) -> None:
        if request.path == "/v1/models":
            if models is None:
                await reply.send(wire.json_response(200, MODELS))
            else:
                await models(reply)
        elif completion is None:
            events = [wire.delta("OK", finish="length", nvext={"worker_id": 3})]
            await reply.send(wire.stream(*events, wire.usage(12, 1, cached=0), wire.DONE))
        else:
            await completion(request, reply)

    return handler


def check(
    wire: Wire, handler: Callable[[Received, Reply], Awaitable[None]], **options: Any
) -> tuple[EndpointInfo | EndpointError, list[Received]]:
    async def main() -> tuple[EndpointInfo | EndpointError, list[Received]]:
        async with wire.serve(handler) as server:
            options.setdefault("model", "llama-3-8b")
            try:
                return await preflight(server.url, **options), server.requests
            except EndpointError as exc:
                return exc, server.requests

    return asyncio.run(main())


def failure(outcome: EndpointInfo | EndpointError) -> str:
    assert isinstance(outcome, EndpointError), outcome
    message = str(outcome)
    assert "\n" not in message and KEY not in message
    return message


def test_a_healthy_endpoint_passes_and_reports_what_it_measures(wire: Wire) -> None:
    info, requests = check(wire, scripted(wire), api_key=KEY, want_worker_id=True)
    assert isinstance(info, EndpointInfo)
    assert info.models == ("llama-3-8b", "qwen-7b")
    assert info.url.endswith("/v1/chat/completions")
    assert info.reports_usage and info.reports_cached_tokens and info.served_by == "3"
    probe = requests[1].json()
    assert probe["max_tokens"] == 1 and probe["model"] == "llama-3-8b"
    assert probe["nvext"] == {"extra_fields": ["worker_id"]}
    assert requests[1].headers["authorization"] == f"Bearer {KEY}"


def test_the_completions_kind_probes_v1_completions(wire: Wire) -> None:
    info, requests = check(wire, scripted(wire), kind="completions", stream=False)
    assert isinstance(info, EndpointInfo) and requests[1].path == "/v1/completions"
    assert "prompt" in requests[1].json() and "nvext" not in requests[1].json()


def test_an_unreachable_endpoint_says_so() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(EndpointError) as caught:
        asyncio.run(preflight(f"http://127.0.0.1:{port}", model="m"))
    message = str(caught.value)
    assert message.startswith(f"cannot reach http://127.0.0.1:{port}/v1/models")
    assert message.endswith("check the URL and that the server is running")
    assert isinstance(caught.value, BadInput)


def test_a_rejected_api_key_is_named(wire: Wire) -> None:
    async def denied(reply: Reply) -> None:
        await reply.send(wire.json_response(401, {"error": {"message": f"bad key {KEY}"}}))

    outcome, _ = check(wire, scripted(wire, models=denied), api_key=KEY)
    assert failure(outcome).startswith("API key rejected by http://127.0.0.1:")
    assert "(HTTP 401); check the endpoint's API key" in failure(outcome)


def test_a_missing_api_key_is_named(wire: Wire) -> None:
    async def denied(reply: Reply) -> None:
        await reply.send(wire.json_response(401, {"error": "unauthorized"}))

    outcome, _ = check(wire, scripted(wire, models=denied))
    assert "requires an API key (HTTP 401); set the endpoint's API key" in failure(outcome)


def test_a_key_rejected_only_by_the_completions_route_is_named(wire: Wire) -> None:
    async def forbidden(request: Received, reply: Reply) -> None:
        await reply.send(wire.json_response(403, {"error": {"message": "forbidden"}}))

    outcome, _ = check(wire, scripted(wire, completion=forbidden), api_key=KEY)
    assert failure(outcome).startswith("API key rejected by")
    assert "/v1/chat/completions (HTTP 403)" in failure(outcome)


def test_a_wrong_model_lists_the_models_that_exist(wire: Wire) -> None:
    outcome, requests = check(wire, scripted(wire), model="gpt-4o")
    message = failure(outcome)
    assert message.startswith("model 'gpt-4o' is not served by http://127.0.0.1:")
    assert message.endswith("/v1/models; available: llama-3-8b, qwen-7b; use one of these names")
    assert len(requests) == 1  # no test request for a model known to be absent


def test_a_wrong_model_without_a_models_route_quotes_the_servers_refusal(wire: Wire) -> None:
    async def no_route(reply: Reply) -> None:
        await reply.send(wire.json_response(404, {"detail": "Not Found"}))

    async def unknown_model(request: Received, reply: Reply) -> None:
        error = {"error": {"message": "The model `gpt-4o` does not exist.", "code": 404}}
        await reply.send(wire.json_response(404, error))

    outcome, _ = check(
        wire, scripted(wire, models=no_route, completion=unknown_model), model="gpt-4o"
    )
    message = failure(outcome)
    assert "rejected model 'gpt-4o' (HTTP 404: The model `gpt-4o` does not exist.)" in message
    assert message.endswith("; check the model name")


def test_an_html_models_page_is_not_an_openai_api(wire: Wire) -> None:
    async def html(reply: Reply) -> None:
        page = b"<!doctype html><title>Grafana</title>"
        await reply.send(wire.head(content_type="text/html", length=len(page)) + page)

    outcome, _ = check(wire, scripted(wire, models=html))
    message = failure(outcome)
    assert "did not answer like an OpenAI-compatible API (text/html: <!doctype html>" in message
    assert message.endswith("point the URL at the API root, e.g. http://host:8000/v1")


def test_a_non_openai_completion_answer_is_named(wire: Wire) -> None:
    async def no_route(reply: Reply) -> None:
        await reply.send(wire.json_response(404, {"detail": "Not Found"}))

    async def html(request: Received, reply: Reply) -> None:
        page = b"<html>login</html>"
        await reply.send(wire.head(content_type="text/html", length=len(page)) + page)

    outcome, _ = check(wire, scripted(wire, models=no_route, completion=html))
    message = failure(outcome)
    assert "did not answer like an OpenAI-compatible endpoint" in message
    assert "text/html" in message


def test_a_server_error_on_the_test_request_points_at_its_logs(wire: Wire) -> None:
    async def broken(request: Received, reply: Reply) -> None:
        await reply.send(wire.json_response(500, {"error": {"message": "CUDA OOM"}}))

    outcome, _ = check(wire, scripted(wire, completion=broken))
    message = failure(outcome)
    assert "failed a 1-token test request (HTTP 500: CUDA OOM)" in message
    assert message.endswith("check the server's logs")


def test_a_port_that_does_not_speak_http_is_named(wire: Wire) -> None:
    async def ssh(reply: Reply) -> None:
        await reply.send(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
        reply.close()

    outcome, _ = check(wire, scripted(wire, models=ssh))
    message = failure(outcome)
    assert "broke off the exchange" in message
    assert message.endswith("check that the port serves HTTP (not HTTPS or another protocol)")


def test_a_silent_server_times_out_with_advice(wire: Wire) -> None:
    async def silent(reply: Reply) -> None:
        await asyncio.sleep(5)

    outcome, _ = check(wire, scripted(wire, models=silent), timeout_s=0.2)
    assert "accepted a connection but did not answer in time" in failure(outcome)
