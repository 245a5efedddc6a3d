"""PostgreSQL metadata store (contract §1.5, §2.6, §3.8, §4, §4.7, §8.6, §2.12).

The statements and methods are the shared ones (:mod:`._sql_store`); this module holds
PostgreSQL's :data:`POSTGRES` dialect and its driver: psycopg 3 (async) over a
``psycopg_pool.AsyncConnectionPool`` opened by :meth:`PostgresMetadataStore.open` (nothing
happens at import or construction), with recovery after an outage. Connections run in
autocommit; a unit of work with several statements runs in an explicit transaction on one
connection. Request documents are TEXT, never jsonb (§4.7). Driver errors become the port's
errors in :func:`map_postgres_errors`, and only there; the DSN never appears in a message, a
log line or ``repr``. psycopg is imported here and nowhere else in the store package.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager, suppress
from datetime import UTC, datetime
from typing import TypeVar

import psycopg
from psycopg import AsyncConnection
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from fetcher.adapters.store import _common as c
from fetcher.adapters.store import _program as p
from fetcher.adapters.store._dialect import Dialect, pyformat
from fetcher.adapters.store._sql_store import SqlMetadataStore, StepRunner
from fetcher.services.store_roles import (
    ActiveDuplicateError,
    ConflictError,
    StoreError,
    StoreUnavailableError,
)

__all__ = [
    "POSTGRES",
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

T = TypeVar("T")
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


POSTGRES = Dialect(
    name="postgres",
    render=pyformat,
    ts=c.utc_ms,
    read_ts=_ts,
    true="true",
    false="false",
    now="now()",
    ledger_applied_at="TIMESTAMPTZ NOT NULL DEFAULT now()",
    # Held to the end of the migration transaction (§1.5); a new statement after it is granted
    # sees every migration committed before.
    migration_lock=f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})",
    ledger_exists="SELECT 1 AS found WHERE to_regclass('schema_migrations') IS NOT NULL",
    # json (not jsonb) keeps a number's stored text, so ->> yields its JSON text (§2.6.2).
    metadata_match=lambda key, value: (
        f"json_typeof(metadata_json::json -> {key}) IN ('string', 'number', 'boolean')"
        f" AND (metadata_json::json ->> {key}) = {value}"
    ),
    feed_seq="feed_seq",
    # §2.12: numbered after commit under an advisory lock. The update is a new statement, so
    # a new snapshot: it sees every number committed before the lock was granted, which keeps
    # the sequence gap-free and unique.
    number_feed=(
        f"SELECT pg_advisory_xact_lock({FEED_SEQ_LOCK_KEY})",
        "WITH top AS (SELECT coalesce(max(feed_seq), 0) AS n FROM outbox),"
        " todo AS (SELECT id, row_number() OVER (ORDER BY id) AS k"
        " FROM outbox WHERE feed_seq IS NULL)"
        " UPDATE outbox o SET feed_seq = top.n + todo.k FROM top, todo WHERE o.id = todo.id",
    ),
    claim_lock=" FOR UPDATE SKIP LOCKED",
    chained_insert=True,
)


async def _execute(conn: Conn, step: p.Step) -> p.Result:
    """One step on ``conn``, in the transaction it is in (if any)."""
    if isinstance(step, p.Script):  # verbatim: several statements, no parameters
        cursor = await conn.execute(step.sql.encode("utf-8"))
    elif isinstance(step, p.Each):
        async with conn.cursor() as many:
            await many.executemany(POSTGRES.render(step.sql), step.rows)
            return p.Result([], many.rowcount)
    else:
        cursor = await conn.execute(POSTGRES.render(step.sql), step.params)
    rows: list[p.Row] = list(await cursor.fetchall()) if cursor.description is not None else []
    return p.Result(rows, cursor.rowcount)


class PostgresMetadataStore(SqlMetadataStore):
    """The :class:`~fetcher.services.store_roles.MetadataStore` on PostgreSQL."""

    dialect = POSTGRES

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

    # -- the driver hooks ---------------------------------------------------------------------

    async def _transact(self, program: p.Program[T], tx: p.Tx) -> T:
        async with self._conn() as conn:

            async def execute(step: p.Step) -> p.Result:
                return await _execute(conn, step)

            if tx == "autocommit":
                return await p.drive_async(program, execute)
            async with conn.transaction():
                if tx == "snapshot":
                    await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                return await p.drive_async(program, execute)

    @asynccontextmanager
    async def _hold(self, claim: p.Statement) -> AsyncIterator[tuple[list[p.Row], StepRunner]]:
        """The claimed rows stay locked ``FOR UPDATE SKIP LOCKED`` by a transaction held open
        for the context; marks run in it and commit with it, also when the body raised."""
        body_error: Exception | None = None
        async with self._conn() as conn, conn.transaction():

            async def run(step: p.Step) -> p.Result:
                with map_postgres_errors():
                    return await _execute(conn, step)

            rows = (await _execute(conn, claim)).rows
            try:
                yield rows, run
            except Exception as exc:
                body_error = exc  # commit the marks made so far, then re-raise
        if body_error is not None:
            raise body_error
