"""SQLite metadata store (embedded mode; contract §1.5, §2.6, §3.8, §4, §8.6, §2.12).

The statements and methods are the shared ones (:mod:`._sql_store`); this module holds
SQLite's :data:`SQLITE` dialect and its driver: one stdlib ``sqlite3`` connection, used from
worker threads (``asyncio.to_thread``) under a lock, in WAL mode with foreign keys on. A unit
of work runs whole on the worker thread, in an explicit transaction (``BEGIN IMMEDIATE`` for
writes); SQLite serializes write transactions, so the outbox rowid is the feed sequence.
Driver errors become the port's errors in :func:`map_sqlite_errors`, and only there. Nothing
here imports the PostgreSQL driver.

§13 "Files": a new database file is created here with mode 0600 (its missing directories 0700)
before SQLite opens it; SQLite gives the ``-wal`` and ``-shm`` files it creates the permissions
of the main file, so they are 0600 too. An existing file keeps its mode.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

from fetcher.adapters.objectstore.local import create_private_file, make_private_dirs
from fetcher.adapters.store import _common as c
from fetcher.adapters.store import _program as p
from fetcher.adapters.store._dialect import Dialect
from fetcher.adapters.store._sql_store import SqlMetadataStore, StepRunner
from fetcher.services.store_roles import (
    ActiveDuplicateError,
    ConflictError,
    StoreError,
    StoreUnavailableError,
)

__all__ = ["SqliteMetadataStore", "map_sqlite_errors"]

T = TypeVar("T")


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


def _dict_row(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> dict[str, Any]:
    return {d[0]: v for d, v in zip(cursor.description, row, strict=True)}


SQLITE = Dialect(
    name="sqlite",
    render=str,
    ts=c.ts_text,
    read_ts=c.parse_ts_text,
    true="1",
    false="0",
    now="strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
    ledger_applied_at="TEXT NOT NULL",
    migration_lock=None,  # BEGIN EXCLUSIVE
    ledger_exists=(
        "SELECT 1 AS found FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ),
    metadata_match=lambda key, value: f"fetcher_metadata_matches(metadata_json, {key}, {value})",
    # SQLite serializes write transactions, so the rowid is the feed sequence (§2.12).
    feed_seq="id",
    number_feed=(),
    claim_lock="",
    chained_insert=False,
)

#: How each kind of transaction begins; SQLite serializes writers from BEGIN IMMEDIATE on.
_BEGIN: dict[p.Tx, str] = {
    "write": "BEGIN IMMEDIATE",
    "snapshot": "BEGIN DEFERRED",
    "exclusive": "BEGIN EXCLUSIVE",
}


def _statements(script: str) -> Iterator[str]:
    """Split a migration script into complete statements."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer
            buffer = ""


def _execute(conn: sqlite3.Connection, step: p.Step) -> p.Result:
    """One step on the worker thread; ``sqlite3`` runs one statement at a time, so a migration
    script is split into its statements."""
    if isinstance(step, p.Script):
        for statement in _statements(step.sql):
            conn.execute(statement)
        return p.Result([], -1)
    if isinstance(step, p.Each):
        return p.Result([], conn.executemany(SQLITE.render(step.sql), step.rows).rowcount)
    cursor = conn.execute(SQLITE.render(step.sql), step.params)
    return p.Result(cursor.fetchall(), cursor.rowcount)


def _in_transaction(conn: sqlite3.Connection, program: p.Program[T], tx: p.Tx) -> T:
    """``program`` on the worker thread, in one transaction of kind ``tx``, rolled back when
    anything raises."""
    if tx == "autocommit":
        return p.drive(program, lambda step: _execute(conn, step))
    conn.execute(_BEGIN[tx])
    try:
        result = p.drive(program, lambda step: _execute(conn, step))
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return result


class SqliteMetadataStore(SqlMetadataStore):
    """The :class:`~fetcher.services.store_roles.MetadataStore` on one SQLite file."""

    dialect = SQLITE

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_ms: int = 5000) -> None:
        self._path = os.fspath(path)
        self._busy_timeout_ms = int(busy_timeout_ms)
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SqliteMetadataStore(path={self._path!r})"

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

    async def acquire_process_lock(self) -> bool:
        """Embedded mode's one process owns the file; nothing to lock."""
        return True

    async def _transact(self, program: p.Program[T], tx: p.Tx) -> T:
        return await self._run(lambda conn: _in_transaction(conn, program, tx))

    @asynccontextmanager
    async def _hold(self, claim: p.Statement) -> AsyncIterator[tuple[list[p.Row], StepRunner]]:
        """One embedded repairer claims alone: nothing is locked, and each mark commits at
        once."""
        yield (await self._result(claim)).rows, self._result
