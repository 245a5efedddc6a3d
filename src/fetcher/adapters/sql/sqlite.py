"""The SQLite connector (embedded mode only): stdlib ``sqlite3`` in a worker thread.

Contract: §2.5.1 (the location rules run again before every open), §2.9.1 (the ``file:`` URI
with the percent-encoded path and ``?mode=ro``), §11.1 (read-only, ``SELECT 1`` probe),
§11.3 (``sqlite_schema`` + ``pragma_table_info``, ``sqlite_*`` excluded), §11.4 (families from
the declared type's affinity) and §5.3 (values).

Decisions where the contract is silent:
* The URI is built from the *resolved* path (``os.path.realpath``) that passed the check, so a
  symlink swapped in between the check and the open cannot redirect it.
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
import math
import os
import re
import sqlite3
import stat
import urllib.parse
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import date, datetime
from decimal import Decimal
from types import TracebackType
from typing import Self, TypeVar

from fetcher.adapters.sql._common import (
    CONNECT_TIMEOUT_SECONDS,
    DEFAULT_BATCH_SIZE,
    DISCOVERY_TIMEOUT_SECONDS,
    Phase,
    engine_error,
    sqlite_name_excluded,
    translate_errors,
)
from fetcher.engine.filters.sql import dialect_for, render_select
from fetcher.engine.model import ConnectionDescriptor
from fetcher.engine.ports import Row, TableQuery
from fetcher.engine.types import Column, DiscoveredSchema, EngineType, TableSchema, TypeFamily
from fetcher.engine.values import (
    encode_bytes,
    encode_date,
    encode_datetime,
    encode_float,
    encode_text,
)

__all__ = [
    "LOCATION_DETAIL",
    "SqliteConnector",
    "check_location",
    "map_sqlite_errors",
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


def check_location(path: str, allowed_dir: str | None, forbidden_paths: Sequence[str] = ()) -> str:
    """§2.5.1: return the resolved path of a readable SQLite file inside ``allowed_dir``.

    Raises ``_LocationRejected`` (never saying which rule failed) when ``path`` is not absolute,
    resolves outside ``realpath(allowed_dir)`` (when set), is not a regular readable file with
    the SQLite header, or is one of ``forbidden_paths``.
    """
    if not path or "\x00" in path or not os.path.isabs(path):
        raise _LocationRejected
    real = os.path.realpath(path)
    if allowed_dir is not None and not _inside(real, os.path.realpath(allowed_dir)):
        raise _LocationRejected
    try:
        info = os.stat(real)
        if not stat.S_ISREG(info.st_mode) or _is_forbidden(real, info, forbidden_paths):
            raise _LocationRejected
        with open(real, "rb") as handle:
            if handle.read(len(_SQLITE_HEADER)) != _SQLITE_HEADER:
                raise _LocationRejected
    except OSError as exc:
        raise _LocationRejected from exc
    return real


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


def _timestamp(value: object) -> object:
    """Declared DATETIME/TIMESTAMP text in an ISO form → RFC 3339 UTC (§5.3; naive = UTC).

    SQLite has no timestamp storage class: text that does not parse as ISO 8601 (and
    numbers) is returned as stored rather than guessed at."""
    if isinstance(value, str):
        try:
            return encode_datetime(datetime.fromisoformat(value))
        except ValueError:
            pass
    return _stored(value)


def _date(value: object) -> object:
    """Declared DATE text: ``YYYY-MM-DD`` when it parses as a date, else as stored."""
    if isinstance(value, str):
        try:
            return encode_date(date.fromisoformat(value))
        except ValueError:
            pass
    return _stored(value)


_CONVERTERS: dict[TypeFamily, Callable[[object], object]] = {
    TypeFamily.DECIMAL: _decimal_text,
    TypeFamily.BOOLEAN: _boolean,
    TypeFamily.TIMESTAMP: _timestamp,
    TypeFamily.DATE: _date,
}


def _converter(column: Column) -> Callable[[object], object]:
    return _CONVERTERS.get(column.family, _stored)


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


def _open(path: str) -> sqlite3.Connection:
    """§2.9.1: ``file:`` + the percent-encoded path + ``?mode=ro``, as a URI."""
    uri = "file:" + urllib.parse.quote(path) + "?mode=ro"
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
    except BaseException:
        db.close()
        raise
    return db


def _catalog(db: sqlite3.Connection) -> list[tuple[str, str, str]]:
    return db.execute(_CATALOG_SQL).fetchall()


def _tables_from(rows: Sequence[tuple[str, str, str]]) -> tuple[TableSchema, ...]:
    grouped: dict[str, list[Column]] = {}
    for table, column, declared in rows:
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

    @property
    def _name(self) -> str:
        return self._connection.config_name

    async def __aenter__(self) -> Self:
        """§2.5.1: the location rules run again before the open; a failure is a connect
        failure whose detail never says whether the file exists."""
        try:
            path = await asyncio.to_thread(
                check_location, self._connection.database, self._allowed_dir, self._forbidden
            )
        except _LocationRejected:
            raise engine_error(Phase.CONNECT, self._name, LOCATION_DETAIL) from None
        with map_sqlite_errors(Phase.CONNECT, self._name):
            self._db = await asyncio.to_thread(_open, path)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        db, self._db = self._db, None
        if db is not None:
            with suppress(sqlite3.Error):
                db.close()

    def _require(self, phase: Phase) -> sqlite3.Connection:
        if self._db is None:
            raise engine_error(phase, self._name, "connection is not open")
        return self._db

    async def _call(
        self, db: sqlite3.Connection, seconds: float | None, fn: Callable[[], _T]
    ) -> _T:
        """Run ``fn`` in a thread; after ``seconds`` the running statement is interrupted."""
        try:
            async with asyncio.timeout(seconds):
                return await asyncio.to_thread(fn)
        except TimeoutError:
            db.interrupt()
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
        return DiscoveredSchema(default_schema=DEFAULT_SCHEMA, tables=_tables_from(rows))

    async def stream(self, query: TableQuery) -> AsyncIterator[Sequence[Row]]:
        """Rows through one cursor, ``batch_size`` at a time, encoded per §5.3."""
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
            try:
                while batch := await self._call(
                    db, None, lambda: cursor.fetchmany(self._batch_size)
                ):
                    yield [
                        {
                            name: convert(value)
                            for name, convert, value in zip(names, converters, row, strict=True)
                        }
                        for row in batch
                    ]
            finally:
                cursor.close()
