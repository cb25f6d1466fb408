"""Which addresses are inside this machine or its network, for WebFetch and the proxy.

What is checked is an address a resolver returned (or a literal, parsed), never the
text of a name: `2130706433`, `0x7f.1` and `[::ffff:127.0.0.1]` are all loopback.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_UNIQUE_LOCAL = ipaddress.ip_network("fc00::/7")
_METADATA = ipaddress.ip_address("169.254.169.254")


def internal_reason(address: str) -> str | None:
    """Why `address` is not a public internet address, or None if it is one."""
    ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone id
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            inner = internal_reason(str(ip.ipv4_mapped))
            return inner and f"IPv4-mapped {inner}"
        if ip.teredo is not None:
            return "Teredo tunnel"
        embedded = ip.sixtofour or (
            ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) if ip in _NAT64 else None
        )
        if embedded is not None:
            inner = internal_reason(str(embedded))
            return inner and f"IPv4-embedding {inner}"
    if ip == _METADATA:
        return "link-local (cloud metadata)"
    for reason, hit in (
        ("unspecified", ip.is_unspecified),
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("shared (CGNAT)", ip in _CGNAT),
        ("unique-local", ip in _UNIQUE_LOCAL),
        ("reserved", ip.is_reserved),
        ("private", ip.is_private),
        ("non-global", not ip.is_global),
    ):
        if hit:
            return reason
    return None


def literal_address(host: str) -> str | None:
    """The address `host` spells, if it is an IP literal in any spelling the C resolver
    accepts (`127.1`, `0x7f000001`, `2130706433`, `[::1]`, `::ffff:7f00:1`), else None."""
    bare = host.strip().removeprefix("[").removesuffix("]").split("%", 1)[0]
    try:
        return str(ipaddress.ip_address(bare))
    except ValueError:
        pass
    try:
        return socket.inet_ntoa(socket.inet_aton(bare))  # the legacy IPv4 spellings
    except (OSError, UnicodeError, ValueError):
        return None


class AllowList:
    """Hosts the operator allows although internal: by name, or by address or network."""

    def __init__(self, entries: Iterable[str]) -> None:
        self.names: set[str] = set()
        self.networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for entry in entries:
            entry = entry.strip().lower().rstrip(".").removeprefix("[").removesuffix("]")
            try:
                self.networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                self.names.add(entry)

    def names_host(self, host: str) -> bool:
        """Whether the URL's host itself is listed: by name, or as an address in a network."""
        host = host.lower().rstrip(".").removeprefix("[").removesuffix("]")
        if host in self.names:
            return True
        try:
            return self.allows(host, host)
        except ValueError:
            return False

    def allows(self, host: str, address: str) -> bool:
        if host.lower().rstrip(".") in self.names:
            return True
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        return any(ip.version == net.version and ip in net for net in self.networks)
