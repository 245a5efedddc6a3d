"""RabbitMQ fixtures: a live connection and fresh, per-test queue and exchange names."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from fetcher.adapters.messaging.rabbitmq import RabbitConnection
from tests.services import RABBITMQ_URL, service_missing

SESSION_SUFFIX = secrets.token_hex(4)


def broker_options(**overrides: Any) -> dict[str, Any]:
    """``RabbitConnection`` keyword arguments parsed from ``FETCHER_TEST_RABBITMQ_URL``."""
    url = urlsplit(RABBITMQ_URL)
    vhost = unquote(url.path[1:]) if len(url.path) > 1 else "/"
    options: dict[str, Any] = {
        "host": url.hostname or "127.0.0.1",
        "port": url.port or 5672,
        "user": unquote(url.username or "guest"),
        "password": unquote(url.password or "guest"),
        "vhost": vhost,
        "tls": url.scheme == "amqps",
        "connect_timeout": 5.0,
    }
    options.update(overrides)
    return options


@pytest.fixture
async def rabbit() -> AsyncIterator[RabbitConnection]:
    connection = RabbitConnection(**broker_options())
    try:
        await connection.open()
    except Exception as exc:
        await connection.close()
        service_missing("RabbitMQ", exc)
        raise
    try:
        yield connection
    finally:
        await connection.close()


@dataclass
class Names:
    """Fresh names for one test; everything listed here is deleted afterwards."""

    suffix: str
    queues: list[str]
    exchanges: list[str]

    def queue(self, role: str) -> str:
        name = f"fetcher.test.{role}.{SESSION_SUFFIX}.{self.suffix}"
        self.queues.append(name)
        return name

    def exchange(self, role: str) -> str:
        name = f"fetcher.test.{role}.{SESSION_SUFFIX}.{self.suffix}"
        self.exchanges.append(name)
        return name


@pytest.fixture
async def names(rabbit: RabbitConnection) -> AsyncIterator[Names]:
    created = Names(secrets.token_hex(3), [], [])
    yield created
    channel = await rabbit.channel()
    try:
        for queue in created.queues:
            await channel.queue_delete(queue)
        for exchange in created.exchanges:
            await channel.exchange_delete(exchange)
    finally:
        await channel.close()
