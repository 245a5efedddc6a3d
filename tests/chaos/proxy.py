"""A fault-injecting TCP proxy on loopback, placed between Fetcher's processes and one
dependency (metadata PostgreSQL, RabbitMQ, the S3 server, a source database).

It forwards bytes both ways and can, at any moment:

* add ``latency`` seconds before every chunk it forwards (each direction, in order, so a
  stream of small packets is slowed packet by packet);
* limit throughput to ``rate`` bytes per second per direction;
* ``cut()`` every open connection (both sockets aborted: the peers see a reset);
* refuse new connections (``mode = "refuse"``: accepted and reset at once) or swallow them
  (``mode = "hang"``: accepted, never answered, never forwarded: a blackhole);
* ``restore()`` to a plain pass-through.

:meth:`ChaosProxy.outage` combines them: cut everything, refuse (or hang) for a while, restore.
Everything binds 127.0.0.1; the upstream must be a loopback address too.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["ChaosProxy", "Mode", "ProxyStats"]

Mode = Literal["pass", "refuse", "hang"]
CHUNK = 65536
LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass
class ProxyStats:
    """What the proxy saw: connections accepted, refused/held, cut, and bytes forwarded."""

    accepted: int = 0
    refused: int = 0
    cut: int = 0
    bytes_up: int = 0
    bytes_down: int = 0


@dataclass(eq=False)
class _Link:
    """One proxied connection: the client side, the upstream side and their two pumps."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def abort(self) -> None:
        for writer in (self.client, self.upstream):
            if writer is not None:
                with contextlib.suppress(Exception):
                    writer.transport.abort()
        for task in self.tasks:
            task.cancel()


class ChaosProxy:
    """``async with ChaosProxy(port_of_dependency) as proxy:`` → listen on ``proxy.port``."""

    def __init__(self, upstream_port: int, upstream_host: str = "127.0.0.1") -> None:
        if upstream_host not in LOOPBACK:
            raise ValueError("the chaos proxy only forwards to loopback")
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.latency = 0.0
        self.rate: float | None = None
        self.mode: Mode = "pass"
        self.stats = ProxyStats()
        self._links: set[_Link] = set()
        self._held: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the proxy is not started")
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def open_connections(self) -> int:
        return len(self._links)

    def peers(self) -> dict[int, int]:
        """For every open connection: the client's own port → the port the proxy's upstream
        socket uses (how the dependency sees that client)."""
        mapping = {}
        for link in self._links:
            if link.upstream is None:
                continue
            client = link.client.get_extra_info("peername")
            upstream = link.upstream.get_extra_info("sockname")
            if client and upstream:
                mapping[int(client[1])] = int(upstream[1])
        return mapping

    async def start(self) -> ChaosProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            tasks = [task for link in self._links for task in link.tasks]
            self.cut()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> ChaosProxy:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # --- faults ----------------------------------------------------------------------------

    def cut(self) -> int:
        """Reset every open (and every held) connection; returns how many were cut."""
        links = list(self._links)
        for link in links:
            link.abort()
        for writer in list(self._held):
            writer.transport.abort()
        self._held.clear()
        self.stats.cut += len(links)
        return len(links)

    def restore(self) -> None:
        """Back to a plain pass-through: no latency, no rate limit, new connections accepted.
        Connections held by ``hang`` are reset so that their clients retry."""
        self.latency = 0.0
        self.rate = None
        self.mode = "pass"
        for writer in list(self._held):
            writer.transport.abort()
        self._held.clear()

    async def outage(self, seconds: float, mode: Mode = "refuse") -> None:
        """Cut everything, keep new connections out (``mode``) for ``seconds``, restore."""
        self.mode = mode
        self.cut()
        try:
            await asyncio.sleep(seconds)
        finally:
            self.restore()

    # --- forwarding ------------------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode == "refuse":
            self.stats.refused += 1
            writer.transport.abort()
            return
        if self.mode == "hang":
            self.stats.refused += 1
            self._held.add(writer)
            return
        self.stats.accepted += 1
        link = _Link(writer)
        self._links.add(link)
        try:
            up_reader, up_writer = await asyncio.open_connection(
                self.upstream_host, self.upstream_port
            )
        except OSError:
            self._links.discard(link)
            writer.transport.abort()
            return
        link.upstream = up_writer
        up = asyncio.create_task(self._pump(reader, up_writer, upstream=True))
        down = asyncio.create_task(self._pump(up_reader, writer, upstream=False))
        link.tasks = [up, down]
        try:
            await asyncio.wait(link.tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._links.discard(link)
            link.abort()

    def _chunk(self) -> int:
        """Read size: under a rate limit, about 50 ms worth of bytes, so pacing stays smooth."""
        return max(1, min(CHUNK, int(self.rate / 20))) if self.rate else CHUNK

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, upstream: bool
    ) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(self._chunk()):
                started = time.monotonic()
                if self.latency > 0:
                    await asyncio.sleep(self.latency)
                writer.write(data)
                await writer.drain()
                if upstream:
                    self.stats.bytes_up += len(data)
                else:
                    self.stats.bytes_down += len(data)
                if self.rate:
                    spent = time.monotonic() - started - self.latency
                    await asyncio.sleep(max(0.0, len(data) / self.rate - spent))
            with contextlib.suppress(OSError, RuntimeError):
                writer.write_eof()  # half-close: the peer sees the EOF its side sent
