"""The metadata store's methods, written once over a dialect and a driver.

:class:`SqlMetadataStore` implements every store role of :mod:`fetcher.services.store_roles` (all
of them together are :class:`fetcher.bootstrap.MetadataStore`) from the shared statements
(:mod:`._statements`) and row mapping (:mod:`._common`). A backend subclass supplies its
:class:`~._dialect.Dialect`, its lifecycle, and two driver hooks: :meth:`_transact` runs a
:data:`~._program.Program` in a transaction (SQLite: sync ``sqlite3`` on a worker thread;
PostgreSQL: async psycopg on a pooled connection) and :meth:`_hold` holds claimed outbox rows
while the repairer publishes them.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import ClassVar, Literal, TypeVar

from fetcher.adapters.store import _common as c
from fetcher.adapters.store import _statements as q
from fetcher.adapters.store._dialect import Dialect
from fetcher.adapters.store._program import (
    Program,
    Result,
    Row,
    Script,
    Statement,
    Step,
    Tx,
    run_all,
    single,
)
from fetcher.adapters.store.job_search import CUT_FLAGS, search_statement
from fetcher.lifecycle import AsyncResource
from fetcher.services.records import (
    ConnectionQuery,
    ConnectionRecord,
    EventType,
    JobRecord,
    JobStatus,
    OutboxEvent,
    OutboxRow,
)
from fetcher.services.store_roles import (
    Backlog,
    JobSearchQuery,
    ListedJob,
    MigrationStatus,
    StoreError,
)

__all__ = ["SqlMetadataStore", "StepRunner"]

T = TypeVar("T")
#: Runs one step where a claim holds its rows.
StepRunner = Callable[[Step], Awaitable[Result]]

_log = logging.getLogger(__name__)


def _migration(d: Dialect, migrations: Sequence[c.Migration]) -> Program[list[str]]:
    """Apply the migrations not yet in the ledger, each recorded; ``exclusive`` (§1.5).
    Returns the names applied."""
    if d.migration_lock is not None:
        yield Statement(d.migration_lock)
    yield q.ledger(d)
    applied = {row["version"] for row in (yield q.APPLIED_VERSIONS).rows}
    done: list[str] = []
    for migration in migrations:
        if migration.version in applied:
            continue
        yield Script(migration.sql)
        if migration.version == c.TENANT_MIGRATION:
            while rows := (yield q.UNFILLED_JOBS).rows:
                yield q.fill_job_products(rows)
            yield q.FILL_OUTBOX_PRODUCTS
        yield q.record_migration(d, migration)
        done.append(migration.name)
    return done


def _migration_status(d: Dialect, migrations: Sequence[c.Migration]) -> Program[MigrationStatus]:
    """The ledger against ``migrations``, read only: no lock, no ledger created (§15.4)."""
    applied: set[int] = set()
    if (yield Statement(d.ledger_exists)).rows:
        applied = {int(row["version"]) for row in (yield q.APPLIED_VERSIONS).rows}
    shipped = {m.version for m in migrations}
    return MigrationStatus(
        version=max(applied & shipped, default=0),
        pending=tuple(m.name for m in migrations if m.version not in applied),
        unknown=tuple(sorted(applied - shipped)),
    )


def _compare_and_set(update: Statement, then: Statement) -> Program[bool]:
    """``update``, and ``then`` only when it changed exactly one row."""
    if (yield update).rowcount != 1:
        return False
    yield then
    return True


@dataclass(slots=True)
class _ClaimedBatch:
    """Claimed outbox rows; marks run where the claim holds them (PostgreSQL: in its
    transaction, committed when the claim ends; SQLite: each committed at once)."""

    rows: list[OutboxRow]
    run: StepRunner
    dialect: Dialect

    async def mark_sent(self, ce_ids: Sequence[str], at: datetime) -> None:
        await self.run(q.mark_sent(self.dialect, ce_ids, at))


class SqlMetadataStore(AsyncResource):
    """Every metadata-store role (:class:`fetcher.bootstrap.MetadataStore`) on a SQL backend."""

    dialect: ClassVar[Dialect]

    # -- what a backend supplies -------------------------------------------------------------

    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    async def acquire_process_lock(self) -> bool: ...

    @abstractmethod
    async def _transact(self, program: Program[T], tx: Tx) -> T:
        """Run ``program`` to its end in a transaction of kind ``tx``; the driver's errors
        become the port's."""

    @abstractmethod
    def _hold(self, claim: Statement) -> AbstractAsyncContextManager[tuple[list[Row], StepRunner]]:
        """Run ``claim`` and hold its rows for the context, with a runner for steps on them;
        marks made through it are durable when the context exits, also when its body
        raised."""

    # -- running statements ------------------------------------------------------------------

    async def _result(self, step: Step) -> Result:
        return await self._transact(single(step), "autocommit")

    async def _rows(self, statement: Statement) -> list[Row]:
        return (await self._result(statement)).rows

    async def _first(self, statement: Statement) -> Row | None:
        rows = await self._rows(statement)
        return rows[0] if rows else None

    async def _changed_one(self, statement: Statement) -> bool:
        return (await self._result(statement)).rowcount == 1

    def _job(self, row: Row | None) -> JobRecord | None:
        return None if row is None else c.job_from_row(row, self.dialect.read_ts)

    def _jobs(self, rows: list[Row]) -> list[JobRecord]:
        return [c.job_from_row(row, self.dialect.read_ts) for row in rows]

    def _connection(self, row: Row | None) -> ConnectionRecord | None:
        return None if row is None else c.connection_from_row(row, self.dialect.read_ts)

    def _outbox(self, rows: list[Row]) -> list[OutboxRow]:
        return [c.outbox_from_row(row, self.dialect.read_ts) for row in rows]

    # -- lifecycle ---------------------------------------------------------------------------

    async def migrate(self) -> list[str]:
        migrations = c.load_migrations(self.dialect.name)
        return await self._transact(_migration(self.dialect, migrations), "exclusive")

    async def migration_status(self) -> MigrationStatus:
        migrations = c.load_migrations(self.dialect.name)
        return await self._transact(_migration_status(self.dialect, migrations), "snapshot")

    async def ping(self) -> None:
        await self._result(q.PING)

    # -- connections -------------------------------------------------------------------------

    async def insert_connection(self, record: ConnectionRecord) -> None:
        await self._result(q.insert_connection(self.dialect, record))

    async def get_connection(self, connection_id: str, *, tenant: str) -> ConnectionRecord | None:
        return self._connection(await self._first(q.connection_by("id", connection_id, tenant)))

    async def get_connection_by_name(
        self, config_name: str, *, tenant: str
    ) -> ConnectionRecord | None:
        statement = q.connection_by("config_name", config_name, tenant)
        return self._connection(await self._first(statement))

    async def list_connections(
        self, query: ConnectionQuery, *, tenant: str
    ) -> tuple[list[ConnectionRecord], int]:
        steps = q.connection_list(self.dialect, query, tenant)
        total, page = await self._transact(run_all(steps), "snapshot")
        records = [
            replace(c.connection_from_row(row, self.dialect.read_ts), cut=("metadata",))
            if row["cut_metadata"]
            else c.connection_from_row(row, self.dialect.read_ts)
            for row in page.rows
        ]
        return records, int(total.rows[0]["n"])

    async def update_connection(self, record: ConnectionRecord) -> bool:
        return await self._changed_one(q.update_connection(self.dialect, record))

    async def connections_under_other_keys(
        self, version: str, *, after_id: str, limit: int
    ) -> list[ConnectionRecord]:
        rows = await self._rows(q.connections_under_other_keys(version, after_id, limit))
        return [c.connection_from_row(row, self.dialect.read_ts) for row in rows]

    async def rekey_connection(
        self,
        record: ConnectionRecord,
        *,
        password_encrypted: str | None,
        ssl_key_encrypted: str | None,
        version: str,
    ) -> bool:
        statement = q.rekey_connection(record, password_encrypted, ssl_key_encrypted, version)
        return await self._changed_one(statement)

    async def soft_delete_connection(
        self, connection_id: str, now: datetime, *, tenant: str
    ) -> bool:
        statement = q.soft_delete_connection(self.dialect, connection_id, now, tenant)
        return await self._changed_one(statement)

    async def assign_product(
        self, connection_id: str, product_name: str, now: datetime, *, tenant: str
    ) -> bool:
        statement = q.assign_product(self.dialect, connection_id, product_name, now, tenant)
        return await self._changed_one(statement)

    async def has_active_jobs(self, config_name: str, *, tenant: str) -> bool:
        row = await self._first(q.has_active_jobs(config_name, tenant))
        return bool(row and row["found"])

    # -- jobs --------------------------------------------------------------------------------

    async def find_dedup_match(
        self, request_hash: str, completed_since: datetime, *, tenant: str
    ) -> JobRecord | None:
        statement = q.dedup_match(self.dialect, request_hash, completed_since, tenant)
        return self._job(await self._first(statement))

    async def insert_job(self, record: JobRecord) -> None:
        steps = q.insert_job(self.dialect, record)
        await self._transact(run_all(steps), "write" if len(steps) > 1 else "autocommit")

    async def get_job(self, job_id: str, *, tenant: str) -> JobRecord | None:
        return self._job(await self._first(q.job_by_id(job_id, tenant)))

    async def claim_job(self, job_id: str, now: datetime) -> bool:
        return await self._changed_one(q.claim_job(self.dialect, job_id, now))

    async def _transition(self, update: Statement, event: OutboxEvent) -> bool:
        """One compare-and-set and, only when it matched, its outbox row (§8.6), in one
        transaction; then number the feed where the backend numbers it after commit."""
        program = _compare_and_set(update, q.insert_event(self.dialect, event))
        if not await self._transact(program, "write"):
            return False
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
        result_summary_json: str | None = None,
        result_key_version: str | None = None,
    ) -> bool:
        update = q.complete_job(
            self.dialect,
            job_id,
            (result_path, result_hmac, result_summary_json, result_key_version),
            completed_at,
        )
        return await self._transition(update, event)

    async def fail_job(
        self,
        job_id: str,
        *,
        from_statuses: Sequence[JobStatus],
        error: str,
        completed_at: datetime,
        event: OutboxEvent,
    ) -> bool:
        update = q.fail_job(self.dialect, job_id, from_statuses, error, completed_at)
        return await self._transition(update, event)

    async def cancel_job(self, job_id: str, *, canceled_at: datetime, event: OutboxEvent) -> bool:
        return await self._transition(q.cancel_job(self.dialect, job_id, canceled_at), event)

    async def job_status(self, job_id: str) -> JobStatus | None:
        row = await self._first(q.job_status(job_id))
        return None if row is None else c.job_status(row["status"])

    async def reap_candidates(
        self,
        *,
        pending_created_before: datetime,
        processing_started_before: datetime,
        limit: int,
    ) -> list[JobRecord]:
        statement = q.reap_candidates(
            self.dialect, pending_created_before, processing_started_before, limit
        )
        return self._jobs(await self._rows(statement))

    async def jobs_with_status(self, status: JobStatus) -> list[JobRecord]:
        return self._jobs(await self._rows(q.jobs_with_status(status)))

    async def search_jobs(self, query: JobSearchQuery) -> list[ListedJob]:
        """``GET /v1/fetcher``'s page (:class:`~fetcher.services.store_roles.JobSearch`)."""
        rows = await self._rows(search_statement(query, self.dialect))
        return [ListedJob(c.job_from_row(row, self.dialect.read_ts), _cut(row)) for row in rows]

    # -- outbox and feed -----------------------------------------------------------------------

    @asynccontextmanager
    async def claim_unsent(
        self, *, created_before: datetime, limit: int
    ) -> AsyncIterator[_ClaimedBatch]:
        async with self._hold(q.claim_unsent(self.dialect, created_before, limit)) as held:
            rows, run = held
            yield _ClaimedBatch(self._outbox(rows), run, self.dialect)

    async def mark_sent(self, ce_ids: Sequence[str], at: datetime) -> None:
        await self._result(q.mark_sent(self.dialect, ce_ids, at))

    async def assign_feed_seq(self) -> int:
        steps = [Statement(sql) for sql in self.dialect.number_feed]
        if not steps:
            return 0
        return (await self._transact(run_all(steps), "write"))[-1].rowcount

    async def read_feed(
        self,
        *,
        after: int,
        limit: int,
        event_type: EventType | None = None,
        tenant: str,
        products: Collection[str] | None,
    ) -> list[OutboxRow]:
        statement = q.feed(
            self.dialect,
            after=after,
            limit=limit,
            event_type=event_type,
            tenant=tenant,
            products=products,
        )
        return self._outbox(await self._rows(statement))

    async def count_unsent(self) -> int:
        row = await self._first(q.COUNT_UNSENT)
        return 0 if row is None else int(row["n"])

    async def backlog(self) -> Backlog:
        jobs = await self._first(q.PENDING_BACKLOG)
        events = await self._first(q.UNSENT_BACKLOG)

        def count(row: Row | None) -> int:
            return 0 if row is None else int(row["n"])

        def oldest(row: Row | None) -> datetime | None:
            value = None if row is None else row["oldest"]
            return None if value is None else self.dialect.read_ts(value)

        return Backlog(count(jobs), oldest(jobs), count(events), oldest(events))


_CUT_MEMBERS: tuple[tuple[str, Literal["mappedFields", "filters", "metadata"]], ...] = (
    (CUT_FLAGS["mapped_fields_json"], "mappedFields"),
    (CUT_FLAGS["filters_json"], "filters"),
    (CUT_FLAGS["metadata_json"], "metadata"),
)


def _cut(row: Row) -> tuple[Literal["mappedFields", "filters", "metadata"], ...]:
    """The members a list row left out (:func:`~.job_search.search_statement`'s flags)."""
    return tuple(member for flag, member in _CUT_MEMBERS if row[flag])
