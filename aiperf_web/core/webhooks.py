"""Outbound webhooks: where they may go, how they are signed, how one is delivered.

A webhook URL is outbound traffic like a benchmark endpoint: http(s) only, and its host under
the same allowlist (core/outbound.py), checked when the URL is saved and again at every send
(a name may resolve elsewhere by then). Delivery is one POST of a JSON body, no redirects
followed (a redirect could lead outside the allowlist), a short timeout, and one retry after a
transport error, a 429 or a 5xx; it never raises: the caller records the outcome line.

With a secret, `X-Aiperf-Signature: sha256=<hex>` is the HMAC-SHA256 of the exact body bytes
under the secret (as GitHub signs its webhooks): the receiver recomputes it over the raw body
and compares in constant time. Secrets are stored encrypted (core/crypto.py).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Protocol, TypedDict
from urllib.parse import urlsplit

import httpx

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
    "webhook_secret_token",
    "webhook_set",
    "webhook_signature",
]

SIGNATURE_HEADER: Final = "X-Aiperf-Signature"
EVENT_HEADER: Final = "X-Aiperf-Event"
TIMEOUT_S: Final = 5.0  # per try: a slow receiver must not hold a worker for long
RETRY_AFTER_S: Final = 1.0


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
    check_outbound_url(url, field=field)
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
        check_outbound_url(url, field="webhook_url")
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
