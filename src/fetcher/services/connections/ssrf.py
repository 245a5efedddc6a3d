"""The SSRF guard's pure checks (contract §2.9).

``is_blocked_address`` tells whether one IP address lies in a blocked range;
``is_blocked_host_literal`` applies the host-literal layer (create, PATCH) to a ``host`` value:
an IP literal in a blocked range, or a blocked hostname.

The pre-dial layer (§2.9.1 rules 1-3) is :func:`vet_host`, the ONE place that resolves a
datasource host: it resolves the name once through :func:`resolve_host` (``getaddrinfo``, every
address family), rejects the host when any resolved address is blocked, and returns the vetted
address that callers pin on the descriptor (:func:`pin_descriptor`), so the driver never
resolves the name a second time. The Manager's :class:`ConnectionDialer` and the Worker's
:class:`ExtractionService` both call it; nothing else here does I/O.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import replace

from fetcher.engine import ConnectionDescriptor

__all__ = [
    "BLOCKED_HOSTNAMES",
    "BLOCKED_NETWORKS",
    "BLOCKED_SUFFIXES",
    "BlockedHostError",
    "HostResolutionError",
    "is_blocked_address",
    "is_blocked_host_literal",
    "is_blocked_hostname",
    "pin_descriptor",
    "resolve_host",
    "vet_host",
    "vet_host_addresses",
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
    # IPv4-compatible (``::127.0.0.1``): deprecated, but some stacks still route it to the
    # embedded IPv4 address, so the whole range is blocked, public embedded addresses included.
    "::/96",
    # §2.9 "``::ffff:0:0/96`` (IPv4-translated)". Mapped addresses (``::ffff:a.b.c.d``) are
    # unmapped before this table is consulted, so the literal network only matters as a
    # backstop; the range its label names, RFC 2765 IPv4-translated ``::ffff:0:a.b.c.d``
    # (``::ffff:0:127.0.0.1``), is blocked as a whole as well.
    "::ffff:0:0/96",
    "::ffff:0:0:0/96",
    "fe80::/10",
    "fc00::/7",
    "2001:db8::/32",
    # IETF protocol assignments, Teredo (2001::/32) included: a Teredo address carries an
    # obfuscated IPv4 server and client that a relay would reach.
    "2001::/23",
    "100::/64",
    # NAT64, the well-known prefix and the local-use prefix (RFC 8215): a gateway translates
    # them to the embedded IPv4 address, whichever it is.
    "64:ff9b::/96",
    "64:ff9b:1::/48",
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


# --- the pre-dial layer (§2.9.1) ----------------------------------------------------------


class BlockedHostError(Exception):
    """The host, or one address it resolves to, is blocked (§2.9). Carries no host text:
    HTTP answers ``400 FET-0414`` and the Worker fails the job with its fixed text."""


class HostResolutionError(Exception):
    """DNS failed (§2.9.1 rule 2): a connect failure, not a block. ``detail`` is resolver
    text; it may name the host, so callers redact it before it leaves the process (§8.7)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


async def resolve_host(host: str, port: int | None) -> list[str]:
    """Every address ``host`` resolves to (``getaddrinfo``, all families), resolver order.

    Raises ``OSError`` (``socket.gaierror``) or ``UnicodeError`` on a DNS failure. Tests
    replace this function to simulate DNS.
    """
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


async def vet_host(host: str, port: int | None) -> str:
    """§2.9.1 rules 1-3: resolve ``host`` once; return the address to pin (the first of
    :func:`vet_host_addresses`)."""
    return (await vet_host_addresses(host, port))[0]


async def vet_host_addresses(host: str, port: int | None) -> tuple[str, ...]:
    """§2.9.1 rules 1-3: resolve ``host`` once; return every resolved address, deduplicated,
    the one to pin first. Redaction needs them all (§8.7 step 1), the driver only the first.

    The host-literal layer applies first (a blocked literal or name never reaches DNS). Every
    resolved address must be allowed (an IPv4-mapped IPv6 address is judged unmapped); the
    vetted address is the resolver's first, which is the one the system would dial.

    Raises :class:`BlockedHostError` or :class:`HostResolutionError`.
    """
    if is_blocked_host_literal(host):
        raise BlockedHostError
    try:
        resolved = await resolve_host(host, port)
    except (OSError, UnicodeError) as exc:
        raise HostResolutionError(f"name resolution failed: {exc}") from None
    addresses = list(dict.fromkeys(resolved))
    if not addresses:
        raise HostResolutionError("name resolution returned no address")
    try:
        blocked = any(is_blocked_address(address) for address in addresses)
    except ValueError:
        blocked = True  # not an IP address: never dial what cannot be vetted
    if blocked:
        raise BlockedHostError
    return tuple(addresses)


async def pin_descriptor(descriptor: ConnectionDescriptor) -> ConnectionDescriptor:
    """``descriptor`` with its host vetted and the address pinned (§2.9.1 rule 3).

    A descriptor without a host (``SQLITE``) is returned unchanged. Raises
    :class:`BlockedHostError` or :class:`HostResolutionError`.
    """
    if not descriptor.host:
        return descriptor
    addresses = await vet_host_addresses(descriptor.host, descriptor.port)
    return replace(descriptor, pinned_address=addresses[0], resolved_addresses=addresses)
