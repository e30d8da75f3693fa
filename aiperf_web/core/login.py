"""The login form with a failure throttle that no stranger can turn against someone else.

Failures are counted per (username, client address) pair: AIPERF_LOGIN_MAX_FAILURES wrong
passwords within AIPERF_LOGIN_WINDOW_S lock that username from that address for
AIPERF_LOGIN_LOCKOUT_S. Every attempt during a lock is refused without checking the password,
so guessing on goes nowhere, and the form says why and for how long. A stranger's guesses
therefore lock neither the owner at their own address nor the other users behind a shared one.

A guesser with many addresses is held by a slower ceiling per username: past
AIPERF_LOGIN_USER_MAX_FAILURES failures within AIPERF_LOGIN_USER_WINDOW_S from any addresses,
the username is locked for AIPERF_LOGIN_LOCKOUT_S from every address it has not signed in
from within KNOWN_ADDRESS_S; an address it has signed in from goes on answering to the right
password (it still has its own pair count).

Counts live in Django's cache (Redis in production, so every web process shares them; process
memory in the embedded default, which has one web process). A success clears its pair's count
and remembers the address as known; it never clears the username's count (one right password
must not reset a guesser's progress from elsewhere).
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

# How long an address where a username signed in stays its own: past the username's ceiling,
# only such addresses may still try it.
KNOWN_ADDRESS_S = 30 * 86_400


def _key(kind: str, *parts: str) -> str:
    # Hashed: usernames are free text, and cache keys must be short and plain. NUL between the
    # parts: no username and address pair can be spelled as another.
    value = "\x00".join(parts)
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"login:{kind}:{digest}"


def _user(username: str) -> str:
    return username.strip().lower()


def _locked_for_s(key: str) -> int:
    until = cache.get(key)
    return 0 if until is None else max(0, int(float(until) - _now()) + 1)


def login_locked_for_s(*, username: str, ip: str) -> tuple[int, str]:
    """(seconds left of the lock on this username from this address, which lock: "pair" or
    "user"); (0, "") when none holds."""
    user = _user(username)
    left = _locked_for_s(_key("lock-pair", user, ip))
    if left:
        return left, "pair"
    if cache.get(_key("known", user, ip)) is None:
        left = _locked_for_s(_key("lock-user", user))
        if left:
            return left, "user"
    return 0, ""


def _count(key: str, window_s: int) -> int:
    # add then incr: atomic on Redis, so concurrent guesses are all counted.
    cache.add(key, 0, timeout=window_s)
    try:
        return int(cache.incr(key))
    except ValueError:  # expired between add and incr
        cache.set(key, 1, timeout=window_s)
        return 1


def _lock(key: str) -> None:
    lockout_s = settings.AIPERF_LOGIN_LOCKOUT_S
    cache.set(key, _now() + lockout_s, timeout=lockout_s)


def login_failed(*, username: str, ip: str) -> None:
    user = _user(username)
    pair = _key("fail-pair", user, ip)
    if _count(pair, settings.AIPERF_LOGIN_WINDOW_S) >= settings.AIPERF_LOGIN_MAX_FAILURES:
        _lock(_key("lock-pair", user, ip))
        cache.delete(pair)
    anywhere = _key("fail-user", user)
    ceiling = settings.AIPERF_LOGIN_USER_MAX_FAILURES
    if _count(anywhere, settings.AIPERF_LOGIN_USER_WINDOW_S) >= ceiling:
        _lock(_key("lock-user", user))
        cache.delete(anywhere)


def login_succeeded(*, username: str, ip: str) -> None:
    user = _user(username)
    cache.delete(_key("fail-pair", user, ip))
    cache.set(_key("known", user, ip), 1, timeout=KNOWN_ADDRESS_S)


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
        "locked_pair": (
            "Too many failed logins for this user from this address: try again in %(minutes)s."
        ),
        "locked_user": (
            "Too many failed logins for this user from many addresses: it can sign in only "
            "from an address it used before for now; elsewhere, try again in %(minutes)s."
        ),
    }

    def clean(self) -> dict[str, Any]:
        username = str(self.data.get("username", ""))
        ip = client_ip(self.request)
        left_s, which = login_locked_for_s(username=username, ip=ip)
        if left_s:
            raise self._locked(left_s, which)
        try:
            cleaned = super().clean()
        except ValidationError:
            login_failed(username=username, ip=ip)
            left_s, which = login_locked_for_s(username=username, ip=ip)
            if left_s:
                raise self._locked(left_s, which) from None
            raise
        login_succeeded(username=username, ip=ip)
        return cleaned

    def _locked(self, left_s: int, which: str) -> ValidationError:
        minutes = max(1, -(-left_s // 60))
        return ValidationError(
            self.error_messages[f"locked_{which}"],
            code="locked",
            params={"minutes": f"{minutes} minute" + ("" if minutes == 1 else "s")},
        )
