"""The SQLite connector (embedded mode only): stdlib ``sqlite3`` in a worker thread.

Contract: §2.5.1 (the location rules run again before every open), §2.9.1 (the ``file:`` URI
with the percent-encoded path and ``?mode=ro&nofollow=1``), §11.1 (read-only, ``SELECT 1``
probe), §11.3 (``sqlite_schema`` + ``pragma_table_info``, ``sqlite_*`` excluded), §11.4
(families from the declared type's affinity), §5.3 (values) and §13 "Blocking work".

Symbolic links (§2.5.1, §2.9.1, issue 7): the last component of ``databaseName`` must not be a
symbolic link, and a file swapped for one after the check must not be read. The check opens
the file itself with ``O_NOFOLLOW`` and records its identity (device, inode) through ``fstat``
on that descriptor. The URI carries ``nofollow=1`` as §2.9.1 prescribes, but the SQLite
library's URI parser ignores that parameter (``SQLITE_OPEN_NOFOLLOW`` is only an
``sqlite3_open_v2`` flag, which Python's ``sqlite3`` does not expose), so it is not relied on.
What holds instead: SQLite's unix VFS resolves every symbolic link of a path into the name it
opens (``PRAGMA database_list``) and then opens that name with ``O_NOFOLLOW``; after the open
and the first page read, before any row leaves the connector, :func:`verify_opened` requires
that name to equal the checked path and the path to still be the same regular file (device,
inode), not a link. A mismatch closes the connection as a location failure. What remains is
an intermediate directory swapped for a link and restored again inside the microseconds
between SQLite's name resolution and its ``open``; a file-level swap at any time is refused.

Blocking work (§13): every ``sqlite3`` call runs in this module's own bounded thread pool
(never the default executor the metadata store uses), and a statement whose awaiting task is
cancelled or times out is interrupted (``Connection.interrupt``), so the thread is released.

Decisions where the contract is silent:
* The URI is built from the *resolved* path (``os.path.realpath``) that passed the check.
* A "SQLite file" starts with the 16-byte header ``SQLite format 3\\0``; an empty file fails.
* Values are the stored values (§5.3 by storage class): INTEGER → int, REAL → float (NaN and
  infinities as strings), TEXT → string, BLOB → base64. Two families refine this: a declared
  BOOLEAN column turns stored ``0``/``1`` into ``false``/``true``, and a decimal-family
  (NUMERIC affinity) column yields strings: stored text as is, integers as their digits, and
  REAL values as the shortest round-trip text of the float without an exponent.
* Dates and times are returned as stored (SQLite has no date type). Filter values are bound
  in the text forms ``render_select`` gives them for SQLite (``YYYY-MM-DD``,
  ``YYYY-MM-DD HH:MM:SS[.ffffff]``, ``HH:MM:SS[.ffffff]``, decimal and UUID text).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import math
import os
import re
import sqlite3
import stat
import threading
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from types import TracebackType
from typing import Any, Final, Self, TypeVar

from fetcher.adapters.batch_sizing import BatchSizer
from fetcher.adapters.jsonlayout import FastRowBatch
from fetcher.adapters.sql._common import (
    CONNECT_TIMEOUT_SECONDS,
    DEFAULT_BATCH_SIZE,
    DISCOVERY_TIMEOUT_SECONDS,
    CatalogColumn,
    Phase,
    catalog_rows,
    engine_error,
    nullable,
    sqlite_name_excluded,
    translate_errors,
)
from fetcher.engine import ConnectionDescriptor
from fetcher.engine.kit import (
    Column,
    DiscoveredSchema,
    EngineType,
    Row,
    TableQuery,
    TableSchema,
    TypeFamily,
    dialect_for,
    encode_bytes,
    encode_date,
    encode_datetime,
    encode_float,
    encode_text,
    render_select,
)

__all__ = [
    "LOCATION_DETAIL",
    "SqliteConnector",
    "SQLITE_READ_THREADS",
    "CheckedFile",
    "check_location",
    "map_sqlite_errors",
    "sqlite_busy_threads",
    "sqlite_family",
]

#: §3.3: the only SQLite schema.
DEFAULT_SCHEMA = "main"
#: §2.5.1: the one detail of every location failure; it never says whether a file exists.
LOCATION_DETAIL = "databaseName must be a readable SQLite file in the allowed directory"
_SQLITE_HEADER = b"SQLite format 3\x00"

_T = TypeVar("_T")


@contextmanager
def map_sqlite_errors(phase: Phase, datasource: str) -> Iterator[None]:
    """Translate ``sqlite3``, file and timeout failures into the §4.5 ``EngineError``."""
    with translate_errors(phase, datasource, (sqlite3.Error,)):
        yield


# --------------------------------------------------------------------------------------------
# §2.5.1 location rules
# --------------------------------------------------------------------------------------------


class _LocationRejected(Exception):
    """A §2.5.1 rule failed (which one is never reported)."""


def _inside(path: str, root: str) -> bool:
    return path != root and os.path.commonpath([path, root]) == root


def _is_forbidden(real: str, info: os.stat_result, forbidden_paths: Sequence[str]) -> bool:
    """The metadata store file (or a hard link to it) is always rejected."""
    for forbidden in forbidden_paths:
        if os.path.realpath(forbidden) == real:
            return True
        with suppress(OSError):
            other = os.stat(forbidden)
            if (other.st_dev, other.st_ino) == (info.st_dev, info.st_ino):
                return True
    return False


@dataclass(frozen=True, slots=True)
class CheckedFile:
    """A file that passed §2.5.1: its resolved path and the identity the check saw."""

    path: str
    device: int
    inode: int


def _read_checked(real: str, forbidden_paths: Sequence[str]) -> CheckedFile:
    """Open ``real`` without following a final symbolic link (``O_NOFOLLOW``; ``O_NONBLOCK`` so
    a FIFO swapped in cannot hang the thread) and judge the descriptor, not the name."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(real, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or _is_forbidden(real, info, forbidden_paths):
            raise _LocationRejected
        if os.pread(fd, len(_SQLITE_HEADER), 0) != _SQLITE_HEADER:
            raise _LocationRejected
    finally:
        os.close(fd)
    return CheckedFile(real, info.st_dev, info.st_ino)


def check_location(
    path: str, allowed_dir: str | None, forbidden_paths: Sequence[str] = ()
) -> CheckedFile:
    """§2.5.1: the checked, resolved file of a readable SQLite database inside ``allowed_dir``.

    Raises ``_LocationRejected`` (never saying which rule failed) when ``path`` is not absolute,
    its last component is a symbolic link, it resolves outside ``realpath(allowed_dir)`` (when
    set), or it is not a regular readable file with the SQLite header, or is one of
    ``forbidden_paths``.
    """
    if not path or "\x00" in path or not os.path.isabs(path):
        raise _LocationRejected
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            raise _LocationRejected
        real = os.path.realpath(path)
        if allowed_dir is not None and not _inside(real, os.path.realpath(allowed_dir)):
            raise _LocationRejected
        return _read_checked(real, forbidden_paths)
    except (OSError, ValueError) as exc:
        raise _LocationRejected from exc


def verify_opened(db: sqlite3.Connection, checked: CheckedFile) -> None:
    """After the open and first page read: SQLite opened exactly the checked file.

    SQLite resolves every symbolic link of the path into the name it opens, so a link swapped in
    anywhere along the path after the check shows up as another name; the name must still be
    the same regular file, not a link. Raises ``_LocationRejected``.
    """
    names = [row[2] for row in db.execute("PRAGMA database_list") if row[1] == "main"]
    if names != [checked.path]:
        raise _LocationRejected
    try:
        info = os.lstat(checked.path)
    except OSError as exc:
        raise _LocationRejected from exc
    if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) != (
        checked.device,
        checked.inode,
    ):
        raise _LocationRejected


# --------------------------------------------------------------------------------------------
# §11.4 families
# --------------------------------------------------------------------------------------------

_DECLARED: dict[str, TypeFamily] = {
    "BOOLEAN": TypeFamily.BOOLEAN,
    "BOOL": TypeFamily.BOOLEAN,
    "DATE": TypeFamily.DATE,
    "DATETIME": TypeFamily.TIMESTAMP,
    "TIMESTAMP": TypeFamily.TIMESTAMP,
    "TIME": TypeFamily.TIME,
}


def sqlite_family(declared: str) -> TypeFamily:
    """§11.4: declared BOOLEAN/DATE/DATETIME/TIMESTAMP/TIME first, then SQLite's affinity
    rules (https://sqlite.org/datatype3.html §3.1) in their order: INT → integer;
    CHAR/CLOB/TEXT → text; BLOB or no type → bytes; REAL/FLOA/DOUB → float; else decimal."""
    upper = declared.strip().upper()
    base = re.split(r"[\s(]", upper, maxsplit=1)[0]
    if base in _DECLARED:
        return _DECLARED[base]
    if "INT" in upper:
        return TypeFamily.INTEGER
    if any(word in upper for word in ("CHAR", "CLOB", "TEXT")):
        return TypeFamily.TEXT
    if not upper or "BLOB" in upper:
        return TypeFamily.BYTES
    if any(word in upper for word in ("REAL", "FLOA", "DOUB")):
        return TypeFamily.FLOAT
    return TypeFamily.DECIMAL


# --------------------------------------------------------------------------------------------
# Values (§5.3) and bound parameters
# --------------------------------------------------------------------------------------------


def _stored(value: object) -> object:
    """A stored value by storage class."""
    if isinstance(value, float):
        return encode_float(value)
    if isinstance(value, str):
        return encode_text(value)
    if isinstance(value, bytes):
        return encode_bytes(value)
    return value


def _decimal_text(value: object) -> object:
    """Decimal family: strings; REAL as the shortest round-trip text, no exponent."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _stored(value)
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return encode_float(value)
    return format(Decimal(repr(value)), "f")


def _boolean(value: object) -> object:
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    return _stored(value)


def _iso_text(value: object, parse: Callable[[str], _T], encode: Callable[[_T], str]) -> object:
    """``encode(parse(value))`` for text that parses, else the value as stored."""
    if isinstance(value, str):
        try:
            return encode(parse(value))
        except ValueError:
            pass
    return _stored(value)


def _timestamp(value: object) -> object:
    """Declared DATETIME/TIMESTAMP text in an ISO form → RFC 3339 UTC (§5.3; naive = UTC).

    SQLite has no timestamp storage class: text that does not parse as ISO 8601 (and
    numbers) is returned as stored rather than guessed at."""
    return _iso_text(value, datetime.fromisoformat, encode_datetime)


def _date(value: object) -> object:
    """Declared DATE text: ``YYYY-MM-DD`` when it parses as a date, else as stored."""
    return _iso_text(value, date.fromisoformat, encode_date)


_CONVERTERS: dict[TypeFamily, Callable[[object], object]] = {
    TypeFamily.DECIMAL: _decimal_text,
    TypeFamily.BOOLEAN: _boolean,
    TypeFamily.TIMESTAMP: _timestamp,
    TypeFamily.DATE: _date,
}


def _converter(column: Column) -> Callable[[object], object]:
    return _CONVERTERS.get(column.family, _stored)


_AS_STORED: Final = frozenset({int, str, type(None)})


def _converted(convert: Callable[[object], object], values: Sequence[object]) -> Sequence[object]:
    """One column of a batch through its converter. A column of stored values that are all
    integers, text or NULL is final as it is (``_stored`` returns them unchanged: text comes
    from ``_decode_text``, which never yields a surrogate), so no Python runs per value."""
    if convert is _stored and _AS_STORED.issuperset(map(type, values)):
        return values
    return list(map(convert, values))


def _row_batch(
    names: Sequence[str], converters: Sequence[Callable[[object], object]], rows: list[Any]
) -> Sequence[Row]:
    """A fetched batch as columns (speed, issue 12): a
    :class:`~fetcher.adapters.jsonlayout.fastjson.FastRowBatch` writes its own §5.4 bytes whole, and
    reading it gives the same ``dict`` rows as before."""
    if not names:
        return [{} for _ in rows]
    columns = list(zip(*rows, strict=True))
    return FastRowBatch(names, [_converted(c, v) for c, v in zip(converters, columns, strict=True)])


def sqlite_param(value: object) -> object:
    """A bound filter value in a form ``sqlite3`` binds without adapters. ``render_select``
    already turns temporal, ``Decimal`` and ``UUID`` values into their SQLite text forms;
    anything else that is not a native SQLite value is bound as its ``str()``."""
    if value is None or isinstance(value, int | float | str | bytes):
        return value
    return str(value)


# --------------------------------------------------------------------------------------------
# Blocking helpers (run in a worker thread)
# --------------------------------------------------------------------------------------------

#: §13 "Blocking work": the bound of the SQLite datasource read pool (per process).
SQLITE_READ_THREADS = 4
#: SQLite calls the abandonment check every this many virtual-machine steps (microseconds).
_ABANDON_CHECK_STEPS = 10_000


class _ReadPool:
    """The SQLite datasource threads: created on first use, shared by every connector of the
    process, separate from the default executor that the metadata store uses."""

    def __init__(self, workers: int) -> None:
        self._workers = workers
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self.busy = 0

    def executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=self._workers, thread_name_prefix="fetcher-sqlite"
                )
            return self._executor

    def run(self, fn: Callable[[], _T]) -> _T:
        """In a pool thread: ``fn()``, counted while it runs."""
        with self._lock:
            self.busy += 1
        try:
            return fn()
        finally:
            with self._lock:
                self.busy -= 1


_POOL = _ReadPool(SQLITE_READ_THREADS)


def sqlite_busy_threads() -> int:
    """How many SQLite pool threads are running a call now (tests, diagnostics)."""
    return _POOL.busy


def _submit(fn: Callable[[], _T]) -> Future[_T]:
    """``fn`` queued on the SQLite read pool, in a copy of the caller's context."""
    call = functools.partial(contextvars.copy_context().run, _POOL.run, fn)
    return _POOL.executor().submit(call)


async def _in_pool(fn: Callable[[], _T]) -> _T:
    """Run ``fn`` in the SQLite read pool (cancelling the wait unqueues a call not yet
    started; one already running finishes in its thread)."""
    return await asyncio.wrap_future(_submit(fn))


def _quietly(fn: Callable[[], object]) -> None:
    with suppress(sqlite3.Error):
        fn()


async def _finish_after(running: Future[Any] | None, fn: Callable[[], object]) -> None:
    """Run a closing call (a cursor's or the connection's ``close``) in the pool once
    ``running``, the connection's last call, has returned. A call whose awaiting task was
    cancelled still runs in its thread until its interrupted statement returns, and closing
    a ``sqlite3`` connection while another thread is inside one of its calls crashes the
    process (a segmentation fault, seen in CI). Once requested, the close runs even if the
    awaiting task is cancelled meanwhile; that cancellation still propagates."""
    closed: Future[None] = Future()

    def close(_: object = None) -> None:
        try:
            done = _submit(functools.partial(_quietly, fn))
        except RuntimeError as exc:  # the pool is shut down (interpreter exit): do not hang
            closed.set_exception(exc)
            return
        done.add_done_callback(lambda _: closed.set_result(None))

    if running is None:
        close()
    else:
        running.add_done_callback(close)  # at once when it is already done
    await asyncio.shield(asyncio.wrap_future(closed))


_CATALOG_SQL = """
SELECT s.name, p.name, p.type
FROM main.sqlite_schema AS s
JOIN pragma_table_info(s.name, 'main') AS p
WHERE s.type IN ('table', 'view')
ORDER BY s.name, p.cid
"""


def _decode_text(data: bytes) -> str:
    """TEXT values: invalid UTF-8 replaced with U+FFFD (§5.3)."""
    return data.decode("utf-8", "replace")


def _open(checked: CheckedFile) -> sqlite3.Connection:
    """§2.9.1: ``file:`` + the percent-encoded path + ``?mode=ro&nofollow=1``, as a URI; then
    the first page read and :func:`verify_opened`, before anything is read from the file."""
    uri = "file:" + urllib.parse.quote(checked.path) + "?mode=ro&nofollow=1"
    db = sqlite3.connect(
        uri,
        uri=True,
        timeout=CONNECT_TIMEOUT_SECONDS,
        check_same_thread=False,
        isolation_level=None,
    )
    try:
        db.text_factory = _decode_text
        db.execute("PRAGMA query_only = ON")
        db.execute("SELECT 1 FROM main.sqlite_schema LIMIT 1").fetchall()
        verify_opened(db, checked)
    except BaseException:
        db.close()
        raise
    return db


def _catalog(db: sqlite3.Connection) -> list[tuple[Any, ...]]:
    return db.execute(_CATALOG_SQL).fetchall()


#: What each catalog row holds: a crafted file can store other values in ``sqlite_schema``.
_CATALOG_COLUMNS = (CatalogColumn("name"), CatalogColumn("column name"), nullable("type"))


def _tables_from(rows: Sequence[tuple[Any, ...]], datasource: str) -> tuple[TableSchema, ...]:
    """Group catalog rows into ``TableSchema`` values; a row of another shape is the
    discovery failure naming the column."""
    grouped: dict[str, list[Column]] = {}
    for table, column, declared in catalog_rows(rows, _CATALOG_COLUMNS, datasource):
        if sqlite_name_excluded(table):
            continue
        family = sqlite_family(declared or "")
        grouped.setdefault(table, []).append(Column(column, family, declared or ""))
    return tuple(
        TableSchema(schema=DEFAULT_SCHEMA, name=name, columns=tuple(columns))
        for name, columns in grouped.items()
    )


# --------------------------------------------------------------------------------------------
# The connector
# --------------------------------------------------------------------------------------------


class SqliteConnector:
    """A read-only ``sqlite3`` session on one SQLite file (the ``Connector`` port)."""

    def __init__(
        self,
        connection: ConnectionDescriptor,
        *,
        allowed_dir: str | None,
        forbidden_paths: Sequence[str] = (),
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be positive")
        self._connection = connection
        self._allowed_dir = allowed_dir
        self._forbidden = tuple(forbidden_paths)
        self._batch_size = batch_size
        self._db: sqlite3.Connection | None = None
        #: Set once a call is cancelled or timed out. ``Connection.interrupt()`` only stops a
        #: statement that is already running; a call still queued for a pool thread, or about
        #: to start its statement, would miss it and run for ever. The progress handler sees
        #: this flag from inside every statement, whenever it starts.
        self._abandoned = threading.Event()
        #: The pool call most recently submitted on ``_db``: closes wait for it to return.
        self._last_call: Future[Any] | None = None

    @property
    def _name(self) -> str:
        return self._connection.config_name

    async def __aenter__(self) -> Self:
        """§2.5.1: the location rules run again before the open; a failure is a connect
        failure whose detail never says whether the file exists."""
        database, allowed, forbidden = self._connection.database, self._allowed_dir, self._forbidden
        try:
            checked = await _in_pool(lambda: check_location(database, allowed, forbidden))
            with map_sqlite_errors(Phase.CONNECT, self._name):
                self._db = await _in_pool(lambda: _open(checked))
            self._db.set_progress_handler(self._abandoned.is_set, _ABANDON_CHECK_STEPS)
        except _LocationRejected:
            raise engine_error(Phase.CONNECT, self._name, LOCATION_DETAIL) from None
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        db, self._db = self._db, None
        if db is not None:
            await _finish_after(self._last_call, db.close)

    def _require(self, phase: Phase) -> sqlite3.Connection:
        if self._db is None:
            raise engine_error(phase, self._name, "connection is not open")
        return self._db

    async def _call(
        self, db: sqlite3.Connection, seconds: float | None, fn: Callable[[], _T]
    ) -> _T:
        """Run ``fn`` in the SQLite read pool. When ``seconds`` pass, or the awaiting task is
        cancelled (a job's deadline, fail-fast, shutdown), the running statement is interrupted
        so that the pool thread is released instead of finishing a query nobody awaits."""
        future = _submit(fn)
        self._last_call = future
        try:
            async with asyncio.timeout(seconds):
                return await asyncio.wrap_future(future)
        except (TimeoutError, asyncio.CancelledError):
            self._abandoned.set()  # a statement that has not started yet stops at its start
            db.interrupt()  # one that runs stops now
            raise

    async def probe(self) -> None:
        """§2.6.7: ``SELECT 1``; a failure is a connect failure."""
        db = self._require(Phase.CONNECT)
        with map_sqlite_errors(Phase.CONNECT, self._name):
            await self._call(db, CONNECT_TIMEOUT_SECONDS, lambda: db.execute("SELECT 1").fetchall())

    async def discover(self, schemas: Sequence[str]) -> DiscoveredSchema:
        """§11.3: tables and views of ``main`` (``schemas`` is ignored: one namespace)."""
        db = self._require(Phase.DISCOVER)
        with map_sqlite_errors(Phase.DISCOVER, self._name):
            rows = await self._call(db, DISCOVERY_TIMEOUT_SECONDS, lambda: _catalog(db))
        tables = _tables_from(rows, self._name)
        return DiscoveredSchema(default_schema=DEFAULT_SCHEMA, tables=tables)

    async def stream(self, query: TableQuery) -> AsyncIterator[Sequence[Row]]:
        """Rows through one cursor, at most ``batch_size`` (and about ``BATCH_TARGET_BYTES``)
        at a time, encoded per §5.3."""
        db = self._require(Phase.QUERY)
        sql, params = render_select(
            dialect_for(EngineType.SQLITE),
            query.table.schema or DEFAULT_SCHEMA,
            query.table.name,
            query.columns,
            query.filters,
        )
        bound = [sqlite_param(value) for value in params]
        names = [column.name for column in query.columns]
        converters = [_converter(column) for column in query.columns]
        with map_sqlite_errors(Phase.QUERY, self._name):
            cursor = await self._call(db, None, lambda: db.execute(sql, bound))
            sizer = BatchSizer(self._batch_size)
            try:
                while batch := await self._call(db, None, lambda: cursor.fetchmany(sizer.rows)):
                    sizer.observe(batch)
                    yield _row_batch(names, converters, batch)
            finally:
                await _finish_after(self._last_call, cursor.close)
