"""§13 "HTTP connections", attacked the way issue 7 #6 reproduced it: a client that has not
sent complete request headers within 10 s is disconnected, through a running ``fetcher run``
(embedded mode). Clients that are merely slow to read a response, or whose request is slow to
answer, are not affected.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.test_http_edge_requests import Embedded, embedded_process

#: §13: the header deadline, and the generous bound the attack must be cut by.
HEADER_DEADLINE = 10.0
CLOSED_BY = 13.0
REQUEST_HEAD = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 40 + b"\r\n\r\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Embedded]:
    with embedded_process(tmp_path_factory.mktemp("slow-clients")) as running:
        yield running


async def _closed_after(reader: asyncio.StreamReader, opened: float) -> float:
    """Seconds from ``opened`` until the server closes the connection (EOF or reset);
    infinity when it is still open well after the bound."""

    async def eof() -> None:
        with contextlib.suppress(ConnectionError):
            while await reader.read(4096):
                pass

    try:
        await asyncio.wait_for(eof(), CLOSED_BY + 10)
    except TimeoutError:
        return float("inf")
    return time.monotonic() - opened


async def _trickle(writer: asyncio.StreamWriter, data: bytes, every: float) -> None:
    """Send ``data`` one byte every ``every`` seconds until the server hangs up."""
    with contextlib.suppress(ConnectionError):
        for byte in data:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(every)


async def _read_response(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    await reader.readexactly(int(head.split(b"content-length: ")[1].split(b"\r\n")[0]))
    return head


async def _close(writer: asyncio.StreamWriter) -> None:
    """Close and wait until the socket is really closed: a transport still closing when the
    test's event loop ends leaks its socket into a later test's unraisable warnings."""
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()


async def _slow_header_client(port: int, *, after: bytes | None = None) -> float:
    """A connection trickling one header byte every 3 s. With ``after``, the connection first
    sends a request whose body ``after`` follows its answer (a route that ignores its body
    answers early), so the attack is on a kept-alive connection between two requests."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    opened = time.monotonic()
    if after is not None:
        writer.write(REQUEST_HEAD[:-2] + b"Content-Length: %d\r\n\r\n" % len(after))
        await writer.drain()
        await _read_response(reader)
        writer.write(after)
        await writer.drain()
        opened = time.monotonic()
    trickle = asyncio.create_task(_trickle(writer, REQUEST_HEAD, 3.0))
    try:
        return await _closed_after(reader, opened)
    finally:
        trickle.cancel()
        await _close(writer)


async def _silent_client(port: int) -> float:
    """A connection that never sends a byte."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        return await _closed_after(reader, time.monotonic())
    finally:
        await _close(writer)


async def _normal_client(base_url: str, until: asyncio.Event) -> list[float]:
    """``GET /health`` once a second on one kept-alive connection while the attack runs."""
    latencies: list[float] = []
    async with httpx.AsyncClient(base_url=base_url, timeout=5) as client:
        while not until.is_set():
            started = time.monotonic()
            response = await client.get("/health")
            assert response.status_code == 200, response.text
            latencies.append(time.monotonic() - started)
            await asyncio.sleep(1.0)
    return latencies


async def _slow_but_complete_head(port: int) -> bytes:
    """Headers sent in two parts 4 s apart, complete well within the deadline."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(REQUEST_HEAD[:20])
        await writer.drain()
        await asyncio.sleep(4.0)
        writer.write(REQUEST_HEAD[20:])
        await writer.drain()
        return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    finally:
        await _close(writer)


async def _long_poll(base_url: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        return await client.get("/v1/events", params={"wait": 12})


async def test_a_slow_header_client_is_disconnected_after_10_s(server: Embedded) -> None:
    """Issue 7 #6: one header byte every 3 s kept a connection open for 25 s and more."""
    done = asyncio.Event()
    normal = asyncio.create_task(_normal_client(server.base_url, done))
    # A long-poll whose headers are complete answers after 12 s: the deadline is about
    # headers only, never about the time a response takes.
    long_poll = asyncio.create_task(_long_poll(server.base_url))
    fresh, kept_alive, early, silent, split_head = await asyncio.gather(
        _slow_header_client(server.port),
        _slow_header_client(server.port, after=b""),
        _slow_header_client(server.port, after=b"0123456789"),
        _silent_client(server.port),
        _slow_but_complete_head(server.port),
    )
    done.set()
    latencies = await normal
    polled = await long_poll

    attacks = {"fresh": fresh, "kept-alive": kept_alive, "after early answer": early}
    for name, closed in {**attacks, "silent": silent}.items():
        assert HEADER_DEADLINE - 1.5 < closed < CLOSED_BY, f"{name} connection closed at {closed}"
    assert split_head.startswith(b"HTTP/1.1 200"), split_head
    assert len(latencies) >= 8, latencies
    assert max(latencies) < 1.0, latencies
    assert polled.status_code == 200, polled.text
    assert polled.json()["items"] == []
