"""The metadata store contract on PostgreSQL, plus PostgreSQL-only guarantees."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest

from fetcher.adapters.store.postgres import PostgresMetadataStore
from fetcher.bootstrap import MetadataStore
from fetcher.services.store_roles import ActiveDuplicateError, StoreUnavailableError
from tests.unit.store.store_contract import (
    MS,
    T0,
    StoreContract,
    complete,
    job,
    processing_job,
)
from tests.unit.store.tenant_contract import TenantContract

pytestmark = pytest.mark.integration

TABLES = "outbox, job_datasources, job_connections, jobs, connections"


@pytest.fixture
async def store(metadata_dsn: str) -> AsyncIterator[PostgresMetadataStore]:
    async with PostgresMetadataStore(metadata_dsn, max_size=8) as opened:
        await opened.migrate()
        async with await psycopg.AsyncConnection.connect(metadata_dsn, autocommit=True) as conn:
            await conn.execute(f"TRUNCATE {TABLES} RESTART IDENTITY")
        yield opened


class TestPostgresStore(StoreContract, TenantContract):
    """Every contract case (tenant isolation included), on PostgreSQL."""


def test_postgres_store_satisfies_the_port() -> None:
    port: MetadataStore = PostgresMetadataStore("host=x password=hunter2")
    assert "hunter2" not in repr(port)


async def test_concurrent_migrations_are_serialized(metadata_dsn: str) -> None:
    stores = [PostgresMetadataStore(metadata_dsn, max_size=1) for _ in range(3)]
    try:
        for s in stores:
            await s.open()
        await asyncio.gather(*(s.migrate() for s in stores))
    finally:
        for s in stores:
            await s.close()


async def test_documents_are_text_columns(store: PostgresMetadataStore, metadata_dsn: str) -> None:
    async with await psycopg.AsyncConnection.connect(metadata_dsn) as conn:
        cur = await conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns"
            " WHERE table_name = 'jobs' AND column_name LIKE %s ORDER BY column_name",
            ("%_json",),
        )
        types: dict[str, str] = dict(await cur.fetchall())
    assert set(types.values()) == {"text"}
    assert len(types) == 6  # the four request documents, connection IDs, the result summary


async def test_unreachable_server_is_unavailable_without_secrets() -> None:
    dsn = "host=127.0.0.1 port=1 user=postgres password=s3cr3t-sentinel dbname=x"
    store = PostgresMetadataStore(dsn, connect_timeout=0.5)
    with pytest.raises(StoreUnavailableError) as caught:
        await store.open()
    assert "s3cr3t-sentinel" not in str(caught.value)
    assert "s3cr3t-sentinel" not in repr(caught.value)
    with pytest.raises(StoreUnavailableError):
        await store.ping()
    await store.close()


async def test_process_lock_is_exclusive(store: PostgresMetadataStore, metadata_dsn: str) -> None:
    assert await store.acquire_process_lock()
    async with PostgresMetadataStore(metadata_dsn, max_size=1) as other:
        assert not await other.acquire_process_lock()
        await store.close()
        assert await other.acquire_process_lock()


async def test_concurrent_claims_skip_locked_rows(store: PostgresMetadataStore) -> None:
    for i in range(4):
        record = await processing_job(store, f"s{i}")
        await complete(store, record.id)
    async with (
        store.claim_unsent(created_before=T0 + MS, limit=2) as first,
        store.claim_unsent(created_before=T0 + MS, limit=10) as second,
    ):
        ids_first = {r.id for r in first.rows}
        ids_second = {r.id for r in second.rows}
    assert len(ids_first) == 2
    assert len(ids_second) == 2
    assert not ids_first & ids_second


async def test_feed_seq_assigned_after_commit(store: PostgresMetadataStore) -> None:
    record = await processing_job(store, "auto")
    await complete(store, record.id)
    feed = await store.read_feed(after=0, limit=10, tenant="", products=None)
    assert [(r.job_id, r.feed_seq) for r in feed] == [(record.id, 1)]


async def test_job_insert_is_one_atomic_statement(
    store: PostgresMetadataStore, metadata_dsn: str
) -> None:
    """§3.6 step 15 in one round trip: the job row and its datasource names together, and a
    guard conflict (§3.8) leaves neither behind."""
    first = job("same-hash", mapped='{"pg_main":{"t":["a"]},"mongo":{"c":["b"]}}')
    await store.insert_job(first)
    second = job("same-hash")
    with pytest.raises(ActiveDuplicateError):
        await store.insert_job(second)
    async with await psycopg.AsyncConnection.connect(metadata_dsn, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT job_id, config_name FROM job_datasources ORDER BY job_id, config_name"
        )
        rows = await cur.fetchall()
        cur = await conn.execute("SELECT count(*) FROM jobs")
        count = await cur.fetchone()
    assert rows == [(first.id, "mongo"), (first.id, "pg_main")]
    assert count == (1,)
