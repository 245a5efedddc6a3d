"""Shared fixtures for the Manager HTTP tests: a runtime over a SQLite store and fakes."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from fetcher.adapters.store.sqlite import SqliteMetadataStore
from fetcher.bootstrap import Messaging, MetadataStore, Runtime, assemble_runtime
from fetcher.engine import ConnectionDescriptor, ConnectorRegistry
from fetcher.engine.testing import FakeConnector, FakeDatabase, FakeRegistry
from fetcher.engine.types import Column, TableSchema, TypeFamily
from fetcher.manager.app import create_app
from fetcher.services.testing import RecordingPublisher
from fetcher.settings import Settings

ENC_KEY = "kV2RgskAt2gr+rtJmldM0gVEQNXduXXp3Le8VFCQKj8="
PRODUCT = "payments"


#: The publisher fake, under the name the Manager tests use.
FakePublisher = RecordingPublisher


class AutoRegistry(FakeRegistry):
    """A FakeRegistry that creates an empty :class:`FakeDatabase` for unknown names."""

    def __init__(self) -> None:
        super().__init__({})
        self.opened: list[ConnectionDescriptor] = []

    def connector_for(self, connection: ConnectionDescriptor) -> FakeConnector:
        self.opened.append(connection)
        database = self.databases.setdefault(connection.config_name, FakeDatabase())
        return FakeConnector(connection, database)


def table(schema: str, name: str, *columns: str) -> TableSchema:
    return TableSchema(schema, name, tuple(Column(c, TypeFamily.TEXT) for c in columns))


def base_env(tmp_path: Path, mode: str = "embedded") -> dict[str, str]:
    env = {"FETCHER_MODE": mode, "APP_ENC_KEY": ENC_KEY}
    if mode == "embedded":
        env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'meta.db'}"
    else:
        env |= {"DATABASE_URL": "postgresql://u@db/x", "RABBITMQ_HOST": "rabbit"}
    return env


def build_runtime(
    settings: Settings,
    store: MetadataStore,
    registry: ConnectorRegistry,
    publisher: FakePublisher,
    internal: Mapping[str, ConnectionDescriptor] | None = None,
) -> Runtime:
    """The runtime bootstrap builds (the same composition), over fakes."""
    if internal:
        settings = dataclasses.replace(settings, internal_datasources=dict(internal))
    return assemble_runtime(
        settings, store=store, registry=registry, messaging=Messaging(work_publisher=publisher)
    )


class Harness:
    """A client over ``create_app(runtime)`` plus the fakes behind it."""

    def __init__(
        self,
        runtime: Runtime,
        client: httpx.AsyncClient,
        publisher: FakePublisher,
        registry: AutoRegistry,
    ) -> None:
        self.runtime = runtime
        self.client = client
        self.publisher = publisher
        self.registry = registry

    @property
    def store(self) -> MetadataStore:
        return self.runtime.store

    def db(self, name: str) -> FakeDatabase:
        return self.registry.databases.setdefault(name, FakeDatabase())

    async def create(self, body: Mapping[str, Any], product: str = PRODUCT) -> httpx.Response:
        return await self.client.post(
            "/v1/management/connections", json=body, headers={"X-Product-Name": product}
        )

    async def create_ok(self, name: str = "pg_main", **overrides: Any) -> dict[str, Any]:
        response = await self.create(pg_body(name, **overrides))
        assert response.status_code == 201, response.text
        result: dict[str, Any] = response.json()
        return result


def pg_body(name: str = "pg_main", **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "configName": name,
        "type": "POSTGRESQL",
        "host": "db.example.com",
        "port": 5432,
        "databaseName": "ledger",
        "userName": "reader",
        "password": "s3cret-pass",
    }
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not ...}


HarnessFactory = Callable[..., Awaitable[Harness]]


@pytest.fixture
async def make_harness(tmp_path: Path) -> AsyncIterator[HarnessFactory]:
    """Build harnesses: ``await make_harness(env={...}, internal={...})``."""
    async with AsyncExitStack() as stack:

        async def factory(
            env: Mapping[str, str] | None = None,
            internal: Mapping[str, ConnectionDescriptor] | None = None,
            mode: str = "embedded",
        ) -> Harness:
            settings = Settings.from_env({**base_env(tmp_path, mode), **(env or {})})
            store = SqliteMetadataStore(tmp_path / "meta.db")
            await store.open()
            stack.push_async_callback(store.close)
            await store.migrate()
            registry = AutoRegistry()
            publisher = FakePublisher()
            runtime = build_runtime(settings, store, registry, publisher, internal)
            runtime.lifecycle.started.set()
            transport = httpx.ASGITransport(app=create_app(runtime))
            client = httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")
            await stack.enter_async_context(client)
            return Harness(runtime, client, publisher, registry)

        yield factory


@pytest.fixture
async def h(make_harness: HarnessFactory) -> Harness:
    """The default harness: embedded mode, no internal datasources."""
    return await make_harness()
