"""SQLite metadata store (embedded mode; contract §1.5, §2.6, §3.8, §4, §8.6, §2.12).

One stdlib ``sqlite3`` connection, used from worker threads (``asyncio.to_thread``) under a
lock, in WAL mode with foreign keys on. Transactions are explicit (``BEGIN IMMEDIATE``);
SQLite serializes write transactions, so the outbox rowid is the feed sequence. Driver errors
become the port's errors in :func:`map_sqlite_errors`, and only there.

§13 "Files": a new database file is created here with mode 0600 (its missing directories 0700)
before SQLite opens it; SQLite gives the ``-wal`` and ``-shm`` files it creates the permissions
of the main file, so they are 0600 too. An existing file keeps its mode.
"""

# S608: SQL text is assembled only from this module's constants (column lists, directions,
# placeholder names); every value is a bound parameter.
# ruff: noqa: S608

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self, TypeVar

from fetcher.adapters.objectstore.local import create_private_file, make_private_dirs
from fetcher.adapters.store import _common as c
from fetcher.adapters.store.job_search import SqliteJobSearch
from fetcher.services.ports import (
    ActiveDuplicateError,
    ConflictError,
    StoreError,
    StoreUnavailableError,
)
from fetcher.services.records import (
    ConnectionQuery,
    ConnectionRecord,
    EventType,
    JobRecord,
    JobStatus,
    OutboxEvent,
    OutboxRow,
)

__all__ = ["SqliteMetadataStore", "map_sqlite_errors"]

T = TypeVar("T")
Row = dict[str, Any]
_TS = c.parse_ts_text


@contextmanager
def map_sqlite_errors() -> Iterator[None]:
    """Translate ``sqlite3`` exceptions into the port's errors (the one edge)."""
    try:
        yield
    except sqlite3.IntegrityError as exc:
        text = str(exc)
        if "connections.config_name" in text:
            raise ConflictError("configName is already in use") from None
        if "jobs.request_hash" in text:
            raise ActiveDuplicateError("an active job has the same request hash") from None
        raise StoreError(f"metadata store integrity violation: {text}") from None
    except sqlite3.Error as exc:
        raise StoreUnavailableError(f"metadata store failed: {type(exc).__name__}") from exc


def _dict_row(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> Row:
    return {d[0]: v for d, v in zip(cursor.description, row, strict=True)}


@contextmanager
def _transaction(conn: sqlite3.Connection, mode: str = "IMMEDIATE") -> Iterator[None]:
    conn.execute(f"BEGIN {mode}")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _statements(script: str) -> Iterator[str]:
    """Split a migration script into complete statements."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer
            buffer = ""


def _migrate(conn: sqlite3.Connection) -> None:
    with _transaction(conn, "EXCLUSIVE"):
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY,"
            " name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        applied = {r["version"] for r in conn.execute("SELECT version FROM schema_migrations")}
        for migration in c.load_migrations("sqlite"):
            if migration.version in applied:
                continue
            for statement in _statements(migration.sql):
                conn.execute(statement)
            if migration.version == c.TENANT_MIGRATION:
                _backfill_products(conn)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, c.ts_text(datetime.now(UTC))),
            )


def _backfill_products(conn: sqlite3.Connection) -> None:
    """After the tenant migration: the product of every older job and outbox row."""
    select = "SELECT id, metadata_json FROM jobs WHERE product IS NULL ORDER BY id LIMIT ?"
    while rows := conn.execute(select, (c.BACKFILL_BATCH,)).fetchall():
        conn.executemany("UPDATE jobs SET product = :product WHERE id = :id", c.job_products(rows))
    conn.execute(
        "UPDATE outbox SET product = (SELECT product FROM jobs WHERE jobs.id = outbox.job_id)"
        " WHERE product IS NULL"
    )


_DIALECT = c.SqlDialect(
    param=lambda name: f":{name}",
    never="0 = 1",
    ts=c.ts_text,
    metadata_match=lambda key, value: f"fetcher_metadata_matches(metadata_json, {key}, {value})",
)


def _list_connections(
    conn: sqlite3.Connection, query: ConnectionQuery, tenant: str
) -> tuple[list[ConnectionRecord], int]:
    where, params = c.list_where(query, tenant, _DIALECT)
    direction = "ASC" if query.sort == "asc" else "DESC"
    with _transaction(conn, "DEFERRED"):
        total = conn.execute(f"SELECT count(*) AS n FROM connections WHERE {where}", params)
        count = int(total.fetchone()["n"])
        rows = conn.execute(
            f"SELECT {c.CONNECTION_COLUMNS} FROM connections WHERE {where}"
            f" ORDER BY created_at {direction}, id {direction} LIMIT :limit OFFSET :offset",
            {**params, "limit": query.limit, "offset": query.offset},
        ).fetchall()
    return [c.connection_from_row(r, _TS) for r in rows], count


def _insert_job(conn: sqlite3.Connection, record: JobRecord) -> None:
    params = c.job_params(record, c.ts_text)
    params["dedup_active"] = int(record.dedup_active)
    placeholders = ", ".join(f":{name.strip()}" for name in c.JOB_COLUMNS.split(","))
    names = [(record.id, n) for n in dict.fromkeys(c.datasource_names(record.mapped_fields_json))]
    with _transaction(conn):
        conn.execute(f"INSERT INTO jobs ({c.JOB_COLUMNS}) VALUES ({placeholders})", params)
        conn.executemany("INSERT INTO job_datasources (job_id, config_name) VALUES (?, ?)", names)


def _insert_event(conn: sqlite3.Connection, event: OutboxEvent) -> None:
    """The outbox row of ``event``, with its job's tenant and product (§12.4, §12.5)."""
    conn.execute(
        "INSERT INTO outbox (ce_id, job_id, event_type, routing_key, body, headers_json,"
        " created_at, tenant_id, product) SELECT :ce_id, :job_id, :event_type, :routing_key,"
        " :body, :headers_json, :created_at, tenant_id, product FROM jobs WHERE id = :job_id",
        c.event_params(event, c.ts_text),
    )


def _transition(
    conn: sqlite3.Connection, sql: str, params: dict[str, Any], event: OutboxEvent
) -> bool:
    """Run one CAS update and, only when it matched, insert its event; one transaction."""
    with _transaction(conn):
        if conn.execute(sql, params).rowcount != 1:
            return False
        _insert_event(conn, event)
    return True


def _outbox_row(row: Row) -> OutboxRow:
    return c.outbox_from_row({**row, "feed_seq": row["id"]}, _TS)


@dataclass(slots=True)
class _SqliteBatch:
    """A claimed batch; SQLite has one embedded repairer, so marks commit one by one."""

    store: SqliteMetadataStore
    rows: list[OutboxRow]

    async def mark_sent(self, ce_ids: Sequence[str], at: datetime) -> None:
        await self.store.mark_sent(ce_ids, at)


class SqliteMetadataStore:
    """The :class:`~fetcher.services.ports.MetadataStore` on one SQLite file."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_ms: int = 5000) -> None:
        self._path = os.fspath(path)
        self._busy_timeout_ms = int(busy_timeout_ms)
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SqliteMetadataStore(path={self._path!r})"

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- lifecycle -------------------------------------------------------------------------

    def _create_file(self) -> None:
        """Create the database file 0600, and its missing directories 0700 (§13 "Files")."""
        if self._path in ("", ":memory:"):
            return
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
        # SQLite follows symbolic links to the database; so does this, or a dangling link
        # would let SQLite create its target with the default mode.
        target = os.path.realpath(self._path)
        try:
            make_private_dirs(os.path.dirname(target))
            os.close(create_private_file(target, flags))
        except FileExistsError:
            return
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise StoreUnavailableError(f"metadata store file not created: {reason}") from exc

    def _connect(self) -> sqlite3.Connection:
        self._create_file()
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        try:
            conn.row_factory = _dict_row
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.create_function(
                "fetcher_metadata_matches", 3, c.metadata_matches, deterministic=True
            )
        except BaseException:
            conn.close()
            raise
        return conn

    async def open(self) -> None:
        """Open the file (created when absent). Idempotent."""
        if self._conn is None:
            with map_sqlite_errors():
                self._conn = await asyncio.to_thread(self._connect)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await asyncio.to_thread(self._close, conn)

    def _close(self, conn: sqlite3.Connection) -> None:
        with self._lock:
            conn.close()

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._conn
        if conn is None:
            raise StoreUnavailableError("metadata store is not open")

        def call() -> T:
            with self._lock, map_sqlite_errors():
                return fn(conn)

        return await asyncio.to_thread(call)

    async def migrate(self) -> None:
        await self._run(_migrate)

    async def ping(self) -> None:
        await self._run(lambda conn: conn.execute("SELECT 1").fetchone())

    async def acquire_process_lock(self) -> bool:
        return True

    # -- connections -----------------------------------------------------------------------

    async def insert_connection(self, record: ConnectionRecord) -> None:
        params = c.connection_params(record, c.ts_text)
        placeholders = ", ".join(f":{name}" for name in params)
        sql = f"INSERT INTO connections ({', '.join(params)}) VALUES ({placeholders})"
        await self._run(lambda conn: conn.execute(sql, params))

    async def _one_connection(self, where: str, value: str, tenant: str) -> ConnectionRecord | None:
        sql = (
            f"SELECT {c.CONNECTION_COLUMNS} FROM connections"
            f" WHERE {where} = ? AND tenant_id = ? AND deleted_at IS NULL"
        )
        row = await self._run(lambda conn: conn.execute(sql, (value, tenant)).fetchone())
        return None if row is None else c.connection_from_row(row, _TS)

    async def get_connection(self, connection_id: str, *, tenant: str) -> ConnectionRecord | None:
        return await self._one_connection("id", connection_id, tenant)

    async def get_connection_by_name(
        self, config_name: str, *, tenant: str
    ) -> ConnectionRecord | None:
        return await self._one_connection("config_name", config_name, tenant)

    async def list_connections(
        self, query: ConnectionQuery, *, tenant: str
    ) -> tuple[list[ConnectionRecord], int]:
        return await self._run(lambda conn: _list_connections(conn, query, tenant))

    async def update_connection(self, record: ConnectionRecord) -> bool:
        params = c.connection_params(record, c.ts_text)
        sets = ", ".join(f"{name} = :{name}" for name in params if name not in c.CONNECTION_FIXED)
        sql = (
            f"UPDATE connections SET {sets}"
            " WHERE id = :id AND tenant_id = :tenant_id AND deleted_at IS NULL"
        )
        return await self._run(lambda conn: conn.execute(sql, params).rowcount == 1)

    async def soft_delete_connection(
        self, connection_id: str, now: datetime, *, tenant: str
    ) -> bool:
        sql = (
            "UPDATE connections SET deleted_at = :now, updated_at = :now"
            " WHERE id = :id AND tenant_id = :tenant AND deleted_at IS NULL"
        )
        params = {"id": connection_id, "tenant": tenant, "now": c.ts_text(now)}
        return await self._run(lambda conn: conn.execute(sql, params).rowcount == 1)

    async def assign_product(
        self, connection_id: str, product_name: str, now: datetime, *, tenant: str
    ) -> bool:
        sql = (
            "UPDATE connections SET product_name = :product, updated_at = :now"
            " WHERE id = :id AND tenant_id = :tenant AND deleted_at IS NULL"
            " AND product_name IS NULL"
        )
        params = {
            "id": connection_id,
            "tenant": tenant,
            "product": product_name,
            "now": c.ts_text(now),
        }
        return await self._run(lambda conn: conn.execute(sql, params).rowcount == 1)

    async def has_active_jobs(self, config_name: str, *, tenant: str) -> bool:
        sql = (
            "SELECT EXISTS (SELECT 1 FROM job_datasources d JOIN jobs j ON j.id = d.job_id"
            " WHERE d.config_name = ? AND j.tenant_id = ?"
            " AND j.status IN ('pending', 'processing')) AS found"
        )
        row = await self._run(lambda conn: conn.execute(sql, (config_name, tenant)).fetchone())
        return bool(row["found"])

    # -- jobs ------------------------------------------------------------------------------

    async def find_dedup_match(
        self, request_hash: str, completed_since: datetime, *, tenant: str
    ) -> JobRecord | None:
        sql = (
            f"SELECT {c.JOB_COLUMNS} FROM jobs WHERE tenant_id = :tenant AND request_hash = :hash"
            " AND (status IN ('pending', 'processing')"
            " OR (status = 'completed' AND created_at >= :since))"
            " ORDER BY created_at DESC, id DESC LIMIT 1"
        )
        params = {"tenant": tenant, "hash": request_hash, "since": c.ts_text(completed_since)}
        row = await self._run(lambda conn: conn.execute(sql, params).fetchone())
        return None if row is None else c.job_from_row(row, _TS)

    async def insert_job(self, record: JobRecord) -> None:
        await self._run(lambda conn: _insert_job(conn, record))

    async def get_job(self, job_id: str, *, tenant: str) -> JobRecord | None:
        sql = f"SELECT {c.JOB_COLUMNS} FROM jobs WHERE id = ? AND tenant_id = ?"
        row = await self._run(lambda conn: conn.execute(sql, (job_id, tenant)).fetchone())
        return None if row is None else c.job_from_row(row, _TS)

    async def claim_job(self, job_id: str, now: datetime) -> bool:
        sql = (
            "UPDATE jobs SET status = 'processing', started_at = :now, updated_at = :now,"
            " dedup_active = 1 WHERE id = :id AND status = 'pending'"
        )
        params = {"id": job_id, "now": c.ts_text(now)}
        return await self._run(lambda conn: conn.execute(sql, params).rowcount == 1)

    async def complete_job(
        self,
        job_id: str,
        *,
        result_path: str,
        result_hmac: str,
        completed_at: datetime,
        event: OutboxEvent,
    ) -> bool:
        sql = (
            "UPDATE jobs SET status = 'completed', result_path = :path, result_hmac = :hmac,"
            " completed_at = :at, updated_at = :at, dedup_active = 0"
            " WHERE id = :id AND status = 'processing'"
        )
        params = {"id": job_id, "path": result_path, "hmac": result_hmac}
        params["at"] = c.ts_text(completed_at)
        return await self._run(lambda conn: _transition(conn, sql, params, event))

    async def fail_job(
        self,
        job_id: str,
        *,
        from_statuses: Sequence[JobStatus],
        error: str,
        completed_at: datetime,
        event: OutboxEvent,
    ) -> bool:
        statuses = c.failable_statuses(from_statuses)
        marks = ", ".join(f":s{i}" for i in range(len(statuses)))
        sql = (
            "UPDATE jobs SET status = 'failed', error = :error, completed_at = :at,"
            f" updated_at = :at, dedup_active = 0 WHERE id = :id AND status IN ({marks})"
        )
        params: dict[str, Any] = {"id": job_id, "error": error, "at": c.ts_text(completed_at)}
        params.update({f"s{i}": s for i, s in enumerate(statuses)})
        return await self._run(lambda conn: _transition(conn, sql, params, event))

    async def reap_candidates(
        self,
        *,
        pending_created_before: datetime,
        processing_started_before: datetime,
        limit: int,
    ) -> list[JobRecord]:
        sql = (
            f"SELECT {c.JOB_COLUMNS} FROM jobs"
            " WHERE (status = 'pending' AND created_at < :pending)"
            " OR (status = 'processing' AND started_at < :processing)"
            " ORDER BY created_at, id LIMIT :limit"
        )
        params = {
            "pending": c.ts_text(pending_created_before),
            "processing": c.ts_text(processing_started_before),
            "limit": limit,
        }
        rows = await self._run(lambda conn: conn.execute(sql, params).fetchall())
        return [c.job_from_row(r, _TS) for r in rows]

    async def jobs_with_status(self, status: JobStatus) -> list[JobRecord]:
        sql = f"SELECT {c.JOB_COLUMNS} FROM jobs WHERE status = ? ORDER BY created_at, id"
        rows = await self._run(lambda conn: conn.execute(sql, (status,)).fetchall())
        return [c.job_from_row(r, _TS) for r in rows]

    # -- outbox ----------------------------------------------------------------------------

    @asynccontextmanager
    async def claim_unsent(
        self, *, created_before: datetime, limit: int
    ) -> AsyncIterator[_SqliteBatch]:
        sql = (
            "SELECT * FROM outbox WHERE sent_at IS NULL AND created_at < ?"
            " ORDER BY created_at, id LIMIT ?"
        )
        params = (c.ts_text(created_before), limit)
        rows = await self._run(lambda conn: conn.execute(sql, params).fetchall())
        yield _SqliteBatch(self, [_outbox_row(r) for r in rows])

    async def mark_sent(self, ce_ids: Sequence[str], at: datetime) -> None:
        sql = "UPDATE outbox SET sent_at = ? WHERE ce_id = ?"
        stamp = c.ts_text(at)
        await self._run(lambda conn: conn.executemany(sql, [(stamp, i) for i in ce_ids]))

    async def assign_feed_seq(self) -> int:
        return 0

    async def read_feed(
        self,
        *,
        after: int,
        limit: int,
        event_type: EventType | None = None,
        tenant: str,
        products: Collection[str] | None,
    ) -> list[OutboxRow]:
        where, params = c.feed_where("id", tenant, products, event_type, _DIALECT)
        sql = f"SELECT * FROM outbox WHERE {where} ORDER BY id LIMIT :limit"
        params.update(after=after, limit=limit)
        rows = await self._run(lambda conn: conn.execute(sql, params).fetchall())
        return [_outbox_row(r) for r in rows]

    async def count_unsent(self) -> int:
        sql = "SELECT count(*) AS n FROM outbox WHERE sent_at IS NULL"
        row = await self._run(lambda conn: conn.execute(sql).fetchone())
        return int(row["n"])

    def job_search(self) -> SqliteJobSearch:
        """The job list queries (``job_search``) over this store's connection and its lock."""
        return SqliteJobSearch(self._run)
