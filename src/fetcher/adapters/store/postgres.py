"""PostgreSQL metadata store (contract §1.5, §2.6, §3.8, §4, §4.7, §8.6, §2.12).

psycopg 3 (async) over a ``psycopg_pool.AsyncConnectionPool`` opened by :meth:`open` (nothing
happens at import or construction). Connections run in autocommit; multi-statement work uses
explicit transactions. Request documents are TEXT, never jsonb (§4.7). Driver errors become
the port's errors in :func:`map_postgres_errors`, and only there; the DSN never appears in a
message, a log line or ``repr``.
"""

# S608: SQL text is assembled only from this module's constants (column lists, directions,
# placeholder names); every value is a bound parameter.
# ruff: noqa: S608

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self

import psycopg
from psycopg import AsyncConnection
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from fetcher.adapters.store import _common as c
from fetcher.adapters.store.job_search import PostgresJobSearch
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

__all__ = [
    "PostgresMetadataStore",
    "map_postgres_errors",
    "MIGRATION_LOCK_KEY",
    "FEED_SEQ_LOCK_KEY",
    "PROCESS_LOCK_KEY",
]

_log = logging.getLogger(__name__)

#: Advisory lock keys (bigint constants): migrations (§1.5), feed numbering (§2.12) and the
#: embedded single-process lock (§4.4).
MIGRATION_LOCK_KEY = 0x46455443_00000001
FEED_SEQ_LOCK_KEY = 0x46455443_00000002
PROCESS_LOCK_KEY = 0x46455443_00000003

Conn = AsyncConnection[DictRow]

#: While the store is unreachable, a checkout waits in slices of this length, so that it moves
#: to the fresh pool as soon as recovery installs one.
CHECKOUT_SLICE_SECONDS = 1.0
#: How often recovery probes the database while it is unreachable, and each probe's bound.
PROBE_INTERVAL_SECONDS = 0.5
PROBE_TIMEOUT_SECONDS = 2


def _ts(value: datetime) -> datetime:
    return value.astimezone(UTC)


@contextmanager
def map_postgres_errors() -> Iterator[None]:
    """Translate psycopg exceptions into the port's errors (the one edge)."""
    try:
        yield
    except psycopg.errors.UniqueViolation as exc:
        constraint = exc.diag.constraint_name
        if constraint == "connections_config_name_active":
            raise ConflictError("configName is already in use") from None
        if constraint == "jobs_active_request_hash":
            raise ActiveDuplicateError("an active job has the same request hash") from None
        raise StoreError(f"metadata store unique violation: {constraint}") from None
    except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout, PoolClosed) as exc:
        raise StoreUnavailableError(f"metadata store unavailable: {type(exc).__name__}") from exc
    except psycopg.Error as exc:
        raise StoreError(f"metadata store failed: {type(exc).__name__}") from exc


#: json (not jsonb) keeps a number's stored text, so ->> yields its JSON text (§2.6.2).
_DIALECT = c.SqlDialect(
    param=lambda name: f"%({name})s",
    never="false",
    ts=c.utc_ms,
    metadata_match=lambda key, value: (
        f"json_typeof(metadata_json::json -> {key}) IN ('string', 'number', 'boolean')"
        f" AND (metadata_json::json ->> {key}) = {value}"
    ),
)


async def _insert_event(conn: Conn, event: OutboxEvent) -> None:
    """The outbox row of ``event``, with its job's tenant and product (§12.4, §12.5)."""
    await conn.execute(
        "INSERT INTO outbox (ce_id, job_id, event_type, routing_key, body, headers_json,"
        " created_at, tenant_id, product) SELECT %(ce_id)s, %(job_id)s, %(event_type)s,"
        " %(routing_key)s, %(body)s, %(headers_json)s, %(created_at)s, tenant_id, product"
        " FROM jobs WHERE id = %(job_id)s",
        c.event_params(event, c.utc_ms),
    )


async def _backfill_products(conn: Conn) -> None:
    """After the tenant migration: the product of every older job and outbox row."""
    while True:
        cur = await conn.execute(
            "SELECT id, metadata_json FROM jobs WHERE product IS NULL ORDER BY id LIMIT %s",
            (c.BACKFILL_BATCH,),
        )
        rows = await cur.fetchall()
        if not rows:
            break
        async with conn.cursor() as update:
            await update.executemany(
                "UPDATE jobs SET product = %(product)s WHERE id = %(id)s", c.job_products(rows)
            )
    await conn.execute(
        "UPDATE outbox o SET product = j.product FROM jobs j"
        " WHERE o.job_id = j.id AND o.product IS NULL"
    )


@dataclass(slots=True)
class _PostgresBatch:
    """Rows locked ``FOR UPDATE SKIP LOCKED`` by the transaction on ``conn``."""

    conn: Conn
    rows: list[OutboxRow]

    async def mark_sent(self, ce_ids: Sequence[str], at: datetime) -> None:
        with map_postgres_errors():
            await self.conn.execute(
                "UPDATE outbox SET sent_at = %s WHERE ce_id = ANY(%s)",
                (c.utc_ms(at), list(ce_ids)),
            )


class PostgresMetadataStore:
    """The :class:`~fetcher.services.ports.MetadataStore` on PostgreSQL."""

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout: float = 10.0,
        checkout_timeout: float | None = None,
    ) -> None:
        """``checkout_timeout`` bounds the wait for a pooled connection while the database is
        unreachable (default ``connect_timeout``; a merely busy pool always waits up to
        ``connect_timeout``). The Manager passes a short one: with the store unreachable it
        must answer ``503 FET-0003`` quickly (§2.3), while a Worker rides out a short outage
        before its §7.4 row 7 retries start."""
        self._dsn = dsn
        self._min_size = min_size
        self._max_size = max_size
        self._connect_timeout = connect_timeout
        self._checkout_timeout = connect_timeout if checkout_timeout is None else checkout_timeout
        self._pool: AsyncConnectionPool[Conn] | None = None
        self._process_lock: Conn | None = None
        self._recovery: asyncio.Task[None] | None = None
        self._pool_errors = 0  # the current pool's connection errors seen so far
        self._retired: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        return "PostgresMetadataStore(dsn=<hidden>)"

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

    async def open(self) -> None:
        """Open the pool, waiting up to ``connect_timeout`` for its first connections."""
        if self._pool is not None:
            return
        self._pool = await self._new_pool()

    async def _new_pool(self) -> AsyncConnectionPool[Conn]:
        pool = AsyncConnectionPool(
            self._dsn,
            min_size=self._min_size,
            max_size=self._max_size,
            open=False,
            connection_class=AsyncConnection[DictRow],
            kwargs={"autocommit": True, "row_factory": dict_row},
            check=AsyncConnectionPool.check_connection,
            timeout=self._connect_timeout,
            name="fetcher-metadata-store",
        )
        try:
            with map_postgres_errors():
                await pool.open(wait=True, timeout=self._connect_timeout)
        except BaseException:
            await pool.close()
            raise
        return pool

    async def close(self) -> None:
        recovery, self._recovery = self._recovery, None
        if recovery is not None:
            recovery.cancel()
            await asyncio.gather(recovery, return_exceptions=True)
        await asyncio.gather(*self._retired, return_exceptions=True)
        lock, self._process_lock = self._process_lock, None
        if lock is not None:
            await lock.close()
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    @asynccontextmanager
    async def _conn(self) -> AsyncIterator[Conn]:
        try:
            with map_postgres_errors():
                async with AsyncExitStack() as stack:
                    conn = await self._checkout(stack)
                    yield conn
        except StoreUnavailableError as exc:
            # A broken connection means an outage; a pool timeout only when the pool also
            # failed to connect (else the database is fine and merely busy).
            if not isinstance(exc.__cause__, PoolTimeout | PoolClosed) or self._pool_failing():
                self._start_recovery()
            raise

    def _recovering(self) -> bool:
        return self._recovery is not None and not self._recovery.done()

    def _pool_failing(self) -> bool:
        """True when the current pool failed to open a connection since the last look."""
        pool = self._pool
        if pool is None:
            return False
        errors = int(pool.get_stats().get("connections_errors", 0))
        failing, self._pool_errors = errors > self._pool_errors, errors
        return failing

    async def _checkout(self, stack: AsyncExitStack) -> Conn:
        """A pooled connection, waiting in short slices so that a pool replaced by recovery is
        used at once. The wait is ``connect_timeout`` while the database is only busy, and the
        short ``checkout_timeout`` once it is known unreachable (recovery running): an
        exhausted pool under load keeps waiting as before, an outage fails fast
        (PoolTimeout/PoolClosed are mapped by the caller when the time is up)."""
        loop = asyncio.get_running_loop()
        began = loop.time()
        while True:
            pool = self._pool
            if pool is None:
                raise StoreUnavailableError("metadata store is not open")
            if self._pool_failing():
                self._start_recovery()
            bound = self._checkout_timeout if self._recovering() else self._connect_timeout
            remaining = began + bound - loop.time()
            try:
                return await stack.enter_async_context(
                    pool.connection(timeout=max(0.01, min(CHECKOUT_SLICE_SECONDS, remaining)))
                )
            except (PoolTimeout, PoolClosed):
                if self._pool_failing():
                    self._start_recovery()
                bound = self._checkout_timeout if self._recovering() else self._connect_timeout
                if loop.time() >= began + bound:
                    raise

    # -- recovery after an outage ------------------------------------------------------------

    def _start_recovery(self) -> None:
        """After a failure that looks like an outage, probe the database in the background and
        install a fresh pool once it answers. psycopg_pool backs off its own reconnection
        attempts exponentially (1, 2, 4, 8 s …), which left the store dead for up to that long
        after the database came back (chaos suite: metadata_cut recovery 6.9 s)."""
        if self._pool is None or (self._recovery is not None and not self._recovery.done()):
            return
        self._recovery = asyncio.create_task(self._recover(), name="metadata-store-recovery")

    async def _recover(self) -> None:
        while self._pool is not None:
            fresh: AsyncConnectionPool[Conn] | None = None
            if await self._probe():
                with suppress(StoreUnavailableError):
                    fresh = await self._new_pool()
            if fresh is not None:
                old, self._pool, self._pool_errors = self._pool, fresh, 0
                if old is not None:  # users of the old pool finish, then it closes
                    retired = asyncio.create_task(old.close(timeout=self._connect_timeout))
                    self._retired.add(retired)
                    retired.add_done_callback(self._retired.discard)
                _log.warning("metadata store reachable again: connection pool renewed")
                return
            await asyncio.sleep(PROBE_INTERVAL_SECONDS)

    async def _probe(self) -> bool:
        """One direct connection and ``SELECT 1``, bounded; never raises."""
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_SECONDS + 1):
                conn = await AsyncConnection.connect(
                    self._dsn, autocommit=True, connect_timeout=PROBE_TIMEOUT_SECONDS
                )
                async with conn:
                    await conn.execute("SELECT 1")
        except (psycopg.Error, OSError, TimeoutError):
            return False
        return True

    async def _fetchone(self, sql: str, params: Any = None) -> DictRow | None:
        async with self._conn() as conn:
            return await (await conn.execute(sql, params)).fetchone()

    async def _fetchall(self, sql: str, params: Any = None) -> list[DictRow]:
        async with self._conn() as conn:
            return await (await conn.execute(sql, params)).fetchall()

    async def _rowcount(self, sql: str, params: Any) -> int:
        async with self._conn() as conn:
            return (await conn.execute(sql, params)).rowcount

    async def migrate(self) -> None:
        async with self._conn() as conn:
            await conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
            try:
                await self._apply_migrations(conn)
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))

    @staticmethod
    async def _apply_migrations(conn: Conn) -> None:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY,"
            " name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        rows = await (await conn.execute("SELECT version FROM schema_migrations")).fetchall()
        applied = {r["version"] for r in rows}
        for migration in c.load_migrations("postgres"):
            if migration.version in applied:
                continue
            async with conn.transaction():
                await conn.execute(migration.sql.encode("utf-8"))
                if migration.version == c.TENANT_MIGRATION:
                    await _backfill_products(conn)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                    (migration.version, migration.name),
                )

    async def ping(self) -> None:
        await self._fetchone("SELECT 1 AS ok")

    async def acquire_process_lock(self) -> bool:
        if self._process_lock is not None:
            return True
        with map_postgres_errors():
            conn = await AsyncConnection.connect(self._dsn, autocommit=True, row_factory=dict_row)
            try:
                cur = await conn.execute(
                    "SELECT pg_try_advisory_lock(%s) AS held", (PROCESS_LOCK_KEY,)
                )
                row = await cur.fetchone()
            except BaseException:
                await conn.close()
                raise
        if row is None or not row["held"]:
            await conn.close()
            return False
        self._process_lock = conn
        return True

    # -- connections -----------------------------------------------------------------------

    async def insert_connection(self, record: ConnectionRecord) -> None:
        params = c.connection_params(record, c.utc_ms)
        values = ", ".join(f"%({name})s" for name in params)
        await self._rowcount(
            f"INSERT INTO connections ({', '.join(params)}) VALUES ({values})", params
        )

    async def _one_connection(
        self, column: str, value: str, tenant: str
    ) -> ConnectionRecord | None:
        row = await self._fetchone(
            f"SELECT {c.CONNECTION_COLUMNS} FROM connections"
            f" WHERE {column} = %s AND tenant_id = %s AND deleted_at IS NULL",
            (value, tenant),
        )
        return None if row is None else c.connection_from_row(row, _ts)

    async def get_connection(self, connection_id: str, *, tenant: str) -> ConnectionRecord | None:
        return await self._one_connection("id", connection_id, tenant)

    async def get_connection_by_name(
        self, config_name: str, *, tenant: str
    ) -> ConnectionRecord | None:
        return await self._one_connection("config_name", config_name, tenant)

    async def list_connections(
        self, query: ConnectionQuery, *, tenant: str
    ) -> tuple[list[ConnectionRecord], int]:
        where, params = c.list_where(query, tenant, _DIALECT)
        direction = "ASC" if query.sort == "asc" else "DESC"
        async with self._conn() as conn, conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            cur = await conn.execute(f"SELECT count(*) AS n FROM connections WHERE {where}", params)
            total = await cur.fetchone()
            cur = await conn.execute(
                f"SELECT {c.CONNECTION_COLUMNS} FROM connections WHERE {where}"
                f" ORDER BY created_at {direction}, id {direction}"
                " LIMIT %(limit)s OFFSET %(offset)s",
                {**params, "limit": query.limit, "offset": query.offset},
            )
            rows = await cur.fetchall()
        count = 0 if total is None else int(total["n"])
        return [c.connection_from_row(r, _ts) for r in rows], count

    async def update_connection(self, record: ConnectionRecord) -> bool:
        params = c.connection_params(record, c.utc_ms)
        sets = ", ".join(
            f"{name} = %({name})s" for name in params if name not in c.CONNECTION_FIXED
        )
        sql = (
            f"UPDATE connections SET {sets}"
            " WHERE id = %(id)s AND tenant_id = %(tenant_id)s AND deleted_at IS NULL"
        )
        return await self._rowcount(sql, params) == 1

    async def soft_delete_connection(
        self, connection_id: str, now: datetime, *, tenant: str
    ) -> bool:
        sql = (
            "UPDATE connections SET deleted_at = %(now)s, updated_at = %(now)s"
            " WHERE id = %(id)s AND tenant_id = %(tenant)s AND deleted_at IS NULL"
        )
        params = {"id": connection_id, "tenant": tenant, "now": c.utc_ms(now)}
        return await self._rowcount(sql, params) == 1

    async def assign_product(
        self, connection_id: str, product_name: str, now: datetime, *, tenant: str
    ) -> bool:
        sql = (
            "UPDATE connections SET product_name = %(product)s, updated_at = %(now)s"
            " WHERE id = %(id)s AND tenant_id = %(tenant)s AND deleted_at IS NULL"
            " AND product_name IS NULL"
        )
        params = {
            "id": connection_id,
            "tenant": tenant,
            "product": product_name,
            "now": c.utc_ms(now),
        }
        return await self._rowcount(sql, params) == 1

    async def has_active_jobs(self, config_name: str, *, tenant: str) -> bool:
        row = await self._fetchone(
            "SELECT EXISTS (SELECT 1 FROM job_datasources d JOIN jobs j ON j.id = d.job_id"
            " WHERE d.config_name = %s AND j.tenant_id = %s"
            " AND j.status IN ('pending', 'processing')) AS found",
            (config_name, tenant),
        )
        return bool(row and row["found"])

    # -- jobs ------------------------------------------------------------------------------

    async def find_dedup_match(
        self, request_hash: str, completed_since: datetime, *, tenant: str
    ) -> JobRecord | None:
        row = await self._fetchone(
            f"SELECT {c.JOB_COLUMNS} FROM jobs"
            " WHERE tenant_id = %(tenant)s AND request_hash = %(hash)s"
            " AND (status IN ('pending', 'processing')"
            " OR (status = 'completed' AND created_at >= %(since)s))"
            " ORDER BY created_at DESC, id DESC LIMIT 1",
            {"tenant": tenant, "hash": request_hash, "since": c.utc_ms(completed_since)},
        )
        return None if row is None else c.job_from_row(row, _ts)

    async def insert_job(self, record: JobRecord) -> None:
        """The job row and its datasource names in one statement, so one round trip (§3.6
        step 15 runs on every new job): a data-modifying CTE is atomic, and the names' foreign
        key sees the job row, checked at the end of the statement. An explicit transaction
        took five (BEGIN, two INSERTs, a pipeline sync, COMMIT)."""
        params = c.job_params(record, c.utc_ms)
        values = ", ".join(f"%({name})s" for name in params)
        names = list(dict.fromkeys(c.datasource_names(record.mapped_fields_json)))
        await self._rowcount(
            f"WITH job AS (INSERT INTO jobs ({c.JOB_COLUMNS}) VALUES ({values}) RETURNING id)"
            " INSERT INTO job_datasources (job_id, config_name)"
            " SELECT job.id, name FROM job, unnest(%(datasource_names)s::text[]) AS name",
            {**params, "datasource_names": names},
        )

    async def get_job(self, job_id: str, *, tenant: str) -> JobRecord | None:
        row = await self._fetchone(
            f"SELECT {c.JOB_COLUMNS} FROM jobs WHERE id = %s AND tenant_id = %s", (job_id, tenant)
        )
        return None if row is None else c.job_from_row(row, _ts)

    async def claim_job(self, job_id: str, now: datetime) -> bool:
        sql = (
            "UPDATE jobs SET status = 'processing', started_at = %(now)s, updated_at = %(now)s,"
            " dedup_active = true WHERE id = %(id)s AND status = 'pending'"
        )
        return await self._rowcount(sql, {"id": job_id, "now": c.utc_ms(now)}) == 1

    async def _transition(self, sql: str, params: dict[str, Any], event: OutboxEvent) -> bool:
        """One CAS update and, only when it matched, its outbox row; then number the feed."""
        async with self._conn() as conn, conn.transaction():
            if (await conn.execute(sql, params)).rowcount != 1:
                return False
            await _insert_event(conn, event)
        try:
            await self.assign_feed_seq()
        except StoreError:
            # The repairer's next tick numbers the row (§8.6); the transition is committed.
            _log.warning("feed_seq assignment deferred to the repairer")
        return True

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
            "UPDATE jobs SET status = 'completed', result_path = %(path)s,"
            " result_hmac = %(hmac)s, completed_at = %(at)s, updated_at = %(at)s,"
            " dedup_active = false WHERE id = %(id)s AND status = 'processing'"
        )
        params = {"id": job_id, "path": result_path, "hmac": result_hmac}
        return await self._transition(sql, {**params, "at": c.utc_ms(completed_at)}, event)

    async def fail_job(
        self,
        job_id: str,
        *,
        from_statuses: Sequence[JobStatus],
        error: str,
        completed_at: datetime,
        event: OutboxEvent,
    ) -> bool:
        sql = (
            "UPDATE jobs SET status = 'failed', error = %(error)s, completed_at = %(at)s,"
            " updated_at = %(at)s, dedup_active = false"
            " WHERE id = %(id)s AND status = ANY(%(statuses)s)"
        )
        params = {
            "id": job_id,
            "error": error,
            "at": c.utc_ms(completed_at),
            "statuses": list(c.failable_statuses(from_statuses)),
        }
        return await self._transition(sql, params, event)

    async def reap_candidates(
        self,
        *,
        pending_created_before: datetime,
        processing_started_before: datetime,
        limit: int,
    ) -> list[JobRecord]:
        rows = await self._fetchall(
            f"SELECT {c.JOB_COLUMNS} FROM jobs"
            " WHERE (status = 'pending' AND created_at < %(pending)s)"
            " OR (status = 'processing' AND started_at < %(processing)s)"
            " ORDER BY created_at, id LIMIT %(limit)s",
            {
                "pending": c.utc_ms(pending_created_before),
                "processing": c.utc_ms(processing_started_before),
                "limit": limit,
            },
        )
        return [c.job_from_row(r, _ts) for r in rows]

    async def jobs_with_status(self, status: JobStatus) -> list[JobRecord]:
        rows = await self._fetchall(
            f"SELECT {c.JOB_COLUMNS} FROM jobs WHERE status = %s ORDER BY created_at, id",
            (status,),
        )
        return [c.job_from_row(r, _ts) for r in rows]

    # -- outbox ----------------------------------------------------------------------------

    @asynccontextmanager
    async def claim_unsent(
        self, *, created_before: datetime, limit: int
    ) -> AsyncIterator[_PostgresBatch]:
        body_error: Exception | None = None
        async with self._conn() as conn, conn.transaction():
            cur = await conn.execute(
                f"SELECT {c.OUTBOX_COLUMNS} FROM outbox"
                " WHERE sent_at IS NULL AND created_at < %s"
                " ORDER BY created_at, id LIMIT %s FOR UPDATE SKIP LOCKED",
                (c.utc_ms(created_before), limit),
            )
            rows = [c.outbox_from_row(r, _ts) for r in await cur.fetchall()]
            try:
                yield _PostgresBatch(conn, rows)
            except Exception as exc:
                body_error = exc  # commit the marks made so far, then re-raise
        if body_error is not None:
            raise body_error

    async def mark_sent(self, ce_ids: Sequence[str], at: datetime) -> None:
        await self._rowcount(
            "UPDATE outbox SET sent_at = %s WHERE ce_id = ANY(%s)", (c.utc_ms(at), list(ce_ids))
        )

    async def assign_feed_seq(self) -> int:
        async with self._conn() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (FEED_SEQ_LOCK_KEY,))
            # A new statement, so a new snapshot: it sees every number committed before the
            # lock was granted, which keeps the sequence gap-free and unique.
            cur = await conn.execute(
                "WITH top AS (SELECT coalesce(max(feed_seq), 0) AS n FROM outbox),"
                " todo AS (SELECT id, row_number() OVER (ORDER BY id) AS k"
                " FROM outbox WHERE feed_seq IS NULL)"
                " UPDATE outbox o SET feed_seq = top.n + todo.k FROM top, todo"
                " WHERE o.id = todo.id"
            )
            return cur.rowcount

    async def read_feed(
        self,
        *,
        after: int,
        limit: int,
        event_type: EventType | None = None,
        tenant: str,
        products: Collection[str] | None,
    ) -> list[OutboxRow]:
        where, params = c.feed_where("feed_seq", tenant, products, event_type, _DIALECT)
        rows = await self._fetchall(
            f"SELECT {c.OUTBOX_COLUMNS} FROM outbox WHERE {where}"
            " ORDER BY feed_seq LIMIT %(limit)s",
            {**params, "after": after, "limit": limit},
        )
        return [c.outbox_from_row(r, _ts) for r in rows]

    async def count_unsent(self) -> int:
        row = await self._fetchone("SELECT count(*) AS n FROM outbox WHERE sent_at IS NULL")
        return 0 if row is None else int(row["n"])

    def job_search(self) -> PostgresJobSearch:
        """The job list queries (``job_search``) over this store's pool and its recovery."""
        return PostgresJobSearch(self._fetchall)
