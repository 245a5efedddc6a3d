"""Issue 12: a request on a kept-alive connection is answered promptly by a running process.

Before the fix every request after the first on a kept-alive connection took about 44 ms
(Nagle's algorithm on the accepted socket meeting the client's delayed ACK), while a new
connection answered in under 2 ms. The bound here is the issue's: the median of 20 kept-alive
``GET /health`` requests stays under 20 ms, on the embedded process (no external server needed)
and on a Manager process. The requests go over ONE ``http.client`` connection, and the test
checks that the socket really stayed the same, so a server that closes the connection after
each answer cannot pass by making every request a fresh, fast one. A control runs the same
measurement against a loopback server that answers in two writes: with Nagle's algorithm on it
must be over the bound (it shows the ~44 ms of the defect), with ``TCP_NODELAY`` under it.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from tests.e2e.conftest import E2E
from tests.e2e.harness import Stack, embedded_fetcher

pytestmark = E2E

REQUESTS = 20
#: The issue's bound for the median; the defect measured ~44 ms, a healthy server ~1 ms.
MEDIAN_BOUND_SECONDS = 0.020


def kept_alive_health_times(base_url: str) -> list[float]:
    """Wall time of each of ``REQUESTS`` ``GET /health`` on one kept-alive connection."""
    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)
    try:
        conn.request("GET", "/health")  # opens the connection; not timed
        first = conn.getresponse()
        first.read()
        assert first.status == 200
        sock = conn.sock
        assert sock is not None
        times = []
        for _ in range(REQUESTS):
            began = time.perf_counter()
            conn.request("GET", "/health")
            response = conn.getresponse()
            response.read()
            times.append(time.perf_counter() - began)
            assert response.status == 200
            assert response.getheader("Connection", "").lower() != "close"
            assert conn.sock is sock, "the server closed the kept-alive connection"
        return times
    finally:
        conn.close()


def assert_prompt(times: list[float]) -> None:
    median = statistics.median(times)
    assert median < MEDIAN_BOUND_SECONDS, (
        f"median kept-alive GET /health {median * 1000:.1f} ms "
        f"(all: {[round(t * 1000, 1) for t in times]})"
    )


@contextlib.contextmanager
def two_write_server(*, nodelay: bool) -> Iterator[str]:
    """A minimal HTTP/1.1 server on loopback that answers every request in two writes (head,
    then body), as a server with Nagle's algorithm on delays: the body waits for the client's
    delayed ACK of the head. Yields its base URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            with conn:
                if nodelay:
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                pending = b""
                while data := conn.recv(65536):
                    pending += data
                    while b"\r\n\r\n" in pending:
                        _, pending = pending.split(b"\r\n\r\n", 1)
                        body = b'{"status":"ok"}'
                        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body))
                        conn.sendall(body)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        listener.close()
        thread.join(timeout=5)


async def test_the_measurement_sees_the_nagle_delay() -> None:
    """Control: the same measurement against a server with the defect is over the bound (it
    measures ~44 ms here), and the same server with ``TCP_NODELAY`` is under it."""
    with two_write_server(nodelay=False) as url:
        slow = await asyncio.to_thread(kept_alive_health_times, url)
    assert statistics.median(slow) >= MEDIAN_BOUND_SECONDS
    with two_write_server(nodelay=True) as url:
        fast = await asyncio.to_thread(kept_alive_health_times, url)
    assert_prompt(fast)


async def test_embedded_kept_alive_requests_are_prompt(tmp_path: Path) -> None:
    async with embedded_fetcher(tmp_path) as process:
        times = await asyncio.to_thread(kept_alive_health_times, process.base_url)
    assert_prompt(times)


async def test_manager_kept_alive_requests_are_prompt(stack: Stack) -> None:
    times = await asyncio.to_thread(kept_alive_health_times, stack.manager.base_url)
    assert_prompt(times)
