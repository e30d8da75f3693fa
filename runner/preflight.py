"""`check_endpoint`: the engine's preflight as one blocking call ("test connection").

Callers outside an event loop (a web view, a form) get the same checks a run makes first,
with the same one-line `EndpointError` messages; nothing is sent beyond one 1-token request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from runner.client import EndpointInfo, preflight
from runner.wallclock.probe import AffinityDetection, detect_affinity

__all__ = ["check_affinity", "check_endpoint"]


def check_endpoint(
    url: str,
    *,
    model: str,
    api_key: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 10.0,
    want_worker_id: bool = False,
) -> EndpointInfo:
    """What the endpoint reports (models, usage, cached tokens, worker ids), or EndpointError
    saying what is wrong and how to fix it."""
    return asyncio.run(
        preflight(
            url,
            model=model,
            api_key=api_key,
            headers=headers,
            want_worker_id=want_worker_id,
            timeout_s=timeout_s,
        )
    )


def check_affinity(
    url: str,
    *,
    model: str,
    api_key: str | None = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 30.0,
) -> AffinityDetection:
    """Which Dynamo affinity generation the endpoint speaks, whether header affinity is on,
    and the affinity modes that will work there (a handful of one-token requests). Run it
    after `check_endpoint` passed: connection trouble raises httpx errors here."""
    return asyncio.run(
        detect_affinity(url, model=model, api_key=api_key, headers=headers, timeout_s=timeout_s)
    )
