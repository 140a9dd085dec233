"""Whether an IP address falls inside configured networks (trusted proxies, allowed scrapers)."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from functools import lru_cache

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def _networks(configured: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(item, strict=False) for item in configured)


def address_in(address: str, networks: Sequence[str]) -> bool:
    """``address`` is an IP inside one of ``networks`` (CIDR strings); anything unparsable is outside."""
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # a dual-stack listener reports IPv4 peers as ::ffff:a.b.c.d
    return any(ip in network for network in _networks(tuple(networks)))
