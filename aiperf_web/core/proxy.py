"""Which peer may tell the server who the client is: uvicorn's proxy options from
AIPERF_TRUSTED_PROXIES.

uvicorn on its own believes X-Forwarded-For and X-Forwarded-Proto from 127.0.0.1 (or from
FORWARDED_ALLOW_IPS in the environment), so any local client could give itself a new address
for every login attempt and never meet the per-address lock. Here the headers are read only
when the operator names the proxies, and only from them; otherwise the peer of the socket is
the client.
"""

from __future__ import annotations

from typing import TypedDict

from django.conf import settings


class ProxyOptions(TypedDict):
    proxy_headers: bool
    forwarded_allow_ips: list[str]


def uvicorn_proxy_options() -> ProxyOptions:
    """Keyword arguments of `uvicorn.run`/`uvicorn.Config`: forwarded headers honoured from
    AIPERF_TRUSTED_PROXIES (IPs, CIDRs, or `*` for any peer) and from nobody by default."""
    trusted = list(settings.AIPERF_TRUSTED_PROXIES)
    return {"proxy_headers": bool(trusted), "forwarded_allow_ips": trusted}
