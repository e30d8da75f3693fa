"""`check_endpoint`: the engine's preflight as one blocking call ("test connection").

Callers outside an event loop (a web view, a form) get the same checks a run makes first,
with the same one-line `EndpointError` messages; nothing is sent beyond one 1-token request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

from runner.client import EndpointError, EndpointInfo, preflight
from runner.wallclock.probe import AffinityDetection, detect_affinity

__all__ = ["check_affinity", "check_endpoint"]

_T = TypeVar("_T")


def _within(coro: Coroutine[Any, Any, _T], *, url: str, deadline_s: float | None) -> _T:
    """Run `coro` to its end, or stop it at `deadline_s` with an EndpointError: each request has
    its own timeout, but a caller that must answer in time (a web view) needs one for all."""
    if deadline_s is None:
        return asyncio.run(coro)

    async def bounded() -> _T:
        try:
            return await asyncio.wait_for(coro, timeout=deadline_s)
        except TimeoutError:
            host = urlsplit(url).netloc or url
            raise EndpointError(
                f"{host} gave no complete answer within {deadline_s:g} s; check the host, "
                "port and firewall, and that the server is not overloaded",
                url=url,
            ) from None

    return asyncio.run(bounded())


def check_endpoint(
    url: str,
    *,
    model: str,
    api_key: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 10.0,
    want_worker_id: bool = False,
    deadline_s: float | None = None,
) -> EndpointInfo:
    """What the endpoint reports (models, usage, cached tokens, worker ids), or EndpointError
    saying what is wrong and how to fix it. `timeout_s` bounds each request; `deadline_s`, when
    given, the whole check."""
    return _within(
        preflight(
            url,
            model=model,
            api_key=api_key,
            headers=headers,
            want_worker_id=want_worker_id,
            timeout_s=timeout_s,
        ),
        url=url,
        deadline_s=deadline_s,
    )


def check_affinity(
    url: str,
    *,
    model: str,
    api_key: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 30.0,
    deadline_s: float | None = None,
) -> AffinityDetection:
    """Which Dynamo affinity generation the endpoint speaks, whether header affinity is on,
    and the affinity modes that will work there (a handful of one-token requests). Run it
    after `check_endpoint` passed: connection trouble raises httpx errors here (and
    EndpointError past `deadline_s`, when given)."""
    return _within(
        detect_affinity(url, model=model, api_key=api_key, headers=headers, timeout_s=timeout_s),
        url=url,
        deadline_s=deadline_s,
    )
