"""Endpoint API keys at rest: Fernet (AES-128-CBC + HMAC-SHA256). The key is
AIPERF_ENCRYPTION_KEY, else derived from SECRET_KEY (so rotating SECRET_KEY without setting
AIPERF_ENCRYPTION_KEY makes stored keys unreadable: they must be entered again)."""

from __future__ import annotations

import base64
import hashlib
from functools import cache

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


@cache
def _fernet() -> Fernet:
    key = settings.AIPERF_ENCRYPTION_KEY
    if not key:
        digest = hashlib.sha256(b"aiperf-web endpoint keys:" + settings.SECRET_KEY.encode())
        key = base64.urlsafe_b64encode(digest.digest()).decode()
    return Fernet(key)


def encrypt_secret(plain: str) -> str:
    return _fernet().encrypt(plain.encode()).decode()


def decrypt_secret(token: str) -> str | None:
    """The plain secret, or None when it was encrypted with another key."""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        return None
