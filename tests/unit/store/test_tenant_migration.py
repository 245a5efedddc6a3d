"""Migration 0002 upgrades a SQLite metadata store built by the previous schema (§12.5).

The database is built by migration 0001 alone and filled with rows as the previous release
wrote them; ``migrate()`` must keep every row, give it the tenant ``""`` and its product
(the normalized source, §3.7, by the Python rule), so that it stays visible in single-tenant
mode and invisible under any tenant (§12.5 "Switching modes").
"""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

from fetcher.adapters.store._common import load_migrations
from fetcher.adapters.store.sqlite import SqliteMetadataStore
from fetcher.services.records import ConnectionQuery
from tests.unit.store.store_contract import connection

CONNECTION_ID = "0190a1b2-0000-7000-8000-00000000c001"
JOB_ID = "0190a1b2-0000-7000-8000-00000000j001"
KELVIN_JOB_ID = "0190a1b2-0000-7000-8000-00000000j002"
STAMP = "2026-01-02T03:04:05.678Z"


def _old_database(path: Path) -> None:
    """A file as the previous release left it: schema 0001 and one row of each kind."""
    [first] = [m for m in load_migrations("sqlite") if m.version == 1]
    conn = sqlite3.connect(path)
    with conn:
        conn.executescript(first.sql)
        conn.execute(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
            " applied_at TEXT NOT NULL)"
        )
        conn.execute("INSERT INTO schema_migrations VALUES (1, ?, ?)", (first.name, STAMP))
        conn.execute(
            "INSERT INTO connections (id, product_name, config_name, type, host, port,"
            " database_name, user_name, encryption_key_version, created_at, updated_at)"
            " VALUES (?, 'payments', 'pg_main', 'POSTGRESQL', 'db.example.com', 5432,"
            " 'ledger', 'reader', '1', ?, ?)",
            (CONNECTION_ID, STAMP, STAMP),
        )
        for job_id, source in ((JOB_ID, "  Payments "), (KELVIN_JOB_ID, "\u212arm")):
            conn.execute(
                "INSERT INTO jobs (id, status, request_hash, dedup_active, mapped_fields_json,"
                " metadata_json, created_at, completed_at, updated_at)"
                " VALUES (?, 'completed', 'h1', 0, '{\"pg_main\":{\"t\":[\"id\"]}}', ?, ?, ?, ?)",
                (job_id, f'{{"source":"{source}"}}', STAMP, STAMP, STAMP),
            )
            conn.execute(
                "INSERT INTO outbox (ce_id, job_id, event_type, routing_key, body,"
                " headers_json, created_at) VALUES (?, ?, 'completed', 'job.completed',"
                " x'7b7d', '{}', ?)",
                (f"fetcher.job.completed.{job_id}", job_id, STAMP),
            )
    conn.close()


async def test_an_old_database_is_upgraded_and_its_rows_belong_to_the_single_tenant(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    _old_database(path)
    async with SqliteMetadataStore(path) as store:
        await store.migrate()
        record = await store.get_connection(CONNECTION_ID, tenant="")
        assert record is not None
        assert (record.config_name, record.tenant, record.created_by) == ("pg_main", "", None)
        job = await store.get_job(JOB_ID, tenant="")
        assert job is not None
        assert (job.tenant, job.created_by, job.status) == ("", None, "completed")
        feed = await store.read_feed(after=0, limit=10, tenant="", products=None)
        assert [(r.job_id, r.tenant) for r in feed] == [(JOB_ID, ""), (KELVIN_JOB_ID, "")]
        # Products were filled by the §3.7 rule (Python strip/lower, not SQL lower/trim).
        payments = await store.read_feed(after=0, limit=10, tenant="", products={"payments"})
        assert [r.job_id for r in payments] == [JOB_ID]
        kelvin = await store.read_feed(after=0, limit=10, tenant="", products={"krm"})
        assert [r.job_id for r in kelvin] == [KELVIN_JOB_ID]


async def test_old_rows_are_invisible_under_a_tenant_and_visible_again_without(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    _old_database(path)
    async with SqliteMetadataStore(path) as store:
        await store.migrate()
        assert await store.get_connection(CONNECTION_ID, tenant="acme") is None
        assert await store.get_connection_by_name("pg_main", tenant="acme") is None
        assert await store.list_connections(ConnectionQuery(), tenant="acme") == ([], 0)
        assert await store.get_job(JOB_ID, tenant="acme") is None
        assert await store.read_feed(after=0, limit=10, tenant="acme", products=None) == []
        # configName is unique per tenant: the tenant may reuse the single tenant's name.
        await store.insert_connection(replace(connection("pg_main"), tenant="acme"))
    async with SqliteMetadataStore(path) as store:  # back in single-tenant mode
        await store.migrate()
        assert await store.get_connection(CONNECTION_ID, tenant="") is not None
        assert (await store.list_connections(ConnectionQuery(), tenant=""))[1] == 1
        versions = await store._run(
            lambda conn: conn.execute("SELECT version FROM schema_migrations").fetchall()
        )
        assert versions == [{"version": v} for v in (1, 2, 3, 4, 5, 6, 7)]
