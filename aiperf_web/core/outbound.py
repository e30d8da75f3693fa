"""The outbound allowlist: benchmark traffic goes only to hosts the administrator allows
(AIPERF_OUTBOUND_ALLOWLIST; loopback by default).

An entry is a CIDR or IP (`10.0.0.0/8`, `::1`), a host name (`mock`), a suffix (`*.corp`), or
`*` (anything). A name is allowed when it is listed, or when every address it resolves to is
in an allowed network; a name that does not resolve is refused.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings

from aiperf_web.core.errors import Invalid

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _parse(entries: list[str]) -> tuple[list[Network], list[str], bool]:
    networks: list[Network] = []
    names: list[str] = []
    anything = False
    for entry in entries:
        entry = entry.strip().lower()
        if entry == "*":
            anything = True
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            names.append(entry)
    return networks, names, anything


def host_allowed(host: str, allowlist: list[str] | None = None) -> bool:
    networks, names, anything = _parse(
        settings.AIPERF_OUTBOUND_ALLOWLIST if allowlist is None else allowlist
    )
    if anything:
        return True
    host = host.strip("[]").lower().rstrip(".")
    for name in names:
        if host == name or (name.startswith("*.") and host.endswith(name[1:])):
            return True
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, None)
        except (OSError, UnicodeError):
            return False
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    return bool(addresses) and all(any(a in net for net in networks) for a in addresses)


def check_outbound_url(url: str, *, field: str = "base_url") -> None:
    """Raise Invalid naming `field` when `url`'s host is outside the allowlist."""
    host = urlsplit(url).hostname or ""
    if not host_allowed(host):
        raise Invalid.field(
            field,
            f"host {host or '?'!s} is not in the outbound allowlist "
            f"({', '.join(settings.AIPERF_OUTBOUND_ALLOWLIST)}); "
            "an administrator can extend AIPERF_OUTBOUND_ALLOWLIST",
        )
