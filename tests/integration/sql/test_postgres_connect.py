"""PostgreSQL connect: keyword arguments, pinned address, failures without secrets (§2.9.1)."""

from __future__ import annotations

import dataclasses

import pytest

from fetcher.adapters.sql.postgres import PostgresConnector
from fetcher.engine.errors import EngineError, ErrorCategory
from fetcher.engine.model import ConnectionDescriptor, TlsSettings
from fetcher.engine.ports import Connector

pytestmark = pytest.mark.integration


async def test_probe(pg: PostgresConnector) -> None:
    assert isinstance(pg, Connector)
    await pg.probe()


async def test_pinned_address_is_dialed_instead_of_the_name(
    pg_descriptor: ConnectionDescriptor,
) -> None:
    unresolvable = dataclasses.replace(pg_descriptor, host="db.invalid")
    async with PostgresConnector(unresolvable, pinned_address="127.0.0.1") as pg:
        await pg.probe()


async def test_exit_twice_is_safe(pg_descriptor: ConnectionDescriptor) -> None:
    connector = PostgresConnector(pg_descriptor)
    await connector.__aenter__()
    await connector.__aexit__(None, None, None)
    await connector.__aexit__(None, None, None)
    with pytest.raises(EngineError):
        await connector.probe()


@pytest.mark.parametrize(
    "change",
    [
        {"port": 1},
        {"database": "no_such_database_here"},
        {"host": "db.invalid"},
    ],
)
async def test_connect_failure_is_connect_without_secrets(
    pg_descriptor: ConnectionDescriptor, change: dict[str, object]
) -> None:
    broken = dataclasses.replace(
        pg_descriptor,
        password="pw-sentinel-123",
        ssl=TlsSettings(mode="prefer", key="KEY-SENTINEL"),
        **change,  # type: ignore[arg-type]
    )
    with pytest.raises(EngineError) as caught:
        async with PostgresConnector(broken):
            pass
    error = caught.value
    assert error.category is ErrorCategory.CONNECT
    assert error.message == "failed to connect to datasource 'pg'"
    assert error.detail
    for text in (str(error), repr(error), error.text(), error.detail):
        assert "pw-sentinel-123" not in text
        assert "KEY-SENTINEL" not in text
