"""§9.4 "Name collisions": at startup, each internal datasource whose configName a stored
connection already uses is one ERROR line (per tenant that sees it, §12.5), on a real store."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fetcher.adapters.store.sqlite import SqliteMetadataStore
from fetcher.services.connections.name_collisions import log_name_collisions
from tests.unit.store.store_contract import connection


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteMetadataStore]:
    async with SqliteMetadataStore(tmp_path / "metadata.db") as opened:
        await opened.migrate()
        yield opened


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "fetcher.services.connections.name_collisions" and r.levelno == logging.ERROR
    ]


async def test_single_tenant_collisions_are_logged_once_each(
    store: SqliteMetadataStore, caplog: pytest.LogCaptureFixture
) -> None:
    await store.insert_connection(connection("ledger"))
    await store.insert_connection(connection("crm"))
    found = await log_name_collisions(store, ["ledger", "warehouse"], {}, multi_tenant=False)
    assert found == [("", "ledger")]
    assert _errors(caplog) == [
        "internal datasource ledger has the configName of a stored connection: every job "
        "that resolves 'ledger' fails as ambiguous until one of them is renamed or removed"
    ]


async def test_a_deleted_connection_does_not_collide(
    store: SqliteMetadataStore, caplog: pytest.LogCaptureFixture
) -> None:
    record = connection("ledger")
    await store.insert_connection(record)
    assert await store.soft_delete_connection(record.id, record.created_at, tenant="")
    assert await log_name_collisions(store, ["ledger"], {}, multi_tenant=False) == []
    assert _errors(caplog) == []


async def test_in_multi_tenant_mode_only_the_tenants_that_see_it_collide(
    store: SqliteMetadataStore, caplog: pytest.LogCaptureFixture
) -> None:
    for tenant in ("acme", "globex", ""):
        await store.insert_connection(dataclasses.replace(connection("ledger"), tenant=tenant))
    tenants = {"ledger": frozenset({"acme", "initech"})}
    found = await log_name_collisions(store, ["ledger"], tenants, multi_tenant=True)
    assert found == [("acme", "ledger")]  # globex and "" do not see it; initech has no row
    [line] = _errors(caplog)
    assert "of tenant acme" in line
