"""MongoDB integration targets: the nx-27017 wire server (``scripts/mongo-server.sh``), and a
real MongoDB when ``FETCHER_TEST_MONGODB_URL`` names one (skipped with that reason otherwise).

Each test gets a fresh database. On nx-27017, which has no authentication, the reader
connects without credentials (§2.5); on a real server a reader user with a password is
created in that database and the connector authenticates with ``authSource`` = the database.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from pymongo import AsyncMongoClient

from fetcher.engine import ConnectionDescriptor
from fetcher.engine.types import EngineType
from tests.services import MONGODB_HOST, MONGODB_PORT, service_missing

REAL_URL_VARIABLE = "FETCHER_TEST_MONGODB_URL"

pytestmark = pytest.mark.integration


@dataclass(frozen=True, slots=True)
class Target:
    """Where a test's fresh database lives and how the reader reaches it."""

    name: str
    real: bool
    admin: AsyncMongoClient[dict[str, Any]]
    database: str
    descriptor: ConnectionDescriptor

    @property
    def db(self) -> Any:
        return self.admin[self.database]


def _real_admin(url: str) -> tuple[AsyncMongoClient[dict[str, Any]], str, int]:
    """The admin client of the real server; the URL is test configuration, never product
    input (the connector itself only ever gets keyword arguments)."""
    parts = urlsplit(url)
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 27017,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        directConnection=True,
        serverSelectionTimeoutMS=5000,
    )
    return client, parts.hostname or "127.0.0.1", parts.port or 27017


@pytest.fixture(params=["nx", "real"])
async def target(request: pytest.FixtureRequest) -> AsyncIterator[Target]:
    database = f"it_{secrets.token_hex(4)}"
    if request.param == "real":
        url = os.environ.get(REAL_URL_VARIABLE)
        if not url:
            pytest.skip(f"{REAL_URL_VARIABLE} is not set (no real MongoDB to run against)")
        admin, host, port = _real_admin(url)
    else:
        admin = AsyncMongoClient(
            host=MONGODB_HOST,
            port=MONGODB_PORT,
            directConnection=True,
            serverSelectionTimeoutMS=2000,
        )
        host, port = MONGODB_HOST, MONGODB_PORT
    try:
        await admin.admin.command("ping")
    except Exception as exc:
        await admin.close()
        service_missing("MongoDB (scripts/mongo-server.sh start)", exc)
        raise
    descriptor = ConnectionDescriptor(
        config_name="mongo_it", type=EngineType.MONGODB, host=host, port=port, database=database
    )
    if request.param == "real":
        password = f"pw'{secrets.token_hex(8)}\"%;"
        await admin[database].command(
            "createUser", "reader", pwd=password, roles=[{"role": "read", "db": database}]
        )
        descriptor = replace(
            descriptor,
            username="reader",
            password=password,
            metadata={"authSource": database},
        )
    try:
        yield Target(request.param, request.param == "real", admin, database, descriptor)
    finally:
        if request.param == "real":
            await admin[database].command("dropUser", "reader")
        await admin.drop_database(database)
        await admin.close()
