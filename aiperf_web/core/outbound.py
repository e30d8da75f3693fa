"""The outbound allowlist: benchmark traffic goes only to hosts the administrator allows
(AIPERF_OUTBOUND_ALLOWLIST; loopback by default).

An entry is a CIDR or IP (`10.0.0.0/8`, `::1`), a host name (`mock`), a suffix (`*.corp`), or
`*` (anything). A name is allowed when it is listed, or when every address it resolves to is
in an allowed network; a name that does not resolve is refused.

A host must be spelled one way only, the way the allowlist is written: an IPv4 address as four
decimal numbers, an IPv6 address in brackets, a name in ASCII letters, digits, `-`, `_` and dots
(an internationalised name in its `xn--` form). The resolver reads `0177.0.0.1` (octal),
`0x7f.1` and `2130706433` as 127.0.0.1, and IDNA reads `①②⑦.0.0.1` the same way, while HTTP
clients disagree about them: such spellings are refused with a message, never passed on.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from urllib.parse import urlsplit

from django.conf import settings

from aiperf_web.core.errors import Invalid

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# WHATWG URL: a host whose last label is a number (decimal or 0x hex) is an IPv4 address.
_NUMERIC_LABEL = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)")
_NAME = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,62})(?:\.[a-z0-9_](?:[a-z0-9_-]{0,62}))*\.?")


def host_problem(host: str) -> str | None:
    """Why `host` (as urlsplit gives it: lower case, without brackets) is spelled in a way
    benchmark traffic may not use, or None when it is a canonical address or name."""
    if not host:
        return "the URL has no host: write it as http://host:port"
    if not host.isascii():
        return (
            f"host {host[:80]!r} is not plain ASCII: write digits as 0-9 and an "
            "internationalised name in its xn-- (punycode) form"
        )
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return f"host [{host[:80]}] is not an IPv6 address"
        return None
    last = host.rstrip(".").rsplit(".", 1)[-1]
    if _NUMERIC_LABEL.fullmatch(last):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            return (
                f"host {host[:80]!r} reads as an IPv4 address but is not written as four "
                "decimal numbers 0-255 (octal, hexadecimal and shortened forms are refused): "
                "write it as e.g. 127.0.0.1"
            )
        return None
    if len(host) > 253 or not _NAME.fullmatch(host):
        return (
            f"host {host[:80]!r} is not a valid host name (letters, digits, '-', '_' and "
            "dots, at most 253 characters)"
        )
    return None


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
    host = host.strip("[]").lower()
    if host_problem(host) is not None:
        return False
    if anything:
        return True
    host = host.rstrip(".")
    for name in names:
        if host == name or (name.startswith("*.") and host.endswith(name[1:])):
            return True
    try:
        addresses = [ipaddress.ip_address(host)]
    except ValueError:
        try:
            infos = socket.getaddrinfo(host, None)
            addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
        except (OSError, UnicodeError, ValueError):
            return False
    return bool(addresses) and all(any(a in net for net in networks) for a in addresses)


def check_outbound_url(
    url: str,
    *,
    field: str = "base_url",
    allowlist: list[str] | None = None,
    setting: str = "AIPERF_OUTBOUND_ALLOWLIST",
) -> None:
    """Raise Invalid naming `field` when `url`'s host is oddly spelled or outside the
    allowlist (AIPERF_OUTBOUND_ALLOWLIST, or `allowlist`, the list of `setting`); never
    anything else."""
    entries = settings.AIPERF_OUTBOUND_ALLOWLIST if allowlist is None else allowlist
    try:
        host = urlsplit(url).hostname or ""
    except ValueError as exc:  # e.g. an unclosed "[" around an IPv6 address
        raise Invalid.field(field, f"not a URL ({exc}): write it as http://host:port") from None
    problem = host_problem(host)
    if problem is not None:
        raise Invalid.field(field, problem)
    if not host_allowed(host, entries):
        which = "outbound" if setting == "AIPERF_OUTBOUND_ALLOWLIST" else "webhook"
        raise Invalid.field(
            field,
            f"host {host or '?'!s} is not in the {which} allowlist "
            f"({', '.join(entries) or 'empty'}); an administrator can extend {setting}",
        )
