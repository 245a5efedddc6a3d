"""Regression tests for defects the chaos suite found, each through a chaos proxy in front of
the real server:

* the metadata store answered a request only after the pool's full timeout (10 s) while the
  database was unreachable, where the Manager must answer ``503 FET-0003`` quickly (§2.3);
* after the database came back, psycopg_pool's exponential reconnection back-off (1, 2, 4,
  8 s …) kept the store failing for up to 8 s more (recovery ≤ 20 s goal, and every request
  meanwhile a 503);
* after a broker outage, aio-pika waited its default 5 s before reconnecting, so every work
  publish in that dead time failed (the Manager fails the job, §3.6 step 16).
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import pytest
import pytest_asyncio

from fetcher.adapters.messaging.rabbitmq import RabbitConnection, RabbitWorkPublisher
from fetcher.adapters.store._program import Statement
from fetcher.adapters.store.postgres import PostgresMetadataStore
from fetcher.services.store_roles import StoreUnavailableError
from tests.chaos.proxy import ChaosProxy
from tests.services import RABBITMQ_URL, service_missing

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]


@pytest_asyncio.fixture
async def store_proxy(metadata_dsn: str) -> AsyncIterator[tuple[ChaosProxy, str]]:
    import psycopg

    parts = psycopg.conninfo.conninfo_to_dict(metadata_dsn)
    async with ChaosProxy(int(str(parts.get("port", 5432)))) as proxy:
        parts["port"] = str(proxy.port)
        parts["host"] = "127.0.0.1"
        yield proxy, psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in parts.items()})


async def _until_ok(action: object, within: float) -> float:
    """Seconds until ``action()`` succeeds (polling every 0.1 s); fails after ``within``."""
    began = time.monotonic()
    while True:
        try:
            await action()  # type: ignore[operator]
            return time.monotonic() - began
        except Exception:
            if time.monotonic() - began > within:
                raise
            await asyncio.sleep(0.1)


async def test_store_fails_fast_while_unreachable_and_recovers_at_once(
    store_proxy: tuple[ChaosProxy, str],
) -> None:
    proxy, dsn = store_proxy
    async with PostgresMetadataStore(dsn, checkout_timeout=1.0) as store:
        await store.ping()
        outage = asyncio.create_task(proxy.outage(8.0))
        await asyncio.sleep(0.2)
        for _ in range(3):  # every request during the outage: a quick StoreUnavailableError
            began = time.monotonic()
            with pytest.raises(StoreUnavailableError):
                await store.ping()
            assert time.monotonic() - began < 1.8
        await outage
        # psycopg_pool alone would retry after its back-off (≈ 7 s later here).
        assert await _until_ok(store.ping, within=15.0) < 2.0


async def test_store_default_checkout_waits_out_a_short_outage(
    store_proxy: tuple[ChaosProxy, str],
) -> None:
    """A Worker's store (no short checkout) rides through a 2 s outage: the request waits
    and succeeds on the renewed pool instead of failing."""
    proxy, dsn = store_proxy
    async with PostgresMetadataStore(dsn) as store:
        await store.ping()
        outage = asyncio.create_task(proxy.outage(2.0))
        await asyncio.sleep(0.2)
        await store.ping()  # waits (≤ 10 s) and succeeds after the outage
        await outage


async def test_a_busy_store_waits_for_a_connection_instead_of_failing_fast(
    store_proxy: tuple[ChaosProxy, str],
) -> None:
    """The short checkout bound is for an unreachable database only: with every pooled
    connection in use by a slow statement and the database fine, a request waits for one
    (as before) and the pool is not renewed (no reconnection churn under load)."""
    _, dsn = store_proxy
    async with PostgresMetadataStore(dsn, max_size=1, checkout_timeout=0.3) as store:
        await store.ping()
        pool = store._pool
        busy = asyncio.create_task(store._first(Statement("SELECT pg_sleep(1.5) AS slept")))
        await asyncio.sleep(0.2)
        began = time.monotonic()
        await store.ping()  # waits ≈ 1.3 s for the one connection
        assert time.monotonic() - began > 0.8
        await busy
        assert store._pool is pool


async def test_work_publisher_recovers_within_two_seconds_of_a_broker_outage() -> None:
    import aio_pika

    amqp = urlsplit(RABBITMQ_URL)
    try:
        admin = await aio_pika.connect(RABBITMQ_URL, timeout=5)
    except Exception as exc:
        service_missing("RabbitMQ", exc)
        raise
    queue = f"fetcher.chaos.regress.{secrets.token_hex(4)}"
    async with admin, ChaosProxy(amqp.port or 5672) as proxy:
        channel = await admin.channel()
        await channel.declare_queue(queue, auto_delete=False)
        connection = RabbitConnection(
            host="127.0.0.1",
            port=proxy.port,
            user=amqp.username or "guest",
            password=amqp.password or "guest",
            vhost="/",
            tls=False,
        )
        try:
            async with connection, RabbitWorkPublisher(connection, queue) as publisher:
                await publisher.publish_work(b"{}", {"x": 1})
                await proxy.outage(1.0)

                async def publish() -> None:
                    await publisher.publish_work(b"{}", {"x": 2})

                # aio-pika's default reconnect interval (5 s) made this ≈ 4 s.
                assert await _until_ok(publish, within=15.0) < 2.5
        finally:
            await channel.queue_delete(queue)
