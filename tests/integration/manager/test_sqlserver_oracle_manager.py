"""SQL Server and Oracle through the Manager against a closed port (no server of either can run
here): the real registry builds the real connectors, the real drivers dial and are refused, and
every route fails cleanly (§2.6.7 status failure, §2.6.8 502 FET-1041, §2.6.9 DATA_SOURCE_DOWN,
§3.6 FET-1040), redacted, never ``datasource type <T> is not supported``."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from fetcher.adapters.sql.oracle import OracleConnector
from fetcher.adapters.sql.registry import SqlConnectorRegistry
from fetcher.adapters.sql.sqlserver import SqlServerConnector
from fetcher.adapters.store.sqlite import SqliteMetadataStore
from fetcher.engine import ConnectionDescriptor, Connector
from fetcher.manager.app import create_app
from fetcher.settings import Settings
from tests.unit.manager.conftest import FakePublisher, base_env, build_runtime
from tests.unit.manager.test_http_rules import assert_error

C = "/v1/management/connections"
PASSWORD = "Sup3r-secret;PWD={x}"
FAILURE = (
    "The adapter failed to connect to the target data source. Check credentials and network access."
)


class RecordingRegistry(SqlConnectorRegistry):
    """The production registry, remembering which connector classes it built."""

    def __init__(self) -> None:
        super().__init__()
        self.built: list[type] = []

    def connector_for(self, connection: ConnectionDescriptor) -> Connector:
        connector = super().connector_for(connection)
        self.built.append(type(connector))
        return connector


@dataclass
class Manager:
    client: httpx.AsyncClient
    registry: RecordingRegistry


@pytest.fixture
async def manager(tmp_path: Path) -> AsyncIterator[Manager]:
    settings = Settings.from_env(base_env(tmp_path))
    store = SqliteMetadataStore(tmp_path / "meta.db")
    await store.open()
    try:
        await store.migrate()
        registry = RecordingRegistry()
        runtime = build_runtime(settings, store, registry, FakePublisher())
        runtime.lifecycle.started.set()
        transport = httpx.ASGITransport(app=create_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield Manager(client, registry)
    finally:
        await store.close()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


ENGINES: dict[str, tuple[dict[str, Any], type, str]] = {
    "SQL_SERVER": ({"schema": "sales"}, SqlServerConnector, "TCP Provider"),
    "ORACLE": ({"metadata": {"serviceName": "FREEPDB1"}}, OracleConnector, "DPY-6005"),
}


async def create(manager: Manager, kind: str, name: str) -> str:
    extra, _connector, _marker = ENGINES[kind]
    body = {
        "configName": name,
        "type": kind,
        "host": "127.0.0.1",
        "port": closed_port(),
        "databaseName": "ledger",
        "userName": "reader",
        "password": PASSWORD,
        **extra,
    }
    response = await manager.client.post(C, json=body, headers={"X-Product-Name": "payments"})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def assert_clean(text: str) -> None:
    assert "not supported" not in text
    assert PASSWORD not in text
    assert "127.0.0.1" not in text


@pytest.mark.parametrize("kind", sorted(ENGINES))
async def test_routes_fail_cleanly_against_a_closed_port(
    manager: Manager, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    _extra, connector_class, marker = ENGINES[kind]
    name = f"{kind.lower()}_down"
    ident = await create(manager, kind, name)
    caplog.set_level(logging.INFO, logger="fetcher")

    mapped = {"mappedFields": {name: {"orders": ["id"]}}}
    job = {
        "dataRequest": {"mappedFields": mapped["mappedFields"]},
        "metadata": {"source": "payments"},
    }
    # Concurrently: each refused connect waits out the SQL Server driver's login timeout.
    tested, schema, validated, created = await asyncio.gather(
        manager.client.post(f"{C}/{ident}/test"),
        manager.client.get(f"{C}/{ident}/schema"),
        manager.client.post(f"{C}/validate-schema", json=mapped),
        manager.client.post("/v1/fetcher", json=job),
    )

    assert tested.status_code == 200, tested.text
    body = tested.json()
    assert (body["status"], body["message"]) == ("failure", FAILURE)
    logged = [r.getMessage() for r in caplog.records if "failed: " in r.getMessage()]
    assert len(logged) == 4  # test, schema, validate-schema and the job's live test
    for line in logged:
        assert marker in line  # the real driver dialed and was refused

    assert_error(schema, 502, "FET-1041")
    assert_clean(schema.text)

    error = assert_error(validated, 422, "FET-1060")
    assert error["errors"] == [{"type": "DATA_SOURCE_DOWN", "dataSourceId": name}]
    assert_clean(validated.text)

    rejected = assert_error(created, 400, "FET-1040")
    assert rejected["message"] == f"Connection '{name}' is not available"
    assert_clean(created.text)

    assert manager.registry.built == [connector_class] * 4
    for record in caplog.records:
        assert_clean(record.getMessage())
