"""The metadata store contract on SQLite (a temporary file; no network)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from fetcher.adapters.store._common import ts_text
from fetcher.adapters.store.sqlite import SqliteMetadataStore
from fetcher.bootstrap import MetadataStore
from fetcher.services.store_roles import StoreUnavailableError
from tests.unit.store.store_contract import T0, StoreContract, connection
from tests.unit.store.tenant_contract import TenantContract


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqliteMetadataStore]:
    async with SqliteMetadataStore(tmp_path / "metadata.db") as opened:
        await opened.migrate()
        yield opened


class TestSqliteStore(StoreContract, TenantContract):
    """Every contract case (tenant isolation included), on SQLite."""


def test_sqlite_store_satisfies_the_port(tmp_path: Path) -> None:
    port: MetadataStore = SqliteMetadataStore(tmp_path / "x.db")
    assert "x.db" in repr(port)


async def test_data_survives_reopen_and_migrations_are_recorded(tmp_path: Path) -> None:
    path = tmp_path / "metadata.db"
    async with SqliteMetadataStore(path) as first:
        await first.migrate()
        await first.insert_connection(connection("kept"))
    async with SqliteMetadataStore(path) as second:
        await second.migrate()
        assert await second.get_connection_by_name("kept", tenant="") is not None
        versions = await second._run(
            lambda conn: conn.execute("SELECT version FROM schema_migrations").fetchall()
        )
        assert versions == [{"version": v} for v in (1, 2, 3, 4, 5, 6, 7)]
        mode = await second._run(lambda conn: conn.execute("PRAGMA journal_mode").fetchone())
        assert mode == {"journal_mode": "wal"}


async def test_closed_store_is_unavailable_and_close_is_idempotent(tmp_path: Path) -> None:
    store = SqliteMetadataStore(tmp_path / "metadata.db")
    with pytest.raises(StoreUnavailableError):
        await store.ping()
    await store.open()
    await store.close()
    await store.close()
    with pytest.raises(StoreUnavailableError):
        await store.ping()


def test_timestamp_text_sorts_and_truncates() -> None:
    assert ts_text(T0.replace(microsecond=999999)) == "2026-01-02T03:04:05.999Z"
    assert ts_text(T0) < ts_text(T0.replace(second=6))


_WITHOUT_PSYCOPG = """
import asyncio, sys
from importlib.abc import MetaPathFinder

class Blocked(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("psycopg", "psycopg_pool"):
            raise ImportError(f"{name} is blocked")
        return None

sys.meta_path.insert(0, Blocked())
from fetcher.adapters.store.sqlite import SqliteMetadataStore

async def main():
    async with SqliteMetadataStore(sys.argv[1]) as store:
        await store.migrate()
        await store.ping()
    print(sorted(m for m in sys.modules if m.startswith("psycopg")))

asyncio.run(main())
"""


def test_the_sqlite_store_runs_without_the_postgresql_driver(tmp_path: Path) -> None:
    """Embedded mode runs without the optional ``postgres`` extra: the shared statements,
    dialect and store layer import no driver; psycopg lives in ``postgres.py`` only."""
    done = subprocess.run(  # noqa: S603 - this interpreter and a fixed script, no shell
        [sys.executable, "-c", _WITHOUT_PSYCOPG, str(tmp_path / "metadata.db")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
