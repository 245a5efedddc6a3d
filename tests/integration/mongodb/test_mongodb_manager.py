"""The Manager on a MongoDB datasource: create (without credentials on nx-27017, with them on a
real server), connection test, ``/schema`` and validate-schema through the HTTP API, with the
production registry and connector."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from bson.objectid import ObjectId

from fetcher.adapters.sql.registry import SqlConnectorRegistry
from fetcher.adapters.store.sqlite import SqliteMetadataStore
from fetcher.manager.app import create_app
from fetcher.settings import Settings
from tests.contract.engines._common import closed_port
from tests.integration.mongodb.conftest import Target
from tests.unit.manager.conftest import FakePublisher, base_env, build_runtime
from tests.unit.manager.test_http_rules import assert_error

pytestmark = pytest.mark.integration

C = "/v1/management/connections"


@dataclass
class Manager:
    client: httpx.AsyncClient
    datasource: dict[str, Any]

    async def connection(self, name: str, **overrides: Any) -> httpx.Response:
        body = {**self.datasource, "configName": name, **overrides}
        body = {k: v for k, v in body.items() if v is not None}
        return await self.client.post(C, json=body, headers={"X-Product-Name": "payments"})

    async def connection_id(self, name: str, **overrides: Any) -> str:
        response = await self.connection(name, **overrides)
        assert response.status_code == 201, response.text
        return str(response.json()["id"])


@pytest.fixture
async def manager(target: Target, tmp_path: Path) -> AsyncIterator[Manager]:
    await target.db["orders"].insert_many(
        [{"_id": ObjectId(), "total": 10, "note": "a"}, {"_id": ObjectId(), "status": "x"}]
    )
    await target.db.create_collection("empty")
    settings = Settings.from_env(base_env(tmp_path))
    store = SqliteMetadataStore(tmp_path / "meta.db")
    await store.open()
    try:
        await store.migrate()
        runtime = build_runtime(settings, store, SqlConnectorRegistry(), FakePublisher())
        runtime.lifecycle.started.set()
        transport = httpx.ASGITransport(app=create_app(runtime))
        d = target.descriptor
        datasource: dict[str, Any] = {
            "type": "MONGODB",
            "host": d.host,
            "port": d.port,
            "databaseName": d.database,
            "userName": d.username,
            "password": d.password,
            "metadata": dict(d.metadata) or None,
        }
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield Manager(client, datasource)
    finally:
        await store.close()


async def test_connection_is_created_and_tested(manager: Manager, target: Target) -> None:
    response = await manager.connection("mongo")
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["type"] == "MONGODB"
    assert ("userName" in body) is target.real  # omitted without credentials (§2.5)
    assert "password" not in body
    tested = (await manager.client.post(f"{C}/{body['id']}/test")).json()
    assert tested["status"] == "success", tested
    assert tested["message"] == "Connection successful"


async def test_connection_test_fails_cleanly_on_a_closed_port(manager: Manager) -> None:
    ident = await manager.connection_id("mongo_down", port=closed_port())
    response = await manager.client.post(f"{C}/{ident}/test")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "failure"
    assert "not supported" not in response.text


async def test_wrong_password_fails_the_test_redacted(manager: Manager, target: Target) -> None:
    if not target.real:
        pytest.skip("nx-27017 has no authentication")
    wrong = "Wrong-Pa55;word'"
    ident = await manager.connection_id("mongo_wrong", password=wrong)
    response = await manager.client.post(f"{C}/{ident}/test")
    assert response.json()["status"] == "failure"
    assert wrong not in response.text


async def test_schema_lists_collections_and_sampled_fields(manager: Manager) -> None:
    ident = await manager.connection_id("mongo")
    response = await manager.client.get(f"{C}/{ident}/schema", params={"schemas": "ignored"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["type"] == "MONGODB"
    assert body["tables"] == [
        {"name": "empty", "fields": ["_id"], "types": {"_id": "objectId"}},
        {
            "name": "orders",
            "fields": ["_id", "note", "status", "total"],
            "types": {"_id": "objectId", "note": "string", "status": "string", "total": "int"},
        },
    ]
    closed = await manager.connection_id("mongo_down", port=closed_port())
    assert_error(await manager.client.get(f"{C}/{closed}/schema"), 502, "FET-1041")


async def test_validate_schema_matches_names_exactly(manager: Manager) -> None:
    await manager.connection_id("mongo")
    ok = {"mappedFields": {"mongo": {"orders": ["_id", "status"], "empty": ["*"]}}}
    response = await manager.client.post(f"{C}/validate-schema", json=ok)
    assert response.status_code == 200, response.text
    bad = {"mappedFields": {"mongo": {"orders": ["Status"], "Orders": ["_id"]}}}
    error = assert_error(
        await manager.client.post(f"{C}/validate-schema", json=bad), 422, "FET-1060"
    )
    assert error["errors"] == [
        {"type": "FIELD_NOT_FOUND", "dataSourceId": "mongo", "table": "orders", "field": "Status"},
        {"type": "TABLE_NOT_FOUND", "dataSourceId": "mongo", "table": "Orders"},
    ]


async def test_credentials_are_optional_together(manager: Manager) -> None:
    half = await manager.connection("mongo_half", userName="app", password=None)
    body = assert_error(half, 400, "FET-0402")
    assert body["fields"] == {"password": "password is a required field"}
    ident = await manager.connection_id("mongo_pair", userName="app", password="pw-1")
    patched = await manager.client.patch(f"{C}/{ident}", json={"userName": None, "password": None})
    assert patched.status_code == 200, patched.text
    assert "userName" not in patched.json()
