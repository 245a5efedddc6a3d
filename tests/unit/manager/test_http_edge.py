"""§2.11 label sets and the §13 limit on requests in flight, through the ASGI application.

The same rules are exercised against a running process in ``tests/e2e/test_http_edge_*.py``;
these tests pin the details (which labels, which headers) quickly.
"""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import AsyncIterator

import httpx

from fetcher.cli.run import listen_socket
from fetcher.services.metrics import HTTP_METHODS
from tests.unit.manager.conftest import Harness, HarnessFactory
from tests.unit.manager.test_http_rules import assert_error

_SAMPLE = re.compile(
    r"^fetcher_http_request(?:s_total|_duration_seconds_count)\{(?P<labels>.*)\} \S+$"
)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def http_label_values(metrics_text: str) -> dict[str, set[str]]:
    """Every value of every label of the two HTTP metrics."""
    values: dict[str, set[str]] = {}
    for line in metrics_text.splitlines():
        match = _SAMPLE.match(line)
        if match:
            for name, value in _LABEL.findall(match["labels"]):
                values.setdefault(name, set()).add(value)
    return values


async def test_methods_outside_the_fixed_set_share_one_label(h: Harness) -> None:
    for index in range(50):
        await h.client.request(f"BREW{index}", "/v1/fetcher")
        await h.client.request("get", "/health")  # methods are case-sensitive
    await h.client.get("/health")
    labels = http_label_values((await h.client.get("/metrics")).text)
    assert labels["method"] == {"other", "GET"}
    assert labels["method"] <= HTTP_METHODS | {"other"}


async def test_unknown_paths_share_the_unmatched_route(h: Harness) -> None:
    for index in range(50):
        await h.client.get(f"/probe-{index}/x")
    connection = await h.create_ok()
    await h.client.get(f"/v1/management/connections/{connection['id']}")
    labels = http_label_values((await h.client.get("/metrics")).text)
    assert labels["route"] == {
        "unmatched",
        "/v1/management/connections",
        "/v1/management/connections/{id}",
    }
    assert labels["status"] == {"404", "201", "200"}


async def _held_request(
    h: Harness, release: asyncio.Event, reading: asyncio.Event
) -> httpx.Response:
    """A ``POST /v1/fetcher`` whose body stays open until ``release`` is set."""

    async def body() -> AsyncIterator[bytes]:
        reading.set()
        yield b"{"
        await release.wait()
        yield b"}"

    return await h.client.post(
        "/v1/fetcher", content=body(), headers={"Content-Type": "application/json"}
    )


async def test_a_request_beyond_the_in_flight_limit_is_503_at_once(
    make_harness: HarnessFactory,
) -> None:
    h = await make_harness(env={"HTTP_MAX_CONNECTIONS": "2", "CORS_ALLOWED_ORIGINS": "https://a"})
    release = asyncio.Event()
    reading = [asyncio.Event(), asyncio.Event()]
    held = [asyncio.create_task(_held_request(h, release, r)) for r in reading]
    await asyncio.wait_for(asyncio.gather(*(r.wait() for r in reading)), 5)
    await asyncio.sleep(0.05)  # both requests are now inside the application, reading bodies

    refused = await h.client.get(
        "/version", headers={"X-Request-Id": "busy-1", "Origin": "https://a"}
    )
    error = assert_error(refused, 503, "FET-0003", "Service Unavailable")
    assert "too many requests" in error["message"]
    assert refused.headers["retry-after"] == "1"
    assert refused.headers["x-request-id"] == "busy-1"
    assert refused.headers["access-control-allow-origin"] == "https://a"

    release.set()
    for task in held:
        assert_error(await task, 400, "FET-0402")  # "{}" is served normally once released
    assert (await h.client.get("/version")).status_code == 200
    metrics = (await h.client.get("/metrics")).text
    assert 'fetcher_http_requests_total{method="GET",route="unmatched",status="503"} 1.0' in metrics


async def test_the_limit_counts_requests_not_answered_ones(make_harness: HarnessFactory) -> None:
    """Requests that finished, successfully or not, free their slot."""
    h = await make_harness(env={"HTTP_MAX_CONNECTIONS": "1"})
    for _ in range(5):
        assert (await h.client.get("/version")).status_code == 200
        assert (await h.client.get("/nope")).status_code == 404
        assert (
            await h.client.post("/v1/fetcher", content=b"x" * (1024 * 1024 + 1))
        ).status_code == 413
    assert (await h.client.get("/version")).status_code == 200


async def test_accepted_connections_send_without_nagle_delay() -> None:
    """The HTTP server's accepted sockets carry ``TCP_NODELAY``: uvicorn writes a response's
    head and body separately, and with Nagle's algorithm the body waited for the client's
    delayed ACK, about 40 ms per request."""
    sock = listen_socket("127.0.0.1", 0)
    accepted: asyncio.Queue[asyncio.StreamWriter] = asyncio.Queue()

    async def on_client(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await accepted.put(writer)

    server = await asyncio.start_server(on_client, sock=sock)
    async with server:
        _, client = await asyncio.open_connection(*sock.getsockname()[:2])
        served = await asyncio.wait_for(accepted.get(), 5)
        nodelay = served.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        assert nodelay != 0
        client.close()
        served.close()
