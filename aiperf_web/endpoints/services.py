"""Writes of endpoints, the connection test (with Dynamo's affinity detection), and the run
target an endpoint stands for."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
from django.db import IntegrityError, transaction
from django.utils import timezone

from aiperf_web.core.crypto import decrypt_secret, encrypt_secret
from aiperf_web.core.errors import Conflict, Invalid
from aiperf_web.core.limits import (
    API_KEY_CHARS,
    BASE_URL_CHARS,
    MODEL_CHARS,
    NAME_CHARS,
    headers_within,
    text_within,
)
from aiperf_web.core.outbound import check_outbound_url
from aiperf_web.core.specs import spec_parse
from aiperf_web.core.text import message_quoting_server, text_excerpt
from aiperf_web.endpoints.models import Endpoint, ServerKind
from aiperf_web.teams.models import Role, Team
from aiperf_web.teams.selectors import AnyUser, require_role, user_or_none
from runner import (
    AffinityDetection,
    EndpointTarget,
    RunnerError,
    RunSpec,
    check_affinity,
    check_endpoint,
)

_KEEP = object()

# A connection test answers within 10 s (a person waits on it, and a proxy may cut a longer
# request): the preflight and the Dynamo affinity probe share this budget, each request of
# theirs bounded by TEST_REQUEST_TIMEOUT_S. Before, each request had 10 s and a test could take
# 23 s.
TEST_BUDGET_S = 8.0
TEST_REQUEST_TIMEOUT_S = 5.0
# The stored detection, cleared together (a new URL or kind is another server).
AFFINITY_FIELDS = (
    "affinity_generation",
    "header_affinity",
    "affinity_summary",
    "affinity_server_message",
    "affinity_detected_at",
)


def endpoint_target(*, endpoint: Endpoint) -> dict[str, Any]:
    """The spec's `target` for this endpoint, without its secret."""
    return {
        "kind": "endpoint",
        "url": endpoint.base_url,
        "model": endpoint.model,
        "headers": dict(endpoint.extra_headers or {}),
    }


def endpoint_api_key(*, endpoint: Endpoint) -> str | None:
    if not endpoint.api_key_encrypted:
        return None
    return decrypt_secret(endpoint.api_key_encrypted)


def endpoint_secret_headers(*, endpoint: Endpoint) -> dict[str, str]:
    """The headers marked secret, decrypted ({} when none, or stored under another key)."""
    if not endpoint.secret_headers_encrypted:
        return {}
    plain = decrypt_secret(endpoint.secret_headers_encrypted)
    return {} if plain is None else dict(json.loads(plain))


def endpoint_request_headers(*, endpoint: Endpoint) -> dict[str, str]:
    """Every header a request to the endpoint carries: the plain ones and the secret ones."""
    return {**(endpoint.extra_headers or {}), **endpoint_secret_headers(endpoint=endpoint)}


def endpoint_attach_secrets(*, spec: RunSpec, endpoint: Endpoint) -> RunSpec:
    """The spec with the endpoint's API key and secret headers attached: in the worker's memory
    at run time only, never in the run's stored spec (endpoint_target leaves them out)."""
    spec = spec.with_api_key(endpoint_api_key(endpoint=endpoint))
    secret = endpoint_secret_headers(endpoint=endpoint)
    if not secret or not isinstance(spec.target, EndpointTarget):
        return spec
    target = spec.target.model_copy(update={"headers": {**spec.target.headers, **secret}})
    return spec.model_copy(update={"target": target})


def _store_secret_headers(endpoint: Endpoint, headers: dict[str, str]) -> None:
    endpoint.secret_headers_encrypted = encrypt_secret(json.dumps(headers)) if headers else ""
    endpoint.secret_header_names = sorted(headers)


def _validate_secret_headers(
    secret_headers: Any, *, extra_headers: dict[str, str]
) -> dict[str, str]:
    """The secret headers as given, or Invalid on `secret_headers` that never quotes a value."""
    if not isinstance(secret_headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in secret_headers.items()
    ):
        raise Invalid.field("secret_headers", "must be an object of header name: string value")
    headers_within(secret_headers, field="secret_headers")
    if secret_headers:
        try:
            spec_parse({"target": {"kind": "endpoint", "url": "http://x", "model": "m",
                                   "headers": secret_headers}, "duration_s": 1})  # fmt: skip
        except Invalid:
            raise Invalid.field(
                "secret_headers",
                "names without spaces or colons, values on one line: "
                + ", ".join(sorted(secret_headers)),
            ) from None
    both = {k.lower() for k in secret_headers} & {k.lower() for k in extra_headers}
    if both:
        raise Invalid.field(
            "secret_headers", f"also among the plain extra headers: {', '.join(sorted(both))}"
        )
    return dict(secret_headers)


def _validate(
    *, name: str, base_url: str, model: str, extra_headers: Any, server_kind: str
) -> dict[str, Any]:
    fields: dict[str, str] = {}
    name = name.strip()
    for field, value, limit in (
        ("name", name, NAME_CHARS),
        ("base_url", base_url.strip(), BASE_URL_CHARS),
        ("model", model.strip(), MODEL_CHARS),
    ):
        try:
            text_within(value, field=field, limit=limit)
        except Invalid as exc:
            fields.update(exc.fields)
    if not name:
        fields["name"] = "an endpoint needs a name"
    if server_kind not in ServerKind.values:
        fields["server_kind"] = f"{server_kind!r} is not one of {', '.join(ServerKind.values)}"
    if not isinstance(extra_headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in extra_headers.items()
    ):
        fields["extra_headers"] = "must be an object of header name: string value"
        extra_headers = {}
    try:
        headers_within(extra_headers, field="extra_headers")
    except Invalid as exc:
        fields.update(exc.fields)
        extra_headers = {}
    target = {"kind": "endpoint", "url": base_url.strip(), "model": model.strip()}
    if extra_headers:
        target["headers"] = extra_headers
    try:
        spec = spec_parse({"target": target, "duration_s": 1})
    except Invalid as exc:
        rename = {
            "target.url": "base_url",
            "target.model": "model",
            "target.headers": "extra_headers",
        }
        for key, message in exc.fields.items():
            fields.setdefault(rename.get(key, key), message)
        spec = None
    if spec is not None and "base_url" not in fields:
        try:
            check_outbound_url(spec.target.url if hasattr(spec.target, "url") else base_url)
        except Invalid as exc:
            fields.update(exc.fields)
    if fields:
        raise Invalid("; ".join(f"{k}: {v}" for k, v in fields.items()), fields=fields)
    assert spec is not None
    return {
        "name": name,
        "base_url": getattr(spec.target, "url", base_url),
        "model": model.strip(),
        "extra_headers": extra_headers,
        "server_kind": server_kind,
    }


def endpoint_create(
    *,
    actor: AnyUser,
    team: Team,
    name: str,
    base_url: str,
    model: str,
    api_key: str | None = None,
    extra_headers: Any = None,
    secret_headers: Any = None,
    server_kind: str = ServerKind.OPENAI,
    is_builtin: bool = False,
) -> Endpoint:
    require_role(user=actor, team=team, role=Role.MEMBER)
    if api_key:
        text_within(api_key, field="api_key", limit=API_KEY_CHARS)
    values = _validate(
        name=name,
        base_url=base_url,
        model=model,
        extra_headers=extra_headers or {},
        server_kind=server_kind,
    )
    secrets = _validate_secret_headers(secret_headers or {}, extra_headers=values["extra_headers"])
    if Endpoint.objects.filter(team=team, name=values["name"]).exists():
        raise Conflict.field("name", f"team {team.name} has an endpoint named {values['name']!r}")
    try:
        with transaction.atomic():
            endpoint = Endpoint(
                team=team,
                api_key_encrypted=encrypt_secret(api_key) if api_key else "",
                created_by=user_or_none(actor),
                is_builtin=is_builtin,
                **values,
            )
            _store_secret_headers(endpoint, secrets)
            endpoint.save()
            return endpoint
    except IntegrityError:
        raise Conflict.field("name", "an endpoint with this name exists") from None


def endpoint_update(
    *,
    actor: AnyUser,
    endpoint: Endpoint,
    name: str | None = None,
    base_url: str | None = None,
    model: str | None = None,
    api_key: Any = _KEEP,
    extra_headers: Any = None,
    secret_headers: Any = _KEEP,
    server_kind: str | None = None,
) -> Endpoint:
    """Change what is given. `api_key`: a string replaces it, "" or None clears it, absent
    keeps it (the stored key is never shown, so a form leaves it blank to keep it) unless the
    base URL changes: the key was entered for one server, and a member who points the
    endpoint at a host of their own and presses Test must not receive it there.
    `secret_headers` likewise: an object replaces them all, {} or None clears them, absent
    keeps them unless the base URL changes."""
    require_role(user=actor, team=endpoint.team, role=Role.MEMBER)
    if isinstance(api_key, str):
        text_within(api_key, field="api_key", limit=API_KEY_CHARS)
    values = _validate(
        name=endpoint.name if name is None else name,
        base_url=endpoint.base_url if base_url is None else base_url,
        model=endpoint.model if model is None else model,
        extra_headers=endpoint.extra_headers if extra_headers is None else extra_headers,
        server_kind=endpoint.server_kind if server_kind is None else server_kind,
    )
    secrets = None
    if secret_headers is not _KEEP:
        secrets = _validate_secret_headers(
            secret_headers or {}, extra_headers=values["extra_headers"]
        )
    else:
        kept = {name.lower() for name in endpoint.secret_header_names or ()}
        both = kept & {name.lower() for name in values["extra_headers"]}
        if both:
            raise Invalid.field(
                "extra_headers", f"{', '.join(sorted(both))}: already a secret header"
            )
    clash = Endpoint.objects.filter(team=endpoint.team, name=values["name"]).exclude(pk=endpoint.pk)
    if clash.exists():
        raise Conflict.field("name", f"an endpoint named {values['name']!r} exists")
    other_url = values["base_url"] != endpoint.base_url
    other_server = other_url or values["server_kind"] != endpoint.server_kind
    for key, value in values.items():
        setattr(endpoint, key, value)
    if other_server:
        for name in AFFINITY_FIELDS:
            setattr(endpoint, name, None)
    if api_key is not _KEEP:
        endpoint.api_key_encrypted = encrypt_secret(api_key) if api_key else ""
    elif other_url:
        endpoint.api_key_encrypted = ""
    if secrets is not None:
        _store_secret_headers(endpoint, secrets)
    elif other_url:
        _store_secret_headers(endpoint, {})
    endpoint.save()
    return endpoint


def endpoint_delete(*, actor: AnyUser, endpoint: Endpoint) -> None:
    require_role(user=actor, team=endpoint.team, role=Role.MEMBER)
    endpoint.delete()


def endpoint_test_connection(*, actor: AnyUser, endpoint: Endpoint) -> str:
    """Run the engine's preflight against the endpoint; returns a one-line success message,
    raises Invalid with the preflight's one-line reason. On a Dynamo endpoint it then asks
    which affinity generation the server speaks and stores the answer on the endpoint (launches
    offer only the modes that work there)."""
    require_role(user=actor, team=endpoint.team, role=Role.MEMBER)
    check_outbound_url(endpoint.base_url)
    api_key = endpoint_api_key(endpoint=endpoint)
    headers = endpoint_request_headers(endpoint=endpoint)
    started = time.monotonic()
    try:
        info = check_endpoint(
            endpoint.base_url,
            model=endpoint.model,
            api_key=api_key,
            headers=headers,
            timeout_s=TEST_REQUEST_TIMEOUT_S,
            deadline_s=TEST_BUDGET_S,
        )
    except RunnerError as exc:
        # The engine quotes the server's answer; an internal service's may be a whole page.
        raise Invalid.field("connection", message_quoting_server(str(exc))) from None
    except (httpx.HTTPError, ValueError, UnicodeError, OSError) as exc:
        # A URL the HTTP client will not take (stored before the host checks, say): a reason,
        # never a 500.
        reason = message_quoting_server(str(exc) or type(exc).__name__)
        raise Invalid.field("connection", f"cannot test {endpoint.base_url}: {reason}") from None
    notes = []
    if not getattr(info, "reports_cached_tokens", True):
        notes.append("it reports no cached tokens (prefix_cache_hit_ratio will be unavailable)")
    left_s = TEST_BUDGET_S - (time.monotonic() - started)
    if endpoint.server_kind == ServerKind.DYNAMO and left_s < 0.5:
        notes.append(
            f"its session affinity was not probed: the preflight took the test's {TEST_BUDGET_S:g} "
            "s; test again"
        )
    elif endpoint.server_kind == ServerKind.DYNAMO:
        try:
            found = check_affinity(
                endpoint.base_url,
                model=endpoint.model,
                api_key=api_key,
                headers=headers,
                timeout_s=min(TEST_REQUEST_TIMEOUT_S, left_s),
                deadline_s=left_s,
            )
        except (RunnerError, httpx.HTTPError, ValueError, UnicodeError, OSError) as exc:
            # The server answered the preflight, so this is about affinity only: say so and
            # forget any earlier detection rather than keep a stale one.
            endpoint_affinity_store(endpoint=endpoint, found=None)
            reason = message_quoting_server(str(exc) or type(exc).__name__)
            notes.append(f"its session affinity could not be detected: {reason}")
        else:
            endpoint_affinity_store(endpoint=endpoint, found=found)
            notes.append(f"session affinity: {endpoint.affinity_headline}")
    extra = f"; {'; '.join(notes)}" if notes else ""
    return f"{endpoint.base_url} answers and serves model {endpoint.model}{extra}"


def endpoint_affinity_store(*, endpoint: Endpoint, found: AffinityDetection | None) -> None:
    """Keep what `check_affinity` found (None: forget the last detection)."""
    if found is None:
        values: dict[str, Any] = dict.fromkeys(AFFINITY_FIELDS)
    else:
        values = {
            "affinity_generation": None if found.generation is None else found.generation.value,
            "header_affinity": found.header_affinity,
            "affinity_summary": found.summary,
            # Dynamo's refusal is worth quoting in full; anything else's page is not.
            "affinity_server_message": (
                None
                if found.server_message is None
                else text_excerpt(found.server_message, limit=500)
            ),
            "affinity_detected_at": timezone.now(),
        }
    for name, value in values.items():
        setattr(endpoint, name, value)
    # Only these columns, and only while the URL is the one tested: a concurrent edit is
    # neither overwritten nor given another server's detection.
    Endpoint.objects.filter(pk=endpoint.pk, base_url=endpoint.base_url).update(**values)
