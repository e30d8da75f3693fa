"""Outbound webhooks: where they may go, how they are signed, how one is delivered.

A webhook URL is outbound traffic with an allowlist of its own, AIPERF_WEBHOOK_ALLOWLIST (the
same entries as core/outbound.py's), apart from AIPERF_OUTBOUND_ALLOWLIST: an operator lets
webhooks reach chat or CI hosts without letting benchmark traffic go there, and the reverse.
Whatever the list says, a webhook never reaches this service's own parts: its own port (the
one `serve` listens on, AIPERF_SERVE_PORT, and AIPERF_PUBLIC_URL's), the built-in mock's,
every built-in endpoint's (the real Dynamo, the real vLLM: `webhook_reserve`, which the
endpoints app feeds from its is_builtin rows) and its database's and Redis's, on this machine
(loopback, any local address) or on the host those addresses name. Otherwise a member's
webhook could POST to the shared mock's /admin/reset, or to the service's own API. Both checks
run when the URL is saved and again at every send (a name may resolve elsewhere by then, a
built-in server may have moved to the port since). http(s) only.

Delivery is one POST of a JSON body, no redirects followed (a redirect could lead outside the
allowlist or to a reserved port), a short timeout, and one retry after a transport error, a
429 or a 5xx; it never raises: the caller records the outcome line.

With a secret, `X-Aiperf-Signature: sha256=<hex>` is the HMAC-SHA256 of the exact body bytes
under the secret (as GitHub signs its webhooks): the receiver recomputes it over the raw body
and compares in constant time. Secrets are stored encrypted (core/crypto.py).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol, TypedDict
from urllib.parse import urlsplit

import httpx
from django.conf import settings

from aiperf_web.core.crypto import decrypt_secret, encrypt_secret
from aiperf_web.core.errors import Invalid
from aiperf_web.core.limits import WEBHOOK_SECRET_CHARS, WEBHOOK_URL_CHARS, text_within
from aiperf_web.core.outbound import check_outbound_url

__all__ = [
    "SIGNATURE_HEADER",
    "Delivery",
    "WebhookOwner",
    "webhook_check_url",
    "webhook_deliver",
    "webhook_posted",
    "webhook_reserve",
    "webhook_secret_token",
    "webhook_set",
    "webhook_signature",
]

SIGNATURE_HEADER: Final = "X-Aiperf-Signature"
EVENT_HEADER: Final = "X-Aiperf-Event"
TIMEOUT_S: Final = 5.0  # per try: a slow receiver must not hold a worker for long
RETRY_AFTER_S: Final = 1.0


# Sources of the URLs of the built-in servers (the endpoints app registers its is_builtin rows).
_reserved_sources: list[Callable[[], Iterable[str]]] = []


def webhook_reserve(source: Callable[[], Iterable[str]]) -> None:
    """`source()` names URLs of this service's own servers: no webhook may reach their ports
    (on their host, or on this machine when they are local)."""
    _reserved_sources.append(source)


def _reserved_urls() -> list[str]:
    urls = [
        settings.AIPERF_PUBLIC_URL,
        settings.AIPERF_MOCK_URL or f"http://127.0.0.1:{settings.AIPERF_MOCK_PORT}",
        settings.DATABASE_URL,
        settings.REDIS_URL,
    ]
    if settings.AIPERF_SERVE_PORT:
        urls.append(f"http://127.0.0.1:{settings.AIPERF_SERVE_PORT}")
    for source in _reserved_sources:
        urls.extend(source())
    return [url for url in urls if url]


_DEFAULT_PORTS = {"http": 80, "https": 443, "postgres": 5432, "postgresql": 5432, "redis": 6379}


def _host_port(url: str) -> tuple[str, int] | None:
    try:
        parts = urlsplit(url)
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return None
    if port is None:
        return None
    return (parts.hostname or "").rstrip(".").lower(), port


def _addresses(host: str) -> set[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        return {ipaddress.ip_address(host)}
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except (OSError, UnicodeError):
        return set()
    found = set()
    for info in infos:
        try:
            found.add(ipaddress.ip_address(str(info[4][0]).split("%")[0]))
        except ValueError:
            continue
    return found


def _own_addresses() -> set[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    return _addresses(socket.gethostname())


def _local(addresses: set[ipaddress.IPv4Address | ipaddress.IPv6Address], host: str) -> bool:
    """This machine: a loopback or unspecified address, or one of its own (or no host)."""
    if not host or host == "localhost":
        return True
    own = _own_addresses()
    return any(a.is_loopback or a.is_unspecified or a in own for a in addresses)


def webhook_reserved(url: str) -> str | None:
    """Why `url` would reach one of this service's own servers, or None when it does not."""
    target = _host_port(url)
    if target is None:
        return None
    host, port = target
    addresses: set[ipaddress.IPv4Address | ipaddress.IPv6Address] | None = None
    for reserved in _reserved_urls():
        mine = _host_port(reserved)
        if mine is None or mine[1] != port:
            continue
        if addresses is None:
            addresses = _addresses(host)
        theirs = _addresses(mine[0])
        if (
            host == mine[0]
            or addresses & theirs
            or (_local(addresses, host) and _local(theirs, mine[0]))
        ):
            return (
                f"port {port} of {host} is one of this service's own (its site, the built-in "
                "mock, a built-in endpoint, its database or Redis): webhooks never go there"
            )
    return None


def _check(url: str, *, field: str) -> None:
    check_outbound_url(
        url,
        field=field,
        allowlist=settings.AIPERF_WEBHOOK_ALLOWLIST,
        setting="AIPERF_WEBHOOK_ALLOWLIST",
    )
    reserved = webhook_reserved(url)
    if reserved is not None:
        raise Invalid.field(field, reserved)


@dataclass(frozen=True, slots=True)
class Delivery:
    ok: bool
    message: str  # one line for the run log: where, what came back, after how many tries


def webhook_check_url(url: str, *, field: str = "webhook_url") -> str:
    """The URL, stripped, when it may receive webhooks; Invalid naming `field` otherwise.
    Blank is allowed (no webhook)."""
    url = url.strip()
    if not url:
        return ""
    text_within(url, field=field, limit=WEBHOOK_URL_CHARS)
    try:
        scheme = urlsplit(url).scheme
    except ValueError:
        scheme = ""
    if scheme not in ("http", "https"):
        raise Invalid.field(field, "must be an http:// or https:// URL")
    _check(url, field=field)
    return url


def webhook_secret_token(secret: str, *, field: str = "webhook_secret") -> str:
    """A new secret as stored (encrypted); blank stays blank."""
    if not secret:
        return ""
    text_within(secret, field=field, limit=WEBHOOK_SECRET_CHARS)
    return encrypt_secret(secret)


class WebhookOwner(Protocol):
    """A model with a webhook (a team, a scenario)."""

    webhook_url: str
    webhook_secret: str

    def save(self, *, update_fields: list[str]) -> None: ...


def webhook_set(
    owner: WebhookOwner, *, url: str, secret: str = "", clear_secret: bool = False
) -> None:
    """Set an owner's webhook: a blank URL removes it (and its secret); a new secret replaces
    the stored one, `clear_secret` removes it, neither keeps it (it signs, it is never sent)."""
    owner.webhook_url = webhook_check_url(url)
    if not owner.webhook_url or clear_secret:
        owner.webhook_secret = ""
    elif secret:
        owner.webhook_secret = webhook_secret_token(secret)
    owner.save(update_fields=["webhook_url", "webhook_secret"])


class WebhookChange(TypedDict):
    url: str
    secret: str
    clear_secret: bool


def webhook_posted(data: Mapping[str, str]) -> WebhookChange:
    """What the webhook form (templates/core/_webhook.html, a team's or a scenario's) posted,
    as `webhook_set` and the owners' services take it."""
    return {
        "url": data.get("webhook_url", ""),
        "secret": data.get("webhook_secret", ""),
        "clear_secret": bool(data.get("webhook_clear_secret")),
    }


def webhook_signature(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def webhook_deliver(
    url: str, *, body: bytes, event: str, secret_token: str = "", timeout_s: float = TIMEOUT_S
) -> Delivery:
    """POST `body` (JSON) to `url`; at most two tries. Never raises."""
    try:
        _check(url, field="webhook_url")
    except Invalid as exc:
        return Delivery(False, f"webhook {url} not called: {exc}")
    headers = {"Content-Type": "application/json", EVENT_HEADER: event}
    if secret_token:
        secret = decrypt_secret(secret_token)
        if secret is None:
            # Encrypted under another key (SECRET_KEY rotated): unsigned would mislead.
            return Delivery(
                False, f"webhook {url} not called: its secret is unreadable, enter it again"
            )
        headers[SIGNATURE_HEADER] = webhook_signature(body, secret)
    outcome = ""
    for attempt in (1, 2):
        try:
            with httpx.Client(timeout=timeout_s, follow_redirects=False, trust_env=False) as c:
                response = c.post(url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            outcome = f"{type(exc).__name__}: {str(exc)[:120] or 'no answer'}"
        else:
            if response.status_code < 300:
                tries = "" if attempt == 1 else " (second try)"
                return Delivery(True, f"webhook {url} answered {response.status_code}{tries}")
            outcome = f"HTTP {response.status_code}"
            if response.status_code != 429 and response.status_code < 500:
                break  # the receiver refused this body: the same body would be refused again
        if attempt == 1:
            time.sleep(RETRY_AFTER_S)
    return Delivery(False, f"webhook {url} failed: {outcome}")
