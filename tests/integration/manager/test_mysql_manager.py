"""The Manager on a MariaDB datasource (issue 13): connection test, ``/schema`` and
validate-schema through the HTTP API, with the real registry and the real MySQL connector."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from fetcher.adapters.sql.registry import SqlConnectorRegistry
from fetcher.adapters.store.sqlite import SqliteMetadataStore
from fetcher.manager.app import create_app
from fetcher.settings import Settings
from tests.contract.engines.mariadb import fresh_database
from tests.services import mysql_connection
from tests.unit.manager.conftest import FakePublisher, base_env, build_runtime
from tests.unit.manager.test_http_rules import assert_error

pytestmark = pytest.mark.integration

C = "/v1/management/connections"
SETUP = (
    "CREATE TABLE orders (id INT PRIMARY KEY, total DECIMAL(10, 2), `Note` TEXT, doc JSON)",
    "CREATE TABLE customers (id INT, email VARCHAR(200))",
    "CREATE VIEW big_orders AS SELECT id FROM orders WHERE total > 100",
    "INSERT INTO orders VALUES (1, 150.00, 'first', '{\"a\": 1}')",
)


@dataclass
class Manager:
    client: httpx.AsyncClient
    datasource: dict[str, Any]
    database: str

    async def connection(self, name: str, **overrides: Any) -> str:
        body = {**self.datasource, "configName": name, **overrides}
        response = await self.client.post(C, json=body, headers={"X-Product-Name": "payments"})
        assert response.status_code == 201, response.text
        return str(response.json()["id"])


@pytest.fixture
async def manager(tmp_path: Path) -> AsyncIterator[Manager]:
    async with fresh_database(SETUP) as (database, reader, password):
        settings = Settings.from_env(base_env(tmp_path))
        store = SqliteMetadataStore(tmp_path / "meta.db")
        await store.open()
        try:
            await store.migrate()
            runtime = build_runtime(settings, store, SqlConnectorRegistry(), FakePublisher())
            runtime.lifecycle.started.set()
            transport = httpx.ASGITransport(app=create_app(runtime))
            datasource = mysql_connection(database, reader, password)
            base = "http://127.0.0.1"
            async with httpx.AsyncClient(transport=transport, base_url=base) as client:
                yield Manager(client, datasource, database)
        finally:
            await store.close()


async def test_connection_test_succeeds_and_a_wrong_password_fails_redacted(
    manager: Manager,
) -> None:
    ident = await manager.connection("maria")
    body = (await manager.client.post(f"{C}/{ident}/test")).json()
    assert body["status"] == "success", body
    wrong = "wrong-Secret;pw'%"
    broken = await manager.connection("maria_broken", password=wrong)
    response = await manager.client.post(f"{C}/{broken}/test")
    assert response.status_code == 200
    assert response.json()["status"] == "failure"
    assert wrong not in response.text
    assert "not supported" not in response.text


async def test_schema_lists_tables_and_views_of_the_connected_database(manager: Manager) -> None:
    ident = await manager.connection("maria")
    response = await manager.client.get(f"{C}/{ident}/schema")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["type"] == "MYSQL"
    assert body["tables"] == [
        {"name": "big_orders", "fields": ["id"], "types": {"id": "int"}},
        {
            "name": "customers",
            "fields": ["email", "id"],
            "types": {"email": "varchar", "id": "int"},
        },
        {
            "name": "orders",
            "fields": ["Note", "doc", "id", "total"],
            "types": {"Note": "text", "doc": "json", "id": "int", "total": "decimal"},
        },
    ]
    closed = await manager.connection("maria_down", port=1)
    assert_error(await manager.client.get(f"{C}/{closed}/schema"), 502, "FET-1041")


async def test_validate_schema_matches_mysql_names_case_insensitively(manager: Manager) -> None:
    await manager.connection("maria")
    ok = {
        "mappedFields": {
            "maria": {
                "ORDERS": ["ID", "note"],
                f"{manager.database.upper()}.customers": ["*"],
                "big_orders": ["id"],
            }
        }
    }
    response = await manager.client.post(f"{C}/validate-schema", json=ok)
    assert response.status_code == 200, response.text
    bad = {"mappedFields": {"maria": {"orders": ["nope"], "other_db.orders": ["id"]}}}
    error = assert_error(
        await manager.client.post(f"{C}/validate-schema", json=bad), 422, "FET-1060"
    )
    assert error["errors"] == [
        {"type": "FIELD_NOT_FOUND", "dataSourceId": "maria", "table": "orders", "field": "nope"},
        {"type": "TABLE_NOT_FOUND", "dataSourceId": "maria", "table": "other_db.orders"},
    ]
