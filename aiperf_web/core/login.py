"""The login form with a failure throttle per username and per client address.

Too many wrong passwords (AIPERF_LOGIN_MAX_FAILURES within AIPERF_LOGIN_WINDOW_S) for one
username, or from one address, lock that username, or that address, for
AIPERF_LOGIN_LOCKOUT_S: every attempt during the lock is refused without checking the password,
so guessing on goes nowhere, and the form says why and for how long. Counts live in Django's
cache (Redis in production, so every web process shares them; process memory in the embedded
default, which has one web process). A success clears the username's count, not the
address's: one right password must not reset a spray over many names.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.http import HttpRequest


def _key(kind: str, value: str) -> str:
    # Hashed: usernames are free text, and cache keys must be short and plain.
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"login:{kind}:{digest}"


def _subjects(*, username: str, ip: str) -> list[tuple[str, str]]:
    return [("user", username.strip().lower()), ("ip", ip)]


def login_locked_for_s(*, username: str, ip: str) -> int:
    """Seconds left of the longest lock on this username or address; 0 when neither is."""
    left = 0
    for kind, value in _subjects(username=username, ip=ip):
        until = cache.get(_key(f"lock-{kind}", value))
        if until is not None:
            left = max(left, int(float(until) - _now()) + 1)
    return max(left, 0)


def login_failed(*, username: str, ip: str) -> None:
    window_s = settings.AIPERF_LOGIN_WINDOW_S
    lockout_s = settings.AIPERF_LOGIN_LOCKOUT_S
    for kind, value in _subjects(username=username, ip=ip):
        key = _key(f"fail-{kind}", value)
        # add then incr: atomic on Redis, so concurrent guesses are all counted.
        cache.add(key, 0, timeout=window_s)
        try:
            count = cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.set(key, 1, timeout=window_s)
            count = 1
        if count >= settings.AIPERF_LOGIN_MAX_FAILURES:
            cache.set(_key(f"lock-{kind}", value), _now() + lockout_s, timeout=lockout_s)
            cache.delete(key)


def login_succeeded(*, username: str) -> None:
    cache.delete(_key("fail-user", username.strip().lower()))


def _now() -> float:
    return time.time()


def client_ip(request: HttpRequest | None) -> str:
    # REMOTE_ADDR: the peer uvicorn saw, or the X-Forwarded-For client when that peer is a
    # proxy named in AIPERF_TRUSTED_PROXIES (core/proxy.py); never a header the client chose.
    if request is None:
        return ""
    return str(request.META.get("REMOTE_ADDR", ""))


class ThrottledAuthenticationForm(AuthenticationForm):
    error_messages = {
        **AuthenticationForm.error_messages,
        "locked": (
            "Too many failed logins for this user or from this address: try again in %(minutes)s."
        ),
    }

    def clean(self) -> dict[str, Any]:
        username = str(self.data.get("username", ""))
        ip = client_ip(self.request)
        left_s = login_locked_for_s(username=username, ip=ip)
        if left_s:
            raise self._locked(left_s)
        try:
            cleaned = super().clean()
        except ValidationError:
            login_failed(username=username, ip=ip)
            left_s = login_locked_for_s(username=username, ip=ip)
            if left_s:
                raise self._locked(left_s) from None
            raise
        login_succeeded(username=username)
        return cleaned

    def _locked(self, left_s: int) -> ValidationError:
        minutes = max(1, -(-left_s // 60))
        return ValidationError(
            self.error_messages["locked"],
            code="locked",
            params={"minutes": f"{minutes} minute" + ("" if minutes == 1 else "s")},
        )
