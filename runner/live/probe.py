"""Checks a live run makes before its first credit, beyond the endpoint's own preflight.

Dynamo 1.2.x rejects `nvext.session_control` action `bind` with HTTP 400, so a run that binds
against it would fail every request. One probe request with the run's affinity shape finds out
first and says which option to use. The probe binds a throwaway key and closes it at once.
"""

from __future__ import annotations

import uuid

from runner.affinity.emitters import AffinityConfig, AffinityKind
from runner.client import ChatRequest, InferenceClient, Timeouts
from runner.errors import BadInput

__all__ = ["probe_affinity"]


async def probe_affinity(
    endpoint: str,
    *,
    model: str,
    affinity: AffinityConfig,
    api_key: str | None,
    headers: dict[str, str],
) -> None:
    """Raise BadInput when the endpoint refuses the session_control actions the run will send."""
    if affinity.kind is not AffinityKind.DYNAMO_NVEXT:
        return
    key = f"aiperf-web-probe-{uuid.uuid4().hex[:12]}"
    opening = {"session_id": key, "action": affinity.actions, "timeout": affinity.timeout_s}
    closing = {"session_id": key, "action": "close"}
    async with InferenceClient(
        endpoint,
        concurrency=1,
        api_key=api_key,
        headers=headers,
        timeouts=Timeouts(connect_s=10.0, read_s=30.0),
    ) as client:
        for control in (opening, closing):
            request = ChatRequest(
                model=model,
                messages=[{"role": "user", "content": "probe"}],
                max_tokens=1,
                extra_body={"nvext": {"session_control": control}},
            )
            result = await client.send(request)
            if result.status == 400:
                detail = result.error_detail or ""
                advice = (
                    "this looks like Dynamo 1.2.x: use --affinity-actions open"
                    if affinity.actions == "bind"
                    else "check the endpoint's session_control support (--affinity none to skip)"
                )
                raise BadInput(
                    f"{endpoint} rejects nvext.session_control action "
                    f"{control['action']!r} with HTTP 400 ({detail[:160]}); {advice}"
                )
