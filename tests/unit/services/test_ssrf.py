"""§2.9 SSRF guard: blocked ranges, IPv4-mapped addresses and blocked names."""

from __future__ import annotations

import ipaddress

import pytest

from fetcher.services.connections import ssrf
from fetcher.services.connections.ssrf import (
    BlockedHostError,
    is_blocked_address,
    is_blocked_host_literal,
    is_blocked_hostname,
    vet_host,
)

V4_RANGES = [
    ("0.0.0.0/8", "0.0.0.0", "0.255.255.255", "1.0.0.0"),  # noqa: S104 (not a bind)
    ("10.0.0.0/8", "10.0.0.0", "10.255.255.255", "11.0.0.0"),
    ("100.64.0.0/10", "100.64.0.0", "100.127.255.255", "100.128.0.0"),
    ("127.0.0.0/8", "127.0.0.0", "127.255.255.255", "128.0.0.0"),
    ("169.254.0.0/16", "169.254.0.0", "169.254.255.255", "169.255.0.0"),
    ("172.16.0.0/12", "172.16.0.0", "172.31.255.255", "172.32.0.0"),
    ("192.0.0.0/24", "192.0.0.0", "192.0.0.255", "192.0.1.0"),
    ("192.0.2.0/24", "192.0.2.0", "192.0.2.255", "192.0.3.0"),
    ("192.88.99.0/24", "192.88.99.0", "192.88.99.255", "192.88.100.0"),
    ("192.168.0.0/16", "192.168.0.0", "192.168.255.255", "192.169.0.0"),
    ("198.18.0.0/15", "198.18.0.0", "198.19.255.255", "198.20.0.0"),
    ("198.51.100.0/24", "198.51.100.0", "198.51.100.255", "198.51.101.0"),
    ("203.0.113.0/24", "203.0.113.0", "203.0.113.255", "203.0.114.0"),
    ("224.0.0.0/4", "224.0.0.0", "239.255.255.255", "223.255.255.255"),
    ("240.0.0.0/4", "240.0.0.0", "255.255.255.255", "8.8.8.8"),
]

V6_RANGES = [
    ("::/128", "::", "::", "::1:0:0"),
    ("::1/128", "::1", "::1", "::1:0:0"),
    ("::/96", "::", "::ffff:ffff", "::1:0:0"),
    ("::ffff:0:0:0/96", "::ffff:0:0:0", "::ffff:0:ffff:ffff", "::1:0:0:0"),
    ("2001::/23", "2001::", "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", "2001:200::"),
    ("fe80::/10", "fe80::", "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "fec0::"),
    ("fc00::/7", "fc00::", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "fe00::"),
    ("2001:db8::/32", "2001:db8::", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", "2001:db9::"),
    ("100::/64", "100::", "100::ffff:ffff:ffff:ffff", "100:0:0:1::"),
    ("64:ff9b::/96", "64:ff9b::", "64:ff9b::ffff:ffff", "64:ff9b::1:0:0"),
    ("64:ff9b:1::/48", "64:ff9b:1::", "64:ff9b:1:ffff:ffff:ffff:ffff:ffff", "64:ff9b:2::"),
    ("2002::/16", "2002::", "2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "2003::"),
    ("ff00::/8", "ff00::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "fe00::"),
]


@pytest.mark.parametrize(("net", "first", "last", "outside"), V4_RANGES + V6_RANGES)
def test_blocked_range_bounds(net: str, first: str, last: str, outside: str) -> None:
    network = ipaddress.ip_network(net)
    assert ipaddress.ip_address(first) == network[0]
    assert ipaddress.ip_address(last) == network[-1]
    assert is_blocked_address(first)
    assert is_blocked_address(last)
    assert is_blocked_host_literal(first)
    assert is_blocked_host_literal(last)
    assert not is_blocked_address(outside)
    assert not is_blocked_host_literal(outside)


@pytest.mark.parametrize("inner", ["127.0.0.1", "169.254.169.254", "10.0.0.1", "fd00::1", "::1"])
def test_typical_internal_addresses(inner: str) -> None:
    assert is_blocked_address(inner)
    assert is_blocked_host_literal(f" {inner} ")


@pytest.mark.parametrize(
    "public",
    [
        "1.1.1.1",
        "8.8.8.8",
        "93.184.216.34",
        "2606:4700:4700::1111",
        "2001:4860:4860::8888",
        "2001:200::1",
        "::1:0:0",
    ],
)
def test_public_addresses_pass(public: str) -> None:
    assert not is_blocked_address(public)
    assert not is_blocked_host_literal(public)


@pytest.mark.parametrize(
    ("mapped", "blocked"),
    [
        ("::ffff:127.0.0.1", True),
        ("::ffff:10.1.2.3", True),
        ("::ffff:169.254.169.254", True),
        ("::ffff:7f00:1", True),
        ("::FFFF:192.168.0.1", True),
        ("::ffff:8.8.8.8", False),
    ],
)
def test_ipv4_mapped_ipv6_is_unmapped(mapped: str, blocked: bool) -> None:
    assert is_blocked_address(mapped) is blocked
    assert is_blocked_host_literal(mapped) is blocked


def test_address_objects_are_accepted() -> None:
    assert is_blocked_address(ipaddress.ip_address("127.0.0.1"))
    assert not is_blocked_address(ipaddress.ip_address("8.8.8.8"))


def test_scoped_link_local_is_blocked() -> None:
    assert is_blocked_address("fe80::1%eth0")


@pytest.mark.parametrize("legacy", ["127.1", "2130706433", "0x7f.0.0.1", "0177.0.0.1", "10.1"])
def test_legacy_numeric_forms_are_judged_as_addresses(legacy: str) -> None:
    assert is_blocked_host_literal(legacy)


def test_bracketed_ipv6_literal() -> None:
    assert is_blocked_host_literal("[::1]")


@pytest.mark.parametrize(
    "name",
    [
        "localhost",
        "LOCALHOST",
        "localhost.",
        "LocalHost.",
        "metadata.google.internal",
        "METADATA.GOOGLE.INTERNAL.",
        "metadata.gcp.internal",
        "metadata.azure.internal",
        "printer.local",
        "printer.LOCAL.",
        "db.internal",
        "db.svc.cluster.local",
        "db.svc.Cluster.Local.",
        "a.b.c.internal",
    ],
)
def test_blocked_names(name: str) -> None:
    assert is_blocked_hostname(name)
    assert is_blocked_host_literal(name)


@pytest.mark.parametrize(
    "name",
    [
        "db.example.com",
        "example.com.",
        "localhost.example.com",
        "mylocal",
        "internal.example.com",
        "notlocal",
        "local",
        "internal",
        "x-internal",
        "db.local.example.com",
    ],
)
def test_allowed_names(name: str) -> None:
    assert not is_blocked_hostname(name)
    assert not is_blocked_host_literal(name)


# --- IPv4-embedded IPv6 forms (§2.9, issue 7) ------------------------------------------


@pytest.mark.parametrize(
    "embedded",
    [
        "::127.0.0.1",  # IPv4-compatible, loopback inside
        "::7f00:1",
        "::169.254.169.254",
        "::8.8.8.8",  # the whole IPv4-compatible range is blocked, public inside or not
        "::ffff:0:127.0.0.1",  # IPv4-translated (RFC 2765)
        "::ffff:0:7f00:1",
        "::ffff:0:8.8.8.8",
        "::ffff:0:0",  # the literal §2.9 network's first address, mapped 0.0.0.0
        "64:ff9b:1::7f00:1",  # NAT64 local-use prefix (RFC 8215)
        "64:ff9b:1::8.8.8.8",
        "64:ff9b::8.8.8.8",  # NAT64 well-known prefix
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
        "2001::1",
        "2001:0:53aa:64c:0:0:0:1",
        "2002:7f00:1::1",  # 6to4 of 127.0.0.1
    ],
)
def test_ipv4_embedding_forms_are_blocked(embedded: str) -> None:
    assert is_blocked_address(embedded)
    assert is_blocked_host_literal(embedded)
    assert is_blocked_host_literal(f"[{embedded}]")


@pytest.mark.parametrize(
    ("address", "blocked"),
    [
        ("::ffff:8.8.8.8", False),  # mapped: judged by the embedded IPv4 only
        ("::ffff:1.1.1.1", False),
        ("::ffff:100.64.0.1", True),
        ("::ffff:0.1.2.3", True),
        ("::ffff:224.0.0.1", True),
    ],
)
def test_mapped_addresses_are_judged_by_their_ipv4(address: str, blocked: bool) -> None:
    assert is_blocked_address(address) is blocked


def test_teredo_prefix_is_inside_the_blocked_ietf_range() -> None:
    teredo = ipaddress.ip_network("2001::/32")
    assert is_blocked_address(teredo[0])
    assert is_blocked_address(teredo[-1])
    assert ipaddress.IPv6Address("2001:0:4136:e378:8000:63bf:3fff:fdd2").teredo is not None


@pytest.mark.parametrize(
    "embedded", ["::127.0.0.1", "::ffff:0:127.0.0.1", "64:ff9b:1::a00:1", "2001::1"]
)
async def test_vet_host_refuses_embedded_forms_before_dns(embedded: str) -> None:
    with pytest.raises(BlockedHostError):
        await vet_host(embedded, 5432)


async def test_vet_host_refuses_a_name_resolving_to_an_embedded_form(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def fake_resolve(host: str, port: int | None) -> list[str]:
        return ["2001:4860:4860::8888", "::ffff:0:127.0.0.1"]

    monkeypatch.setattr(ssrf, "resolve_host", fake_resolve)
    with pytest.raises(BlockedHostError):
        await vet_host("db.example.com", 5432)
