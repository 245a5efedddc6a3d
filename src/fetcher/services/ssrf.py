"""The SSRF guard's pure checks (contract §2.9).

``is_blocked_address`` tells whether one IP address lies in a blocked range;
``is_blocked_host_literal`` applies the host-literal layer (create, PATCH) to a ``host`` value:
an IP literal in a blocked range, or a blocked hostname. The pre-dial layer resolves the name
elsewhere and applies ``is_blocked_address`` to every resolved address. Nothing here does I/O.
"""

from __future__ import annotations

import ipaddress
import socket

__all__ = [
    "BLOCKED_HOSTNAMES",
    "BLOCKED_NETWORKS",
    "BLOCKED_SUFFIXES",
    "is_blocked_address",
    "is_blocked_host_literal",
    "is_blocked_hostname",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_BLOCKED_V4 = (
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.2.0/24",
    "192.88.99.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "198.51.100.0/24",
    "203.0.113.0/24",
    "224.0.0.0/4",
    "240.0.0.0/4",
)
_BLOCKED_V6 = (
    "::/128",
    "::1/128",
    "fe80::/10",
    "fc00::/7",
    "2001:db8::/32",
    "100::/64",
    "64:ff9b::/96",
    "2002::/16",
    "ff00::/8",
)

#: §2.9 blocked ranges, IPv4 then IPv6.
BLOCKED_NETWORKS: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = tuple(
    ipaddress.ip_network(n) for n in _BLOCKED_V4 + _BLOCKED_V6
)
#: §2.9 blocked hostnames (compared lower-case, one trailing dot ignored).
BLOCKED_HOSTNAMES = frozenset(
    {"localhost", "metadata.google.internal", "metadata.gcp.internal", "metadata.azure.internal"}
)
#: §2.9 blocked name suffixes.
BLOCKED_SUFFIXES = (".local", ".internal", ".cluster.local")


def is_blocked_address(ip: IPAddress | str) -> bool:
    """True when ``ip`` is in a §2.9 blocked range; an IPv4-mapped IPv6 address is unmapped.

    A string that is not an IP address raises ``ValueError``.
    """
    address = ipaddress.ip_address(ip) if isinstance(ip, str) else ip
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id is not None:
            address = ipaddress.IPv6Address(address.compressed.split("%", 1)[0])
        if address.ipv4_mapped is not None:
            address = address.ipv4_mapped
    return any(address.version == net.version and address in net for net in BLOCKED_NETWORKS)


def is_blocked_hostname(name: str) -> bool:
    """True for a §2.9 blocked name: case-insensitive, ignoring one trailing dot."""
    lowered = name.strip().lower()
    if lowered.endswith("."):
        lowered = lowered[:-1]
    return lowered in BLOCKED_HOSTNAMES or lowered.endswith(BLOCKED_SUFFIXES)


def _literal_address(host: str) -> IPAddress | None:
    """The address a host literal denotes, including the legacy ``inet_aton`` forms.

    ``127.1``, ``0x7f.0.0.1`` and ``2130706433`` are IPv4 to the C resolver, so they are
    judged as the address they denote rather than as names.
    """
    text = host.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    if text and all(c in "0123456789abcdefxABCDEFX." for c in text):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(text))
        except OSError:
            return None
    return None


def is_blocked_host_literal(host: str) -> bool:
    """§2.9 host-literal layer: an IP literal in a blocked range, or a blocked hostname."""
    address = _literal_address(host)
    if address is not None:
        return is_blocked_address(address)
    return is_blocked_hostname(host)
