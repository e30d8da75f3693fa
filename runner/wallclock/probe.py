"""What affinity an endpoint really speaks, found from its own answers before a run starts.

Dynamo's affinity contract changed between generations (docs/product.md §4.5): 1.2.x takes
`nvext.session_control` with `open`/`close`; development builds also took `bind`; releases from
1.3 on have no `session_control` (HTTP 400 "unknown field") and pin sessions by the
`X-Dynamo-Session-ID` header, but only when the frontend runs with
`--router-session-affinity-ttl-secs`. A run that guessed wrong would fail every request, or
silently do nothing. So:

- the generation comes from one request whose `session_control.action` is a variant no server
  knows: serde's 400 lists the actions the server does know (`bind` or not), a 400 naming the
  unknown field `session_control` means the header generation, and success means the server
  ignores `session_control` altogether (not Dynamo, or its nvext disabled);
- header affinity is on when requests carrying one session id keep landing on the worker the
  first one bound, even when the prefix cache pulls their prompt to another worker (found by
  sending a prompt without a session first), while the same prompts without the session go
  elsewhere; the serving worker comes from
  `nvext.extra_fields: ["worker_id"]`.

Nothing here binds a real key for long: probe ids are random and used for a handful of
one-token requests.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from runner.affinity.emitters import AffinityConfig, AffinityKind
from runner.client import ChatRequest, InferenceClient, Timeouts
from runner.dynamo import SESSION_HEADER, Generation, NvextActions
from runner.errors import BadInput
from runner.spec import accepted_affinities

__all__ = ["AffinityDetection", "detect_affinity", "probe_affinity"]

_UNKNOWN_ACTION = "aiperf-probe"  # a session_control action no server knows
_MESSAGE_LIMIT = 4000  # a server message is shown whole, within reason
_PROBE_WORDS = 240  # long enough to fill several KV blocks, so the prefix cache has a pull
_PLACEMENT_TRIES = 4  # prompts sent without a session to find one cached off the bound worker
_PINNED_REQUESTS = 4  # requests under the bound id that must all stay on its worker
_ROUNDS = 2  # a round without contrast is tried again once
_ROUND_WAIT_S = 0.5


@dataclass(frozen=True, slots=True, kw_only=True)
class AffinityDetection:
    """What the endpoint accepts, in its own words, and which affinity modes will work."""

    # The Dynamo generation its session_control answer names (runner.dynamo.Generation); None:
    # not Dynamo's session_control (ignored, or nvext refused: `server_message` then says how).
    generation: Generation | None
    # X-Dynamo-Session-ID pins requests to a worker; None when it cannot be told (the server
    # reports no worker ids, or every request landed on one worker).
    header_affinity: bool | None
    server_message: str | None  # the server's full answer to the session_control probe
    summary: str  # one plain line for people

    @property
    def usable(self) -> tuple[str, ...]:
        """The affinity modes that will work here (runner.spec.accepted_affinities)."""
        return accepted_affinities(
            dynamo=True,
            detected=True,
            generation=self.generation,
            header_affinity=self.header_affinity,
        )

    @property
    def nvext_actions(self) -> NvextActions | None:
        """The actions `dynamo-nvext` must use on this server, when it can be used at all."""
        return None if self.generation is None else self.generation.nvext_actions


async def detect_affinity(
    endpoint: str,
    *,
    model: str,
    api_key: str | None = None,
    headers: Mapping[str, str] | None = None,
    check_headers: bool = True,
    timeout_s: float = 30.0,
) -> AffinityDetection:
    """Ask the endpoint which affinity generation it speaks and whether header affinity is
    on. Connection trouble raises httpx errors; the run's preflight has ruled them out."""
    async with _client(endpoint, api_key, headers, timeout_s) as client:
        generation, message = await _generation(client, model)
        header_affinity = await _header_affinity(client, model) if check_headers else None
    return AffinityDetection(
        generation=generation,
        header_affinity=header_affinity,
        server_message=message,
        summary=_summary(generation, header_affinity, checked=check_headers),
    )


async def probe_affinity(
    endpoint: str,
    *,
    model: str,
    affinity: AffinityConfig,
    api_key: str | None,
    headers: Mapping[str, str],
) -> AffinityDetection | None:
    """Check the run's affinity mode against what the endpoint speaks; raise BadInput saying
    what to use instead when it would fail or do nothing. None when the run sends no Dynamo
    affinity. The verdict is the detection's `usable` (runner.spec.accepted_affinities, the
    launch's own answer); a header check that cannot tell lets the run go (the detection says
    why)."""
    kind = affinity.kind
    if kind not in (AffinityKind.DYNAMO_NVEXT, AffinityKind.DYNAMO_HEADERS):
        return None
    nvext = kind is AffinityKind.DYNAMO_NVEXT
    found = await detect_affinity(
        endpoint, model=model, api_key=api_key, headers=headers, check_headers=not nvext
    )
    if kind.value not in found.usable:
        raise BadInput(_refusal(endpoint, kind, found))
    if nvext:
        _check_actions(endpoint, affinity, found)
        await _open_and_close(endpoint, model, affinity, api_key, headers)
    return found


_HEADERS_OFF_ADVICE = (
    "Start the Dynamo frontend with --router-session-affinity-ttl-secs N (and --router-mode kv) "
    "to turn header affinity on, or run with --affinity none."
)


def _refusal(endpoint: str, kind: AffinityKind, found: AffinityDetection) -> str:
    """Why `kind` is not among the modes `found` accepts, and what to use instead."""
    said = f" The server said: {found.server_message}" if found.server_message else ""
    generation = found.generation
    if kind is AffinityKind.DYNAMO_HEADERS:
        if generation is not None and not generation.header_affinity:
            return (
                f"{endpoint} is {generation.label}, which has no header affinity: use "
                f"--affinity dynamo-nvext --affinity-actions {generation.nvext_actions}."
            )
        return (
            f"{endpoint} ignores {SESSION_HEADER}: requests under one session id landed on "
            f"different workers. {_HEADERS_OFF_ADVICE}" + _nvext_hint(found)
        )
    if generation is not None:
        return (
            f"{endpoint} has no nvext.session_control ({generation.label}): use "
            f"--affinity dynamo-headers with the same --scope (the frontend needs "
            f"--router-session-affinity-ttl-secs N).{said}"
        )
    what = (
        f"refuses Dynamo's nvext ({found.server_message})"
        if found.server_message
        else "accepts nvext.session_control but ignores it"
    )
    return (
        f"{endpoint} {what}: it is not a Dynamo frontend (or its nvext is disabled), so "
        f"dynamo-nvext would change nothing. Use --affinity header with the server's own "
        f"session header, or --affinity none."
    )


def _check_actions(endpoint: str, affinity: AffinityConfig, found: AffinityDetection) -> None:
    """dynamo-nvext works here; its opening action must be one the generation knows."""
    generation = found.generation
    if generation is not None and affinity.actions not in generation.session_actions:
        said = f" The server said: {found.server_message}" if found.server_message else ""
        known = " and ".join(generation.session_actions)
        raise BadInput(
            f"{endpoint} is {generation.label}: its session_control knows {known}, not "
            f"{affinity.actions}: use --affinity-actions {generation.nvext_actions}.{said}"
        )


def _nvext_hint(found: AffinityDetection) -> str:
    if found.nvext_actions is None:
        return ""
    return (
        f" This server takes nvext.session_control: --affinity dynamo-nvext "
        f"--affinity-actions {found.nvext_actions} works without that flag."
    )


def _summary(generation: Generation | None, header_affinity: bool | None, *, checked: bool) -> str:
    if generation is None:
        what = "no Dynamo session_control (the server ignores or refuses nvext)"
    elif generation.session_control:
        what = (
            f"{generation.label}: dynamo-nvext with --affinity-actions {generation.nvext_actions}"
        )
    else:
        what = f"{generation.label}, without session_control: use dynamo-headers"
    if not checked:
        return what
    if header_affinity is True:
        pinned = f"{SESSION_HEADER} pins sessions (header affinity on)"
    elif header_affinity is False:
        pinned = (
            f"{SESSION_HEADER} changes nothing (header affinity off: the frontend needs "
            f"--router-session-affinity-ttl-secs)"
        )
    else:
        pinned = f"whether {SESSION_HEADER} pins sessions cannot be told here"
    return f"{what}; {pinned}"


def _client(
    endpoint: str, api_key: str | None, headers: Mapping[str, str] | None, timeout_s: float
) -> InferenceClient:
    return InferenceClient(
        endpoint,
        concurrency=1,
        api_key=api_key,
        headers=headers,
        timeouts=Timeouts(connect_s=10.0, read_s=timeout_s, total_s=2 * timeout_s),
    )


# serde's texts: "unknown variant `x`, expected `open` or `close`" (1.2.x), "... expected one
# of `open`, `bind`, `close`" (bind-era), "unknown field `session_control`, expected ..." (1.3+).
_VARIANTS = re.compile(r"unknown variant `[^`]*`, expected (.*)")
_UNKNOWN_FIELD = re.compile(r"unknown field `session_control`")
# The generation that refuses the field (the newest such, when there were several).
_WITHOUT_SESSION_CONTROL = [g for g in Generation if not g.session_control][-1]


def _generation_knowing(actions: set[str]) -> Generation:
    """The generation whose session_control knows exactly `actions` (serde listed them), else
    the one that knows most of them."""
    speaking = [g for g in Generation if g.session_control]
    for generation in speaking:
        if set(generation.session_actions) == actions:
            return generation
    return max(speaking, key=lambda g: len(actions & set(g.session_actions)))


async def _generation(client: InferenceClient, model: str) -> tuple[Generation | None, str | None]:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "probe"}],
        "max_tokens": 1,
        "stream": False,
        "nvext": {
            "session_control": {"session_id": _probe_id(), "action": _UNKNOWN_ACTION},
        },
    }
    response = await client.post_json("/v1/chat/completions", body)
    if response.status_code < 300:
        return None, None
    message = _server_message(response)
    if response.status_code == 400:
        if _UNKNOWN_FIELD.search(message):
            return _WITHOUT_SESSION_CONTROL, message
        variants = _VARIANTS.search(message)
        if variants is not None:
            return _generation_knowing(set(re.findall(r"`([^`]*)`", variants.group(1)))), message
        return None, message  # a server that is not Dynamo refusing nvext
    raise BadInput(
        f"{client.url('/v1/chat/completions')} answered a session_control probe with HTTP "
        f"{response.status_code}, which no Dynamo generation gives: {message}"
    )


async def _header_affinity(client: InferenceClient, model: str) -> bool | None:
    """True when one session id keeps its first worker against the prefix cache's pull, while
    the same prompts without the session go elsewhere. A round without that contrast (the
    router learns the cache from KV events a little later) is tried once more."""
    for attempt in range(_ROUNDS):
        if attempt:
            await asyncio.sleep(_ROUND_WAIT_S)
        verdict = await _header_affinity_round(client, model)
        if verdict is not None:
            return verdict
    return None


async def _header_affinity_round(client: InferenceClient, model: str) -> bool | None:
    session = {SESSION_HEADER: _probe_id()}
    bound = await _served_by(client, model, _prompt(), session)
    if bound is None:
        return None  # no worker ids: placement cannot be seen
    elsewhere: str | None = None
    for _ in range(_PLACEMENT_TRIES):
        prompt = _prompt()
        served = await _served_by(client, model, prompt, None)
        if served is not None and served != bound:
            elsewhere = prompt  # now cached on another worker: the cache pulls toward it
            break
    if elsewhere is None:
        return None  # every request went to one worker: nothing can tell affinity apart
    # Each group in a row, never interleaved: a round-robin router alternating between two
    # workers would otherwise put every pinned request on the bound worker by turn alone.
    for i in range(_PINNED_REQUESTS):
        if await _served_by(client, model, f"{elsewhere} and {i}", session) != bound:
            return False
    free = [
        await _served_by(client, model, f"{elsewhere} or {i}", None)
        for i in range(_PINNED_REQUESTS)
    ]
    if all(served == bound for served in free):
        return None  # without the session they stayed too: no evidence either way
    return True


async def _served_by(
    client: InferenceClient, model: str, prompt: str, headers: Mapping[str, str] | None
) -> str | None:
    request = ChatRequest(
        model=model,
        messages=[{"role": "user", "content": prompt}],
        max_tokens=1,
        want_worker_id=True,
    )
    result = await client.send(request, headers=headers)
    return result.served_by if result.ok else None


async def _open_and_close(
    endpoint: str,
    model: str,
    affinity: AffinityConfig,
    api_key: str | None,
    headers: Mapping[str, str],
) -> None:
    """Send the run's own opening action and a close under a throwaway key: Dynamo 1.2.x
    refuses `open` unless its backend runs streaming sessions."""
    key = _probe_id()
    opening = {"session_id": key, "action": affinity.actions, "timeout": affinity.timeout_s}
    closing = {"session_id": key, "action": "close"}
    async with _client(endpoint, api_key, headers, 30.0) as client:
        for control in (opening, closing):
            body = {
                "model": model,
                "messages": [{"role": "user", "content": "probe"}],
                "max_tokens": 1,
                "stream": False,
                "nvext": {"session_control": control},
            }
            response = await client.post_json("/v1/chat/completions", body)
            if response.status_code >= 300:
                advice = (
                    " Dynamo 1.2.x opens sessions only on backends started with "
                    "--enable-streaming-session."
                    if control["action"] == "open"
                    else ""
                )
                raise BadInput(
                    f"{endpoint} refuses nvext.session_control action {control['action']!r} "
                    f"with HTTP {response.status_code}: {_server_message(response)}.{advice} "
                    f"Run with --affinity none to skip server-side affinity."
                )


def _server_message(response: httpx.Response) -> str:
    """The error text the server gave, whole (within a limit), on one line."""
    text = response.content.decode("utf-8", "replace")
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    if isinstance(payload, dict):
        error = payload.get("error", payload.get("message", payload.get("detail")))
        if isinstance(error, dict):
            error = error.get("message", error)
        if error is not None:
            text = error if isinstance(error, str) else json.dumps(error)
    text = " ".join(text.split()) or response.reason_phrase
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 1] + "…"


def _probe_id() -> str:
    return f"aiperf-web-probe-{uuid.uuid4().hex[:12]}"


def _prompt() -> str:
    """A prompt no other request shares: no cache anywhere pulls it to a worker at first."""
    seed = uuid.uuid4().hex
    return " ".join(f"{seed[i % 32]}{i}" for i in range(_PROBE_WORDS))
