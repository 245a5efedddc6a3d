"""The SQL Server connector: mssql-python (Microsoft ODBC Driver 18, bundled) in its own bounded
thread pool (contract §11.1, §11.2, §11.3, §11.4, §5.3, §2.9.1).

* Driver: mssql-python is blocking, so every driver call runs in :data:`MSSQL_THREADS` worker
  threads of a pool used by nothing else; the event loop never waits on the driver. A call
  that was cancelled (job timeout, client gone) is still awaited before the connection is
  closed, so a connection is never closed under a running fetch. Its connection pooling is
  turned off: each connector owns one session and closes it.
* Connect (§2.9.1): an ODBC connection string is unavoidable here, so every request value is
  braced with ``}`` doubled (:func:`odbc_value`): ``Server={<host>,<port>}``,
  ``Database={…}``, ``UID={…}``, ``PWD={…}``; the SSRF-pinned IP is the server when there is
  one, and the name is then kept as ``HostnameInCertificate`` for certificate checks.
  ``ApplicationIntent=ReadOnly`` (§11.1); autocommit, so no transaction is held open.
* TLS (§11.2): ``disable``/``false``/absent → ``Encrypt=no``; ``true`` →
  ``Encrypt=yes;TrustServerCertificate=yes``; ``strict`` → ``Encrypt=strict`` (TDS 8.0, the
  system store); ``ssl.ca``/``cert``/``key`` are ignored.
* Names (§3.3): the default schema is ``dbo``; identifiers are ``[x]`` with ``]`` doubled.
* Values (§5.3): the driver's Python values through the common encoders (``real`` as float32;
  ``uniqueidentifier`` lower-case; ``datetimeoffset`` in UTC); ``hierarchyid``, ``geography``
  and ``geometry`` are selected as ``.ToString()`` and ``sql_variant`` as ``nvarchar``, their
  text forms ("any other type").
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self, TypeVar
from uuid import UUID

import mssql_python
from mssql_python.exceptions import ConnectionStringParseError

from fetcher.adapters.batch_sizing import BatchSizer
from fetcher.adapters.sql._common import (
    CONNECT_TIMEOUT_SECONDS,
    DISCOVERY_TIMEOUT_SECONDS,
    CatalogColumn,
    NetworkConnector,
    Phase,
    catalog_rows,
    engine_error,
    nullable,
    result_columns,
    sqlserver_schema_excluded,
    translate_errors,
)
from fetcher.engine import ConnectionDescriptor
from fetcher.engine.kit import (
    Column,
    DiscoveredSchema,
    EngineType,
    Row,
    RowBatch,
    TableQuery,
    TableSchema,
    TlsSettings,
    TypeFamily,
    dialect_for,
    encode_float32,
    encode_value,
    quote_identifier,
    render_select,
)

__all__ = [
    "MSSQL_THREADS",
    "SqlServerConnector",
    "catalog_sql",
    "connection_string",
    "map_sqlserver_errors",
    "odbc_value",
    "select_sql",
    "sqlserver_family",
    "tls_options",
]

#: §3.3: the SQL Server default schema ``d``.
DEFAULT_SCHEMA = "dbo"
DEFAULT_PORT = 1433
#: Worker threads of the driver pool: the most SQL Server calls in flight at once, process-wide
#: (a Worker runs at most ``maxConcurrency`` datasources per job; calls beyond wait their turn).
MSSQL_THREADS = 8
PROBE_SQL = "SELECT 1"
#: The detail of a connection-string failure: the driver's text could quote a value.
_BAD_PARAMETERS = "invalid connection parameters"

_T = TypeVar("_T")

_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    """The driver's own bounded pool (created on first use, with pooling turned off)."""
    global _pool  # noqa: PLW0603 - one process-wide pool, created lazily
    with _pool_lock:
        if _pool is None:
            mssql_python.pooling(enabled=False)
            _pool = ThreadPoolExecutor(
                max_workers=MSSQL_THREADS, thread_name_prefix="fetcher-mssql"
            )
        return _pool


@contextmanager
def map_sqlserver_errors(phase: Phase, datasource: str) -> Iterator[None]:
    """Translate mssql-python, socket and timeout failures into the §4.5 ``EngineError``.

    A connection-string failure gets a fixed detail: the parser's message may quote the string.
    """
    with translate_errors(phase, datasource, (mssql_python.Error,)):
        try:
            yield
        except ConnectionStringParseError as exc:
            raise engine_error(phase, datasource, _BAD_PARAMETERS) from exc


# --------------------------------------------------------------------------------------------
# Connection string (§2.9.1, §11.2)
# --------------------------------------------------------------------------------------------


def odbc_value(value: str) -> str:
    """An ODBC connection-string value: braced, with each ``}`` doubled (§2.9.1)."""
    return "{" + value.replace("}", "}}") + "}"


def tls_options(tls: TlsSettings | None) -> tuple[str, ...]:
    """The §11.2 ``Encrypt`` options of ``ssl.mode`` (``ca``/``cert``/``key`` are ignored)."""
    mode = (tls.mode if tls is not None else "") or ""
    if mode in ("", "disable", "false"):
        return ("Encrypt=no",)
    if mode == "true":
        return ("Encrypt=yes", "TrustServerCertificate=yes")
    if mode == "strict":
        return ("Encrypt=strict",)
    raise ValueError(f"unsupported ssl.mode for SQL_SERVER: {mode}")


def connection_string(connection: ConnectionDescriptor, pinned_address: str | None = None) -> str:
    """The ODBC connection string; every request value braced (:func:`odbc_value`)."""
    host = connection.host or ""
    port = connection.port if connection.port is not None else DEFAULT_PORT
    options = tls_options(connection.ssl)
    parts = [
        f"Server={odbc_value(f'{pinned_address or host},{port}')}",
        f"Database={odbc_value(connection.database)}",
        f"UID={odbc_value(connection.username or '')}",
        f"PWD={odbc_value(connection.password or '')}",
        "ApplicationIntent=ReadOnly",
        *options,
    ]
    if pinned_address and options != ("Encrypt=no",):
        # §2.9.1 rule 3: the IP is dialed; the certificate is checked against the name.
        parts.append(f"HostnameInCertificate={odbc_value(host)}")
    return ";".join(parts)


# --------------------------------------------------------------------------------------------
# Types (§11.4) and SQL
# --------------------------------------------------------------------------------------------

_FAMILY_BY_TYPE: dict[str, TypeFamily] = {
    **dict.fromkeys(("tinyint", "smallint", "int", "bigint"), TypeFamily.INTEGER),
    **dict.fromkeys(("decimal", "numeric", "money", "smallmoney"), TypeFamily.DECIMAL),
    **dict.fromkeys(("real", "float"), TypeFamily.FLOAT),
    "bit": TypeFamily.BOOLEAN,
    **dict.fromkeys(
        ("char", "varchar", "nchar", "nvarchar", "text", "ntext", "xml"), TypeFamily.TEXT
    ),
    "date": TypeFamily.DATE,
    **dict.fromkeys(("datetime", "datetime2", "smalldatetime"), TypeFamily.TIMESTAMP),
    "datetimeoffset": TypeFamily.TIMESTAMPTZ,
    "time": TypeFamily.TIME,
    "uniqueidentifier": TypeFamily.UUID,
    **dict.fromkeys(("binary", "varbinary", "image"), TypeFamily.BYTES),
}
#: CLR types read through their ``ToString()`` text, and ``sql_variant`` as ``nvarchar``.
_TO_STRING_TYPES = frozenset({"hierarchyid", "geography", "geometry"})


def sqlserver_family(data_type: str) -> TypeFamily:
    """§11.4 from ``INFORMATION_SCHEMA.COLUMNS.DATA_TYPE``; anything unlisted → other."""
    return _FAMILY_BY_TYPE.get(data_type.lower(), TypeFamily.OTHER)


_CATALOG_HEAD = (
    "SELECT t.TABLE_SCHEMA, t.TABLE_NAME, c.COLUMN_NAME, c.DATA_TYPE "
    "FROM INFORMATION_SCHEMA.TABLES AS t "
    "LEFT JOIN INFORMATION_SCHEMA.COLUMNS AS c "
    "ON c.TABLE_CATALOG = t.TABLE_CATALOG AND c.TABLE_SCHEMA = t.TABLE_SCHEMA "
    "AND c.TABLE_NAME = t.TABLE_NAME "
    "WHERE t.TABLE_TYPE IN ('BASE TABLE', 'VIEW')"
)
_CATALOG_ORDER = "ORDER BY t.TABLE_SCHEMA, t.TABLE_NAME, c.ORDINAL_POSITION"


def catalog_sql(schemas: int) -> str:
    """The discovery query for ``schemas`` bound schema names (§11.1)."""
    if schemas < 1:
        raise ValueError("catalog_sql needs at least one schema")
    binds = ", ".join("?" for _ in range(schemas))
    return f"{_CATALOG_HEAD} AND t.TABLE_SCHEMA IN ({binds}) {_CATALOG_ORDER}"


def _select_expr(column: Column) -> str | None:
    """The outer expression a projected column needs, or ``None``."""
    name = quote_identifier(dialect_for(EngineType.SQL_SERVER), column.name)
    native = column.native_type.lower()
    if native in _TO_STRING_TYPES:
        return f"{name}.ToString() AS {name}"
    if native == "sql_variant":
        return f"CAST({name} AS NVARCHAR(4000)) AS {name}"
    return None


def select_sql(query: TableQuery) -> tuple[str, list[object]]:
    """The rendered SELECT (``[x]`` identifiers, ``?`` parameters), wrapped when a column must
    be read through its text form; the row keys stay the catalog names."""
    dialect = dialect_for(EngineType.SQL_SERVER)
    sql, params = render_select(
        dialect, query.table.schema, query.table.name, query.columns, query.filters
    )
    bound = [driver_param(value) for value in params]
    exprs = [_select_expr(column) for column in query.columns]
    if not any(exprs):
        return sql, bound
    items = ", ".join(
        expr or quote_identifier(dialect, column.name)
        for column, expr in zip(query.columns, exprs, strict=True)
    )
    return f"SELECT {items} FROM ({sql}) AS [fetcher_rows]", bound  # noqa: S608


def driver_param(value: object) -> object:
    """A filter value as bound: an aware timestamp as naive UTC (SQL Server reads a
    ``datetime2`` compared with a ``datetimeoffset`` as UTC, so the meaning is the same whatever
    the driver does with zones), a UUID as its text (converted to ``uniqueidentifier``)."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    if isinstance(value, UUID):
        return str(value)
    return value


# --------------------------------------------------------------------------------------------
# Values (§5.3)
# --------------------------------------------------------------------------------------------

ColumnConverter = Callable[[Sequence[Any]], list[object]]


def _encode_real(value: Any) -> object:
    return encode_float32(value) if isinstance(value, float) else encode_value(value)


def column_converter(column: Column) -> ColumnConverter:
    """The §5.3 converter of a projected column: ``real`` as float32, the rest generic."""
    encode = _encode_real if column.native_type.lower() == "real" else encode_value

    def convert(values: Sequence[Any]) -> list[object]:
        return [None if v is None else encode(v) for v in values]

    return convert


def batch_columns(
    rows: Sequence[Sequence[Any]], converters: Sequence[ColumnConverter]
) -> list[Sequence[object]]:
    """One fetched batch as converted columns."""
    columns = list(zip(*rows, strict=True))
    return [convert(values) for convert, values in zip(converters, columns, strict=True)]


#: What each catalog row holds (a table without columns has NULL column values).
_CATALOG_COLUMNS = (
    CatalogColumn("TABLE_SCHEMA"),
    CatalogColumn("TABLE_NAME"),
    nullable("COLUMN_NAME"),
    nullable("DATA_TYPE"),
)


def tables_from(rows: Sequence[Sequence[Any]], datasource: str) -> tuple[TableSchema, ...]:
    """Group catalog rows into ``TableSchema`` values; §11.3 system schemas are dropped; a
    row of another shape is the discovery failure naming the column."""
    grouped: dict[tuple[str, str], list[Column]] = {}
    for schema, table, column, data_type in catalog_rows(rows, _CATALOG_COLUMNS, datasource):
        if sqlserver_schema_excluded(schema):
            continue
        columns = grouped.setdefault((schema, table), [])
        if column is not None:
            columns.append(Column(column, sqlserver_family(str(data_type)), str(data_type)))
    return tuple(
        TableSchema(schema=schema, name=table, columns=tuple(columns))
        for (schema, table), columns in grouped.items()
    )


# --------------------------------------------------------------------------------------------
# The connector
# --------------------------------------------------------------------------------------------


#: The driver's login timeout: inside the §11.1 10 s, so that the driver's own reason (refused,
#: TLS, login) reaches the caller before any 10 s deadline around the connect expires.
LOGIN_TIMEOUT_SECONDS = CONNECT_TIMEOUT_SECONDS - 2


def _open(conn_str: str) -> Any:
    return mssql_python.connect(
        conn_str, autocommit=True, timeout=LOGIN_TIMEOUT_SECONDS, native_uuid=True
    )


def _fetch(
    cursor: Any, sizer: BatchSizer, converters: Sequence[ColumnConverter]
) -> list[Sequence[object]] | None:
    """One batch of ``sizer.rows`` rows (bounded by bytes, see
    :mod:`~fetcher.adapters.batch_sizing`), fetched and converted in the driver thread (the
    loop never encodes it)."""
    rows = cursor.fetchmany(sizer.rows)
    sizer.observe(rows)
    return batch_columns(rows, converters) if rows else None


def _close_quietly(resource: Any) -> None:
    with suppress(Exception):
        resource.close()


class SqlServerConnector(NetworkConnector):
    """A read-only mssql-python session on one SQL Server datasource (the ``Connector`` port)."""

    _conn: Any = None
    _inflight: asyncio.Future[Any] | None = None

    async def _call(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run one driver call in the pool. Cancelling the caller does not cancel the call
        (it cannot be interrupted); ``__aexit__`` waits for it before closing."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(_executor(), functools.partial(fn, *args))
        self._inflight = future
        return await asyncio.shield(future)

    async def __aenter__(self) -> Self:
        with map_sqlserver_errors(Phase.CONNECT, self._name):
            try:
                conn_str = connection_string(self._connection, self._pinned_address)
            except ValueError as exc:  # an ssl.mode outside §11.2 (validated before; kept safe)
                raise engine_error(Phase.CONNECT, self._name, str(exc)) from exc
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS + 2):
                    self._conn = await self._call(_open, conn_str)
            except BaseException:
                self._discard_late_connection()
                raise
        return self

    def _discard_late_connection(self) -> None:
        """A connect abandoned by a timeout or cancellation closes its connection when the
        driver call finishes."""
        inflight = self._inflight
        if inflight is None or self._conn is not None:
            return

        def close(done: asyncio.Future[Any]) -> None:
            if not done.cancelled() and done.exception() is None:
                _executor().submit(_close_quietly, done.result())

        inflight.add_done_callback(close)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        conn, self._conn = self._conn, None
        inflight, self._inflight = self._inflight, None
        if conn is None:
            return
        # The close runs as its own task: a cancellation of this one still propagates, and the
        # connection is closed anyway, once the driver call in flight has returned.
        closing = asyncio.ensure_future(_close_when_idle(inflight, conn))
        _CLOSING.add(closing)
        closing.add_done_callback(_CLOSING.discard)
        await asyncio.shield(closing)

    def _require(self, phase: Phase) -> Any:
        if self._conn is None:
            raise engine_error(phase, self._name, "connection is not open")
        return self._conn

    async def probe(self) -> None:
        """§2.6.7: ``SELECT 1``; a failure is a connect failure."""
        conn = self._require(Phase.CONNECT)
        with map_sqlserver_errors(Phase.CONNECT, self._name):
            async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                await self._call(_run_probe, conn)

    async def discover(self, schemas: Sequence[str]) -> DiscoveredSchema:
        """§11.1/§11.3: tables and views of ``schemas``, system schemas excluded, in 30 s."""
        conn = self._require(Phase.DISCOVER)
        scope = sorted({s for s in schemas if s and not sqlserver_schema_excluded(s)})
        if not scope:
            return DiscoveredSchema(default_schema=DEFAULT_SCHEMA)
        with map_sqlserver_errors(Phase.DISCOVER, self._name):
            async with asyncio.timeout(DISCOVERY_TIMEOUT_SECONDS):
                rows = await self._call(_run_catalog, conn, scope)
        tables = tables_from(rows, self._name)
        return DiscoveredSchema(default_schema=DEFAULT_SCHEMA, tables=tables)

    async def stream(self, query: TableQuery) -> AsyncIterator[Sequence[Row]]:
        """Rows at most ``batch_size`` (and about ``BATCH_TARGET_BYTES``) at a time through a
        forward-only cursor, encoded per §5.3."""
        conn = self._require(Phase.QUERY)
        sql, params = select_sql(query)
        converters = [column_converter(column) for column in query.columns]
        names = tuple(column.name for column in query.columns)
        with map_sqlserver_errors(Phase.QUERY, self._name):
            cursor = await self._call(conn.cursor)
            try:
                await self._call(cursor.execute, sql, *params)
                result_columns(cursor.description, names, self._name, query.table.label)
                sizer = BatchSizer(self._batch_size)
                while columns := await self._call(_fetch, cursor, sizer, converters):
                    yield RowBatch(names, columns)
            finally:
                await self._close_cursor(cursor)

    async def _close_cursor(self, cursor: Any) -> None:
        """Close the cursor once no call is running on it; a cancellation here propagates (the
        connection close in ``__aexit__`` still releases the statement)."""
        inflight = self._inflight
        if inflight is not None and not inflight.done():
            await asyncio.wait([inflight])
        await self._call(_close_quietly, cursor)


#: Close tasks in progress (held so that they are not garbage-collected mid-way).
_CLOSING: set[asyncio.Future[None]] = set()


async def _close_when_idle(inflight: asyncio.Future[Any] | None, conn: Any) -> None:
    """Wait for the driver call in flight (whatever its outcome), then close ``conn``."""
    if inflight is not None and not inflight.done():
        await asyncio.wait([inflight])
    await asyncio.get_running_loop().run_in_executor(_executor(), _close_quietly, conn)


def _run_probe(conn: Any) -> None:
    cursor = conn.cursor()
    try:
        cursor.execute(PROBE_SQL)
        cursor.fetchall()
    finally:
        cursor.close()


def _run_catalog(conn: Any, scope: Sequence[str]) -> list[tuple[Any, ...]]:
    cursor = conn.cursor()
    try:
        cursor.execute(catalog_sql(len(scope)), *scope)
        return [tuple(row) for row in cursor.fetchall()]
    finally:
        cursor.close()
