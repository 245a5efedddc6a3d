"""Manager HTTP tests on PostgreSQL: the metadata store and a real PostgreSQL datasource."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import psycopg
import pytest

from fetcher.adapters.sql.registry import SqlConnectorRegistry
from fetcher.adapters.store.postgres import PostgresMetadataStore
from fetcher.manager.app import create_app
from fetcher.settings import Settings
from tests.unit.manager.conftest import ENC_KEY, FakePublisher, build_runtime

DATASOURCE_SQL = """
DROP SCHEMA IF EXISTS shop CASCADE;
CREATE SCHEMA shop;
CREATE TABLE shop.orders (id integer, total numeric, "Note" text);
CREATE TABLE shop.customers (id integer, email text);
CREATE VIEW shop.big_orders AS SELECT id FROM shop.orders WHERE total > 100;
"""


@dataclass
class PgHarness:
    client: httpx.AsyncClient
    publisher: FakePublisher
    store: PostgresMetadataStore
    datasource: dict[str, Any]

    async def create_connection(self, name: str, **overrides: Any) -> httpx.Response:
        body = {**self.datasource, "configName": name, **overrides}
        return await self.client.post(
            "/v1/management/connections", json=body, headers={"X-Product-Name": "payments"}
        )


def _datasource(dsn: str) -> dict[str, Any]:
    params = psycopg.conninfo.conninfo_to_dict(dsn)
    return {
        "type": "POSTGRESQL",
        "host": str(params.get("host", "127.0.0.1")),
        "port": int(str(params.get("port", 5432))),
        "databaseName": str(params["dbname"]),
        "userName": str(params.get("user", "postgres")),
        "password": str(params.get("password") or "unused-password"),
    }


@pytest.fixture
async def pg(metadata_dsn: str) -> AsyncIterator[PgHarness]:
    with psycopg.connect(metadata_dsn, autocommit=True) as conn:
        conn.execute(DATASOURCE_SQL)
    store = PostgresMetadataStore(metadata_dsn)
    await store.open()
    try:
        await store.migrate()
        async with await psycopg.AsyncConnection.connect(metadata_dsn, autocommit=True) as conn:
            await conn.execute("TRUNCATE connections, jobs, job_datasources, outbox CASCADE")
        settings = Settings.from_env(
            {
                "FETCHER_MODE": "manager",
                "APP_ENC_KEY": ENC_KEY,
                "DATABASE_URL": "postgresql://fetcher@metadata/fetcher",
                "RABBITMQ_HOST": "rabbit",
            }
        )
        publisher = FakePublisher()
        runtime = build_runtime(settings, store, SqlConnectorRegistry(), publisher)
        runtime.lifecycle.started.set()
        transport = httpx.ASGITransport(app=create_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield PgHarness(client, publisher, store, _datasource(metadata_dsn))
    finally:
        await store.close()
