"""The chaos proxy itself, against a loopback echo server: it forwards, delays, throttles,
cuts, refuses, holds (blackhole) and restores."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.chaos.proxy import ChaosProxy

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def proxy() -> AsyncIterator[ChaosProxy]:
    """A proxy in front of a loopback echo server; every socket is closed at the end."""
    served: list[asyncio.StreamWriter] = []

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served.append(writer)
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.transport.abort()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with ChaosProxy(port) as chaos:
        yield chaos
    for writer in served:
        writer.transport.abort()
    server.close()
    await server.wait_closed()
    await asyncio.sleep(0)


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.transport.abort()
    await asyncio.sleep(0)


async def _connect(proxy: ChaosProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", proxy.port)


async def _roundtrip(proxy: ChaosProxy, payload: bytes, within: float = 5.0) -> bytes:
    reader, writer = await _connect(proxy)
    try:
        writer.write(payload)
        await writer.drain()
        async with asyncio.timeout(within):
            return await reader.readexactly(len(payload))
    finally:
        await _close(writer)


async def _is_dead(reader: asyncio.StreamReader, within: float = 2.0) -> bool:
    """True when the connection ends (EOF or reset) within ``within`` seconds."""
    try:
        async with asyncio.timeout(within):
            return await reader.read(1) == b""
    except (ConnectionError, OSError):
        return True


async def test_forwards_both_ways(proxy: ChaosProxy) -> None:
    payload = bytes(range(256)) * 1000
    assert await _roundtrip(proxy, payload) == payload
    assert proxy.stats.accepted == 1
    assert proxy.stats.bytes_up == len(payload) == proxy.stats.bytes_down


async def test_peers_maps_client_ports_to_upstream_ports(proxy: ChaosProxy) -> None:
    reader, writer = await _connect(proxy)
    writer.write(b"x")
    assert await reader.readexactly(1) == b"x"
    own_port = writer.get_extra_info("sockname")[1]
    peers = proxy.peers()
    assert list(peers) == [own_port]
    assert peers[own_port] not in (own_port, proxy.port)
    await _close(writer)


async def test_refuses_a_non_loopback_upstream() -> None:
    with pytest.raises(ValueError, match="loopback"):
        ChaosProxy(5432, "10.0.0.1")


async def test_latency_delays_every_chunk_each_way(proxy: ChaosProxy) -> None:
    proxy.latency = 0.2
    started = time.monotonic()
    assert await _roundtrip(proxy, b"ping") == b"ping"
    assert time.monotonic() - started >= 0.4  # 0.2 s up, 0.2 s down
    proxy.restore()
    started = time.monotonic()
    assert await _roundtrip(proxy, b"ping") == b"ping"
    assert time.monotonic() - started < 0.2


async def test_rate_limits_throughput(proxy: ChaosProxy) -> None:
    proxy.rate = 100_000  # bytes per second, each direction
    payload = b"x" * 50_000
    started = time.monotonic()
    assert await _roundtrip(proxy, payload, within=10) == payload
    assert time.monotonic() - started >= 0.45


async def test_cut_resets_open_connections_and_new_ones_still_pass(proxy: ChaosProxy) -> None:
    reader, writer = await _connect(proxy)
    writer.write(b"hello")
    assert await reader.readexactly(5) == b"hello"
    assert proxy.cut() == 1
    assert await _is_dead(reader)
    await _close(writer)
    assert proxy.stats.cut == 1
    assert await _roundtrip(proxy, b"again") == b"again"


async def test_refuse_resets_new_connections_until_restored(proxy: ChaosProxy) -> None:
    proxy.mode = "refuse"
    reader, writer = await _connect(proxy)
    assert await _is_dead(reader)
    await _close(writer)
    assert proxy.stats.refused == 1
    proxy.restore()
    assert await _roundtrip(proxy, b"back") == b"back"


async def test_hang_holds_new_connections_silently_then_restore_resets_them(
    proxy: ChaosProxy,
) -> None:
    proxy.mode = "hang"
    reader, writer = await _connect(proxy)
    writer.write(b"anyone?")
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.5):
            await reader.read(1)
    assert proxy.stats.bytes_up == 0
    proxy.restore()
    assert await _is_dead(reader)
    await _close(writer)
    assert await _roundtrip(proxy, b"ok") == b"ok"


async def test_outage_cuts_refuses_for_a_while_then_restores(proxy: ChaosProxy) -> None:
    reader, writer = await _connect(proxy)
    outage = asyncio.create_task(proxy.outage(0.5))
    assert await _is_dead(reader)
    await _close(writer)
    await asyncio.sleep(0.1)
    probe_reader, probe_writer = await _connect(proxy)
    assert await _is_dead(probe_reader)  # refused during the outage
    await _close(probe_writer)
    await outage
    assert proxy.mode == "pass"
    assert await _roundtrip(proxy, b"restored") == b"restored"


async def test_an_unreachable_upstream_resets_the_client() -> None:
    with contextlib.closing(__import__("socket").socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        dead_port = sock.getsockname()[1]  # bound, never listening
        async with ChaosProxy(dead_port) as chaos:
            reader, writer = await _connect(chaos)
            assert await _is_dead(reader)
            await _close(writer)
            assert chaos.open_connections == 0
