"""A fake PostgreSQL server: records every byte a client sends, answers with a chosen error.

It speaks just enough of the frontend/backend protocol (v3) for libpq/psycopg to get as far
as sending a password:

1. ``SSLRequest`` / ``GSSENCRequest`` → ``N`` (no TLS, no GSSAPI); the client may go on in
   cleartext (it does unless its ``sslmode`` requires TLS).
2. The startup message is read; with ``ask_password`` the server asks for
   ``AuthenticationCleartextPassword`` and reads the ``PasswordMessage``.
3. It answers with an error whose message text the test chooses, and closes.

libpq refuses an error longer than 30,000 bytes before authentication completes. With
``accept`` the server instead completes authentication (``AuthenticationOk``, the usual
``ParameterStatus`` messages, ``ReadyForQuery``) and answers every query with the error: that
is how a hostile server gets a 64 KiB text to the client (the connection test's probe).
With ``accept`` and ``rows``, every query is answered instead with those rows, each value an
``int4`` column (issue 24: one int column where the catalog has six), over the simple and
the extended query protocol.

Everything received, on every connection, is kept in :attr:`FakePgServer.received`, so a
test can check whether a password ever arrived. Use it as an async context manager or
through the :func:`fake_pg_server` fixture (import it into a ``conftest.py`` or test module).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Self

import pytest_asyncio

__all__ = ["FakePgServer", "fake_pg_server"]

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102
#: libpq refuses a longer ``ErrorResponse`` before authentication completes (fe-connect.c).
STARTUP_ERROR_LIMIT = 30_000


def _message(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!I", len(body) + 4) + body


def _parameter(name: str, value: str) -> bytes:
    return _message(b"S", name.encode() + b"\0" + value.encode() + b"\0")


_READY = _message(b"Z", b"I")
#: AuthenticationOk, the parameters psycopg reads, BackendKeyData, ReadyForQuery.
_SESSION_START = (
    _message(b"R", struct.pack("!I", 0))
    + _parameter("server_version", "16.4")
    + _parameter("server_encoding", "UTF8")
    + _parameter("client_encoding", "UTF8")
    + _parameter("standard_conforming_strings", "on")
    + _parameter("integer_datetimes", "on")
    + _parameter("DateStyle", "ISO, MDY")
    + _parameter("TimeZone", "UTC")
    + _message(b"K", struct.pack("!II", 4242, 2424))
    + _READY
)


def error_response(message: str, *, code: str = "28P01") -> bytes:
    """A v3 ``ErrorResponse`` (severity FATAL) carrying ``message``."""
    text = message.encode("utf-8", "replace").replace(b"\0", b" ")
    return _message(b"E", b"SFATAL\0VFATAL\0C" + code.encode() + b"\0M" + text + b"\0\0")


@dataclass
class FakePgServer:
    """An asyncio TCP server on ``127.0.0.1`` (an ephemeral port) that records and refuses.

    ``error`` is the error text, or a callable returning it (called per connection).
    ``ask_password`` makes the server request a cleartext password first. ``accept`` lets the
    client in and fails its queries instead (errors of any length). ``hold`` delays the error
    until the test sets :attr:`release` (to act while a client waits).
    """

    error: str | Callable[[], str] = "password authentication failed for user"
    ask_password: bool = True
    accept: bool = False
    hold: bool = False
    rows: list[tuple[int, ...]] | None = None
    host: str = "127.0.0.1"
    received: bytearray = field(default_factory=bytearray)
    connections: int = 0
    startups: int = 0
    release: asyncio.Event = field(default_factory=asyncio.Event)
    #: Set once a client's startup message has arrived.
    started: asyncio.Event = field(default_factory=asyncio.Event)
    #: Set once an error has been written to a client.
    answered: asyncio.Event = field(default_factory=asyncio.Event)
    _server: asyncio.Server | None = None
    _handlers: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the fake server is not running")
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    def saw(self, value: str) -> bool:
        """Whether ``value`` (UTF-8) appears anywhere in what clients sent."""
        return value.encode() in bytes(self.received)

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._serve, self.host, 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._handlers):  # a client may keep its session open
                task.cancel()
            await asyncio.gather(*self._handlers, return_exceptions=True)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
            self._server = None

    async def _read(self, reader: asyncio.StreamReader, n: int) -> bytes:
        data = await reader.readexactly(n)
        self.received += data
        return data

    async def _startup(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer ``N`` to TLS/GSSAPI requests until the startup message; False on a cancel."""
        while True:
            (length,) = struct.unpack("!I", await self._read(reader, 4))
            body = await self._read(reader, length - 4)
            (code,) = struct.unpack("!I", body[:4])
            if code in (SSL_REQUEST, GSSENC_REQUEST):
                writer.write(b"N")
                await writer.drain()
                continue
            if code == CANCEL_REQUEST:
                return False
            self.startups += 1
            self.started.set()
            return True

    async def _answer(self, writer: asyncio.StreamWriter, *, then: bytes = b"") -> None:
        """Write the chosen error (after :attr:`release` when holding), then ``then``."""
        if self.hold:
            await self.release.wait()
        text = self.error() if callable(self.error) else self.error
        writer.write(error_response(text) + then)
        await writer.drain()
        self.answered.set()

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Authenticate, then answer every query (simple ``Q`` or extended ``…S``) with the
        error and ``ReadyForQuery``, until the client terminates."""
        writer.write(_SESSION_START)
        await writer.drain()
        while True:
            kind = await self._read(reader, 1)
            (length,) = struct.unpack("!I", await self._read(reader, 4))
            await self._read(reader, length - 4)
            if kind == b"X":
                return
            if self.rows is not None:
                writer.write(self._rows_answer(kind))
                await writer.drain()
            elif kind in (b"Q", b"S"):
                await self._answer(writer, then=_READY)

    def _rows_answer(self, kind: bytes) -> bytes:
        """The answer to one frontend message when every query returns :attr:`rows`."""
        rows = self.rows or []
        width = len(rows[0]) if rows else 1
        columns = b"".join(
            f"c{i}".encode() + b"\0" + struct.pack("!IhIhih", 0, 0, 23, 4, -1, 0)
            for i in range(width)
        )
        description = _message(b"T", struct.pack("!h", width) + columns)
        data = b"".join(
            _message(
                b"D",
                struct.pack("!h", len(row))
                + b"".join(struct.pack("!I", len(str(v))) + str(v).encode() for v in row),
            )
            for row in rows
        )
        done = _message(b"C", f"SELECT {len(rows)}".encode() + b"\0")
        answers = {
            b"Q": description + data + done + _READY,
            b"P": _message(b"1", b""),
            b"B": _message(b"2", b""),
            b"D": description,
            b"E": data + done,
            b"S": _READY,
        }
        return answers.get(kind, b"")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)
        try:
            if not await self._startup(reader, writer):
                return
            if self.ask_password:
                writer.write(b"R" + struct.pack("!II", 8, 3))  # AuthenticationCleartextPassword
                await writer.drain()
                await self._read(reader, 1)  # 'p'
                (length,) = struct.unpack("!I", await self._read(reader, 4))
                await self._read(reader, length - 4)
            if self.accept:
                await self._session(reader, writer)
                return
            await self._answer(writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client went away, or the server is shutting down
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


@pytest_asyncio.fixture
async def fake_pg_server() -> AsyncIterator[FakePgServer]:
    """A running :class:`FakePgServer` with the defaults; tests may change its attributes
    (``error``, ``ask_password``, ``accept``, ``hold``) before a client connects. It runs on
    the test's own event loop; a test on another loop scope uses the class directly."""
    async with FakePgServer() as server:
        yield server
