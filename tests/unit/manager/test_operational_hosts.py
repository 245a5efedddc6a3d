"""§2.10/§2.11: the Manager and the Worker's health server answer the operational routes
through one implementation (``fetcher.services.operations.service``): the same status, bytes and
media type, and a ``/metrics`` scrape that answers whatever the store does."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator

import httpx
import pytest

from fetcher.services.operations.service import Operations
from fetcher.services.store_roles import Backlog
from fetcher.worker.health import create_health_app
from tests.unit.manager.conftest import Harness

ROUTES = ("/health", "/readyz", "/readyz/tenant/abc", "/version", "/nowhere")


@pytest.fixture
async def worker(h: Harness) -> AsyncIterator[httpx.AsyncClient]:
    """The Worker's health server over the harness's runtime."""
    transport = httpx.ASGITransport(app=create_health_app(h.runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client


def answer(response: httpx.Response) -> tuple[int, str, bytes]:
    """Status, media type and body; a check's measured ``latency_ms`` is set to 0."""
    content = response.content
    if response.request.url.path == "/readyz":
        body = response.json()
        for check in body["checks"].values():
            if "latency_ms" in check:
                check["latency_ms"] = 0
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    return response.status_code, response.headers["content-type"], content


async def assert_alike(h: Harness, worker: httpx.AsyncClient, paths: tuple[str, ...]) -> None:
    for path in paths:
        assert answer(await h.client.get(path)) == answer(await worker.get(path)), path


async def test_both_hosts_answer_byte_for_byte_alike(h: Harness, worker: httpx.AsyncClient) -> None:
    await assert_alike(h, worker, ROUTES)  # started, every check up or skipped
    assert (await worker.get("/health")).status_code == 200
    h.runtime.lifecycle.started.clear()  # starting
    await assert_alike(h, worker, ROUTES)
    assert (await worker.get("/health")).status_code == 503

    async def broken() -> None:
        raise ConnectionError("connect to db.example.com:5432 failed for password=hunter22")

    h.runtime.readiness = {"database": broken, "rabbitmq": None}
    h.runtime.lifecycle.draining.set()
    response = await worker.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["checks"]["database"]["status"] == "down"
    assert "db.example.com" not in body["checks"]["database"]["error"]
    assert "hunter22" not in body["checks"]["database"]["error"]
    assert body["checks"]["draining"] == {"status": "down", "reason": "shutting down"}
    await assert_alike(h, worker, ROUTES)


@pytest.mark.parametrize("host", ["manager", "worker"])
async def test_a_scrape_answers_whatever_the_store_raises(
    h: Harness,
    worker: httpx.AsyncClient,
    host: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Not only ``StoreUnavailableError``: any store failure (here a driver's own error
    naming the server) keeps ``/metrics`` a 200 exposition, with the last gauge value, and
    the warning is redacted (§8.7, §9.2)."""
    client = h.client if host == "manager" else worker
    assert "fetcher_outbox_pending 0.0" in (await client.get("/metrics")).text

    async def failing() -> Backlog:
        raise RuntimeError("pool closed: server at db.internal:5432 went away")

    monkeypatch.setattr(h.runtime.store, "backlog", failing)
    caplog.set_level(logging.WARNING, logger="fetcher.services.operations.service")
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert "fetcher_outbox_pending 0.0" in response.text
    assert "# TYPE fetcher_readyz_check_up gauge" in response.text
    [warning] = [r.getMessage() for r in caplog.records]
    assert warning == "metrics: backlog unavailable: pool closed: server at [redacted] went away"


async def test_a_hanging_store_cannot_hold_a_scrape(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The count is bounded by the check budget: the scrape answers, the gauge keeps its
    last value."""
    h.runtime.metrics.outbox_pending.set(7)

    async def hanging() -> Backlog:
        await asyncio.sleep(30)
        return Backlog(0, None, 0, None)

    monkeypatch.setattr(h.runtime.store, "backlog", hanging)
    loop = asyncio.get_running_loop()
    started = loop.time()
    reply = await Operations(h.runtime, budget=0.05).metrics()
    assert loop.time() - started < 5
    assert reply.status == 200
    assert b"fetcher_outbox_pending 7.0" in reply.body
