"""A hostile HTTP server on ``127.0.0.1`` for the command line's tests (issue 24): it answers
each ``GET`` path with what the test chose — a JSON document, or a body of hundreds of MB
streamed from one small repeated chunk (the server itself never holds it), with no
``Content-Length`` so the client cannot refuse it up front.

Run it as a context manager; it serves from a daemon thread and is shut down on exit. Paths
are matched without their query string; an unknown one gets ``404``. :attr:`requests` lists
every path asked for, in order.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

__all__ = ["Answer", "HostileHttpServer", "streamed_json", "trickled"]

MIB = 1024 * 1024


@dataclass(frozen=True)
class Answer:
    """One answer: a status and the body's parts, written one after the other."""

    parts: Iterable[bytes] | None = None
    status: int = 200
    content_type: str = "application/json"

    @classmethod
    def json(cls, document: Any, status: int = 200) -> Answer:
        return cls([json.dumps(document, ensure_ascii=False).encode()], status)


def streamed_json(head: bytes, filler: bytes, size: int, tail: bytes) -> Answer:
    """``head``, then ``filler`` repeated up to ``size`` bytes, then ``tail``: a JSON text of
    ``size`` bytes and more that costs the server one ``filler`` of memory."""

    def parts() -> Iterator[bytes]:
        yield head
        chunk = filler * max(1, MIB // len(filler))
        sent = 0
        while sent < size:
            piece = chunk[: size - sent]
            yield piece
            sent += len(piece)
        yield tail

    return Answer(_Replayable(parts))


def trickled(body: bytes, every: float) -> Answer:
    """``body`` one byte at a time, ``every`` seconds apart: an answer that never trips a
    read timeout longer than ``every`` and takes ``len(body) × every`` seconds to arrive."""

    def parts() -> Iterator[bytes]:
        for index in range(len(body)):
            if index:
                time.sleep(every)
            yield body[index : index + 1]

    return Answer(_Replayable(parts))


class _Replayable:
    """An iterable that starts over each time it is iterated (one answer, many requests)."""

    def __init__(self, make: Any) -> None:
        self._make = make

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._make())


@dataclass
class HostileHttpServer:
    routes: dict[str, Answer] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the server is not running")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> Self:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # the body ends when the connection closes

            def do_GET(self) -> None:  # the http.server hook name
                path = self.path.split("?", 1)[0]
                owner.requests.append(path)
                answer = owner.routes.get(path, Answer.json({"code": "FET-1001"}, 404))
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.content_type)
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    for part in answer.parts or ():
                        self.wfile.write(part)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped reading: what a bounded client does

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
