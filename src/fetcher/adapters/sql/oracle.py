"""The Oracle connector: python-oracledb in thin mode, native asyncio (contract §11, §5.3).

* Connect (§2.9.1, §11.1): ``oracledb.connect_async`` with keyword arguments only (``host``,
  ``port``, ``service_name`` from ``metadata.serviceName``, ``user``, ``password``), never a DSN
  or Easy Connect string; the SSRF-pinned IP is the ``host`` when there is one. Then
  ``ALTER SESSION SET TIME_ZONE='UTC'``, and ``SET TRANSACTION READ ONLY`` at the start of every
  transaction (each discovery and each table read begins one).
* TLS (§11.2): ``disable``/``false`` → TCP; ``true``/``enable`` → TCPS with the chain verified
  (``ssl.ca``, else the system store) and no name match; ``verify`` → also the host name;
  ``skip-verify`` → TCPS with ``CERT_NONE``. Always an ``ssl.SSLContext`` passed as
  ``ssl_context``, with the driver's own DN check off: the driver would match the dialed address,
  which is the pinned IP, so the name check is the context's (see :class:`_NamedHostContext`).
* Names (§3.3): the default owner is the connected ``USER``; owners and names are the catalog's
  upper-case canonical spelling; a discovery scope entry ``""`` stands for ``USER``.
* Values (§5.3): numbers are fetched as ``Decimal`` (``fetch_decimals``), so ``NUMBER`` with
  scale 0 → integer and every other ``NUMBER``/``FLOAT`` → exact text with the column scale
  kept; LOBs are fetched inline (``fetch_lobs=False``); ``TIMESTAMP WITH TIME ZONE`` is selected
  through ``SYS_EXTRACT_UTC`` (thin mode drops the zone and refuses region names). A native
  ``JSON`` value nested deeper than ``MAX_JSON_DEPTH`` (250; Oracle allows 1,000) fails the query
  with ``failed to query datasource '<ds>': column '<c>' of table '<OWNER.TABLE>' holds a JSON
  value nested deeper than 250 levels``.
"""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from decimal import Context, Decimal
from types import TracebackType
from typing import Any, Self

import oracledb

from fetcher.adapters.batch_sizing import BatchSizer
from fetcher.adapters.secret_files import pem_files
from fetcher.adapters.sql._common import (
    CONNECT_TIMEOUT_SECONDS,
    DISCOVERY_TIMEOUT_SECONDS,
    CatalogColumn,
    NetworkConnector,
    Phase,
    ServerNameContext,
    catalog_rows,
    engine_error,
    nullable,
    oracle_owner_excluded,
    oracle_table_excluded,
    result_columns,
    translate_errors,
)
from fetcher.engine import ConnectionDescriptor
from fetcher.engine.kit import (
    MAX_JSON_DEPTH,
    Column,
    DiscoveredSchema,
    EngineType,
    ExactNumber,
    JsonDepthError,
    Row,
    RowBatch,
    TableQuery,
    TableSchema,
    TlsSettings,
    TypeFamily,
    dialect_for,
    encode_bytes,
    encode_datetime,
    encode_decimal,
    encode_float,
    encode_float32,
    encode_interval,
    encode_text,
    encode_timedelta,
    encode_value,
    naming_column,
    quote_identifier,
    render_select,
    with_stack_retry,
)

__all__ = [
    "OracleConnector",
    "catalog_sql",
    "connect_kwargs",
    "map_oracle_errors",
    "oracle_detail",
    "oracle_family",
    "select_sql",
    "tls_context",
]

DEFAULT_PORT = 1521
#: §3.3: a discovery scope entry that stands for the connected user (``names.py`` marker).
_DEFAULT_OWNER_MARKER = ""
#: §2.5/§2.9.1: the ``metadata.serviceName`` pattern, checked again before dialing.
_SERVICE_NAME = re.compile(r"[A-Za-z0-9_.$-]{1,128}")
_TCPS_MODES = frozenset({"true", "enable", "verify", "skip-verify"})
_TCP_MODES = frozenset({"", "disable", "false"})

PROBE_SQL = "SELECT 1 FROM DUAL"
USER_SQL = "SELECT USER FROM DUAL"
SESSION_SQL = "ALTER SESSION SET TIME_ZONE = 'UTC'"
READ_ONLY_SQL = "SET TRANSACTION READ ONLY"
#: Every statement the connector sends besides the catalog query and the table SELECTs.
FIXED_STATEMENTS = (PROBE_SQL, USER_SQL, SESSION_SQL, READ_ONLY_SQL)

_CONNECTION_ID = re.compile(r"\s*\(CONNECTION_ID=[^)]*\)")


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


def oracle_detail(exc: BaseException) -> str:
    """The driver text of an oracledb error for ``detail``: its ``DPY-``/``ORA-`` message on one
    line, without the per-connection ``CONNECTION_ID`` and the ``Help:`` link lines. Hosts redact
    addresses from it (§8.7); the driver never echoes the password."""
    error = exc.args[0] if exc.args else None
    message = getattr(error, "message", None)
    text = message if isinstance(message, str) and message else str(exc)
    lines = (line.strip() for line in text.splitlines())
    kept = " ".join(line for line in lines if line and not line.startswith("Help:"))
    return _CONNECTION_ID.sub("", kept) or type(exc).__name__


@contextmanager
def map_oracle_errors(
    phase: Phase, datasource: str, table: TableSchema | None = None
) -> Iterator[None]:
    """Translate oracledb (``DPY-``/``ORA-``), socket, TLS and timeout failures, and a JSON
    value nested too deep in ``table``, into the §4.5 ``EngineError`` of ``phase``; an
    ``EngineError`` raised inside passes unchanged."""
    with translate_errors(phase, datasource, (), table=table):
        try:
            yield
        except oracledb.Error as exc:
            raise engine_error(phase, datasource, oracle_detail(exc)) from exc


# --------------------------------------------------------------------------------------------
# Type families (§11.4)
# --------------------------------------------------------------------------------------------

_PRECISION = re.compile(r"\(\d+\)")
_FAMILY_BY_TYPE: dict[str, TypeFamily] = {
    "FLOAT": TypeFamily.DECIMAL,
    **dict.fromkeys(("BINARY_FLOAT", "BINARY_DOUBLE"), TypeFamily.FLOAT),
    "BOOLEAN": TypeFamily.BOOLEAN,
    **dict.fromkeys(
        ("CHAR", "VARCHAR2", "NCHAR", "NVARCHAR2", "CLOB", "NCLOB", "VARCHAR"), TypeFamily.TEXT
    ),
    **dict.fromkeys(("DATE", "TIMESTAMP"), TypeFamily.TIMESTAMP),
    **dict.fromkeys(
        ("TIMESTAMP WITH TIME ZONE", "TIMESTAMP WITH LOCAL TIME ZONE"), TypeFamily.TIMESTAMPTZ
    ),
    "JSON": TypeFamily.JSON,
    **dict.fromkeys(("BLOB", "RAW", "LONG RAW"), TypeFamily.BYTES),
}


def oracle_family(data_type: str, scale: int | None) -> TypeFamily:
    """§11.4 from ``ALL_TAB_COLUMNS``: ``NUMBER`` with ``DATA_SCALE`` 0 → integer (whatever the
    precision, ``INTEGER`` included), other ``NUMBER`` and ``FLOAT(b)`` → decimal; precisions in
    the type name (``TIMESTAMP(6) WITH TIME ZONE``) are ignored; INTERVAL and the rest → other."""
    base = _PRECISION.sub("", data_type).strip().upper()
    if base == "NUMBER":
        return TypeFamily.INTEGER if scale == 0 else TypeFamily.DECIMAL
    return _FAMILY_BY_TYPE.get(base, TypeFamily.OTHER)


def _zoned(column: Column) -> bool:
    """``TIMESTAMP WITH TIME ZONE`` (not ``LOCAL``, which arrives in the UTC session zone)."""
    native = column.native_type.upper()
    return "WITH TIME ZONE" in native and "LOCAL" not in native


# --------------------------------------------------------------------------------------------
# SQL
# --------------------------------------------------------------------------------------------


_CATALOG_HEAD = (
    "SELECT c.OWNER, c.TABLE_NAME, c.COLUMN_NAME, c.DATA_TYPE, c.DATA_SCALE "
    "FROM ALL_TAB_COLUMNS c "
    "JOIN (SELECT t.OWNER, t.TABLE_NAME FROM ALL_TABLES t "
    "UNION ALL SELECT v.OWNER, v.VIEW_NAME FROM ALL_VIEWS v) o "
    "ON o.OWNER = c.OWNER AND o.TABLE_NAME = c.TABLE_NAME"
)
_CATALOG_ORDER = "ORDER BY c.OWNER, c.TABLE_NAME, c.COLUMN_ID"


def catalog_sql(owners: int) -> str:
    """The discovery query for ``owners`` bound owners (``:1`` … ``:n``): the columns of the
    tables and views of ``ALL_TABLES``/``ALL_VIEWS`` (§11.1), in column order."""
    if owners < 1:
        raise ValueError("catalog_sql needs at least one owner")
    binds = ", ".join(f":{i}" for i in range(1, owners + 1))
    return f"{_CATALOG_HEAD} WHERE c.OWNER IN ({binds}) {_CATALOG_ORDER}"


def select_sql(query: TableQuery) -> tuple[str, list[object]]:
    """The rendered SELECT (``"X"`` identifiers, ``:n`` binds); when a column is ``TIMESTAMP
    WITH TIME ZONE`` it is wrapped so that column is read as ``SYS_EXTRACT_UTC`` (a UTC
    ``TIMESTAMP``), under its catalog name."""
    dialect = dialect_for(EngineType.ORACLE)
    sql, params = render_select(
        dialect, query.table.schema, query.table.name, query.columns, query.filters
    )
    bound = [driver_param(value) for value in params]
    if not any(_zoned(column) for column in query.columns):
        return sql, bound
    exprs = ", ".join(
        f"SYS_EXTRACT_UTC({name}) AS {name}" if _zoned(column) else name
        for column in query.columns
        for name in (quote_identifier(dialect, column.name),)
    )
    return f'SELECT {exprs} FROM ({sql}) "FETCHER_ROWS"', bound  # noqa: S608


def driver_param(value: object) -> object:
    """A filter value as bound: an aware timestamp as naive UTC, a ``TIMESTAMP`` that Oracle
    compares with ``TIMESTAMP WITH TIME ZONE`` in the session zone, which is UTC (§11.1)."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


# --------------------------------------------------------------------------------------------
# TLS (§11.2)
# --------------------------------------------------------------------------------------------


class _NamedHostContext(ServerNameContext):
    """An SSLContext that checks the certificate against ``verify_name`` whatever address was
    dialed (§2.9.1 rule 3: the vetted IP is dialed, the name is kept for SNI and verification).

    python-oracledb turns ``check_hostname`` off and wraps without a server name (it runs its own
    DN match against the dialed address); this context turns the check back on at wrap time and
    supplies the name, so the handshake itself fails on a name mismatch.
    """

    verify_name: str = ""

    def server_name(self, requested: str | bytes | None) -> str:
        self.check_hostname = True
        return self.verify_name


def _load_client_cert(context: ssl.SSLContext, cert: str, key: str) -> None:
    """``ssl.cert``/``ssl.key`` into the context through 0600 temporary files (§11.2), unlinked
    as soon as OpenSSL has read them."""
    with pem_files(cert, key) as (cert_path, key_path):
        context.load_cert_chain(cert_path, key_path)


def tls_context(tls: TlsSettings | None, host: str) -> ssl.SSLContext | None:
    """The ``ssl_context`` of a §11.2 Oracle mode, or ``None`` for plain TCP. ``host`` is the
    connection's host name, matched in ``verify`` mode even when an IP is dialed."""
    mode = (tls.mode if tls is not None else "") or ""
    if tls is None or mode in _TCP_MODES:
        return None
    if mode not in _TCPS_MODES:
        raise ValueError(f"unsupported ssl.mode for ORACLE: {mode}")
    context: ssl.SSLContext
    if mode == "skip-verify":
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        if mode == "verify":
            named = _NamedHostContext(ssl.PROTOCOL_TLS_CLIENT)
            named.verify_name = host
            context = named
        else:  # true/enable: the chain only, no DN or name match
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
        context.verify_mode = ssl.CERT_REQUIRED
        if tls.ca:
            context.load_verify_locations(cadata=tls.ca)
        else:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if tls.cert and tls.key:
        _load_client_cert(context, tls.cert, tls.key)
    return context


def connect_kwargs(
    connection: ConnectionDescriptor, pinned_address: str | None = None
) -> dict[str, Any]:
    """The ``oracledb.connect_async`` keyword arguments (§2.9.1): never a DSN. ``ValueError``
    when ``metadata.serviceName`` is missing or invalid (§2.5)."""
    service = connection.metadata.get("serviceName")
    if not isinstance(service, str) or not service.strip():
        raise ValueError("metadata.serviceName is required")
    if _SERVICE_NAME.fullmatch(service) is None:
        raise ValueError("metadata.serviceName contains invalid characters")
    host = connection.host or ""
    context = tls_context(connection.ssl, host)
    return {
        "host": pinned_address or host,
        "port": connection.port if connection.port is not None else DEFAULT_PORT,
        "service_name": service,
        "user": connection.username,
        "password": connection.password,
        "protocol": "tcp" if context is None else "tcps",
        "ssl_context": context,
        # The name check is the context's: the driver's own would match the dialed IP.
        "ssl_server_dn_match": False,
        "tcp_connect_timeout": float(CONNECT_TIMEOUT_SECONDS),
        "retry_count": 0,
    }


# --------------------------------------------------------------------------------------------
# Values (§5.3)
# --------------------------------------------------------------------------------------------

_WIDE = Context(prec=200)
ColumnConverter = Callable[[Sequence[Any]], Sequence[object]]


def encode_number(value: object, scale: int | None) -> object:
    """A non-integer ``NUMBER``/``FLOAT`` value: exact text, the column scale kept
    (``NUMBER(10,2)`` 1500 → ``"1500.00"``)."""
    if value is None:
        return None
    number = value if isinstance(value, Decimal) else Decimal(str(value))
    if scale is not None and 0 < scale <= 127 and number.is_finite():
        number = number.quantize(Decimal(1).scaleb(-scale), context=_WIDE)
    return encode_decimal(number)


def encode_integer(value: object) -> object:
    """``NUMBER`` with scale 0: a JSON integer (``fetch_decimals`` delivers ``Decimal``)."""
    if value is None or type(value) is int:
        return value
    return int(value) if isinstance(value, Decimal | float) else value


def encode_json(value: object, depth: int = 0) -> object:
    """A native ``JSON`` (OSON) value: nested objects and arrays, numbers keeping their exact
    decimal text (§5.3 JSON row); scalars of other types by the generic encoder. ``depth``: the
    levels ``value`` sits below the column; Oracle nests JSON up to 1,000 levels, and a value
    nested deeper than ``MAX_JSON_DEPTH`` raises ``JsonDepthError``."""
    if isinstance(value, dict | list | tuple) and depth >= MAX_JSON_DEPTH:
        raise JsonDepthError
    if isinstance(value, dict):
        return {encode_text(str(k)): encode_json(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode_json(v, depth + 1) for v in value]
    if isinstance(value, Decimal):
        return ExactNumber(encode_decimal(value)) if value.is_finite() else encode_decimal(value)
    if isinstance(value, bool | int) or value is None:
        return value
    return encode_value(value)


def encode_interval_ym(value: object) -> object:
    """``INTERVAL YEAR TO MONTH`` (``oracledb.IntervalYM``) as an ISO 8601 duration."""
    if value is None:
        return None
    years, months = getattr(value, "years", 0), getattr(value, "months", 0)
    return encode_interval(int(years) * 12 + int(months), 0, 0)


def _mapped(encode: Callable[[Any], object]) -> ColumnConverter:
    def convert(values: Sequence[Any]) -> list[object]:
        return [None if v is None else encode(v) for v in values]

    return convert


_BY_TYPE: dict[object, Callable[[Any], object]] = {
    oracledb.DB_TYPE_BINARY_FLOAT: encode_float32,
    oracledb.DB_TYPE_BINARY_DOUBLE: encode_float,
    **dict.fromkeys(
        (
            oracledb.DB_TYPE_DATE,
            oracledb.DB_TYPE_TIMESTAMP,
            oracledb.DB_TYPE_TIMESTAMP_LTZ,
            oracledb.DB_TYPE_TIMESTAMP_TZ,
        ),
        encode_datetime,
    ),
    oracledb.DB_TYPE_INTERVAL_DS: encode_timedelta,
    oracledb.DB_TYPE_INTERVAL_YM: encode_interval_ym,
    **dict.fromkeys(
        (oracledb.DB_TYPE_RAW, oracledb.DB_TYPE_LONG_RAW, oracledb.DB_TYPE_BLOB), encode_bytes
    ),
    oracledb.DB_TYPE_JSON: encode_json,
    **dict.fromkeys(
        (
            oracledb.DB_TYPE_VARCHAR,
            oracledb.DB_TYPE_CHAR,
            oracledb.DB_TYPE_NCHAR,
            oracledb.DB_TYPE_NVARCHAR,
            oracledb.DB_TYPE_LONG,
            oracledb.DB_TYPE_LONG_NVARCHAR,
            oracledb.DB_TYPE_CLOB,
            oracledb.DB_TYPE_NCLOB,
        ),
        encode_text,
    ),
}


def column_converter(
    type_code: object, precision: int | None, scale: int | None, family: TypeFamily | None = None
) -> ColumnConverter:
    """The §5.3 converter of one result column, by its fetched type (``cursor.description``).

    A ``NUMBER`` is an integer when the discovered column is (``DATA_SCALE`` 0, §11.4), or,
    without one, when the fetched scale is 0 with a precision; otherwise exact decimal text."""
    if type_code is oracledb.DB_TYPE_NUMBER:
        integral = scale == 0 and (precision or 0) > 0
        if family is TypeFamily.INTEGER or (family is None and integral):
            return _mapped(encode_integer)
        return _mapped(lambda v: encode_number(v, scale))
    if type_code is oracledb.DB_TYPE_BOOLEAN:
        return _mapped(bool)
    return _mapped(_BY_TYPE.get(type_code, encode_value))


def _converters(description: Sequence[Any], columns: Sequence[Column]) -> list[ColumnConverter]:
    """The converters of a result whose ``description`` has one column per selected one
    (checked by ``result_columns``)."""
    return [
        column_converter(
            d.type_code, getattr(d, "precision", None), getattr(d, "scale", None), column.family
        )
        for d, column in zip(description, columns, strict=True)
    ]


def batch_columns(
    rows: Sequence[Sequence[Any]],
    converters: Sequence[ColumnConverter],
    names: Sequence[str] = (),
) -> list[Sequence[object]]:
    """One fetched batch as converted columns; a JSON value nested too deep raises
    ``JsonDepthError`` naming its column (of ``names``, when given)."""
    columns = list(zip(*rows, strict=True))
    converted: list[Sequence[object]] = []
    for index, (convert, values) in enumerate(zip(converters, columns, strict=True)):
        with naming_column(names[index] if names else None):
            converted.append(convert(values))
    return converted


# --------------------------------------------------------------------------------------------
# The connector
# --------------------------------------------------------------------------------------------


class OracleConnector(NetworkConnector):
    """A read-only python-oracledb (thin, asyncio) session on one Oracle datasource."""

    _conn: oracledb.AsyncConnection | None = None
    _user = ""

    async def __aenter__(self) -> Self:
        with map_oracle_errors(Phase.CONNECT, self._name):
            try:
                kwargs = connect_kwargs(self._connection, self._pinned_address)
            except (ValueError, ssl.SSLError) as exc:
                raise engine_error(Phase.CONNECT, self._name, str(exc)) from exc
            async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                conn = await oracledb.connect_async(**kwargs)
                try:
                    self._user = await self._start_session(conn)
                except BaseException:
                    with suppress(Exception):
                        await conn.close()
                    raise
            self._conn = conn
        return self

    async def _start_session(self, conn: oracledb.AsyncConnection) -> str:
        """§11.1: the UTC session zone; returns the connected ``USER`` (§3.3 default owner)."""
        cursor = conn.cursor()
        try:
            await cursor.execute(SESSION_SQL)
            await cursor.execute(USER_SQL)
            row = await cursor.fetchone()
        finally:
            cursor.close()
        if not row or not isinstance(row[0], str):
            raise engine_error(Phase.CONNECT, self._name, "the connected USER is unknown")
        return row[0]

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            # Bounded: after a stream cancelled mid-fetch the logoff may find the session busy.
            with suppress(oracledb.Error, OSError, TimeoutError):
                async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                    await conn.close()

    def _require(self, phase: Phase) -> oracledb.AsyncConnection:
        if self._conn is None:
            raise engine_error(phase, self._name, "connection is not open")
        return self._conn

    @staticmethod
    async def _begin_read_only(conn: oracledb.AsyncConnection, cursor: Any) -> None:
        """§11.1: end any open transaction, then start a read-only one."""
        await conn.rollback()
        await cursor.execute(READ_ONLY_SQL)

    async def probe(self) -> None:
        """§2.6.7: ``SELECT 1 FROM DUAL``; a failure is a connect failure."""
        conn = self._require(Phase.CONNECT)
        with map_oracle_errors(Phase.CONNECT, self._name):
            async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                cursor = conn.cursor()
                try:
                    await cursor.execute(PROBE_SQL)
                    await cursor.fetchone()
                finally:
                    cursor.close()

    def resolve_scope(self, schemas: Sequence[str]) -> list[str]:
        """The owners to discover: ``""`` → the connected ``USER``; system owners dropped."""
        owners = {self._user if s == _DEFAULT_OWNER_MARKER else s for s in schemas}
        return sorted(o for o in owners if o and not oracle_owner_excluded(o))

    async def discover(self, schemas: Sequence[str]) -> DiscoveredSchema:
        """§11.1/§11.3: tables and views of the scope's owners, system objects excluded."""
        conn = self._require(Phase.DISCOVER)
        scope = self.resolve_scope(schemas)
        if not scope:
            return DiscoveredSchema(default_schema=self._user)
        with map_oracle_errors(Phase.DISCOVER, self._name):
            async with asyncio.timeout(DISCOVERY_TIMEOUT_SECONDS):
                cursor = conn.cursor()
                try:
                    await self._begin_read_only(conn, cursor)
                    cursor.arraysize = 1_000
                    await cursor.execute(catalog_sql(len(scope)), scope)
                    rows = await cursor.fetchall()
                finally:
                    cursor.close()
        return DiscoveredSchema(default_schema=self._user, tables=tables_from(rows, self._name))

    async def stream(self, query: TableQuery) -> AsyncIterator[Sequence[Row]]:
        """Rows at most ``batch_size`` (and about ``BATCH_TARGET_BYTES``) at a time
        (``arraysize``/``fetchmany``), encoded per §5.3."""
        conn = self._require(Phase.QUERY)
        sql, params = select_sql(query)
        names = tuple(column.name for column in query.columns)
        with map_oracle_errors(Phase.QUERY, self._name, query.table):
            cursor = conn.cursor()
            try:
                await self._begin_read_only(conn, cursor)
                sizer = BatchSizer(self._batch_size)
                cursor.arraysize = cursor.prefetchrows = sizer.rows
                await cursor.execute(sql, params, fetch_lobs=False, fetch_decimals=True)
                description = result_columns(
                    cursor.description, names, self._name, query.table.label
                )
                converters = _converters(description, query.columns)
                while rows := await cursor.fetchmany(sizer.rows):
                    sizer.observe(rows)
                    cursor.arraysize = sizer.rows  # the driver's next round trip
                    columns = with_stack_retry(batch_columns, rows, converters, names)
                    yield RowBatch(names, columns)
            finally:
                _close_cursor(cursor)


def _close_cursor(cursor: Any) -> None:
    """Close a cursor without masking the failure or cancellation that ended its use."""
    with suppress(oracledb.Error):
        cursor.close()


#: What each catalog row holds (``DATA_SCALE`` is NULL for most types).
_CATALOG_COLUMNS = (
    CatalogColumn("OWNER"),
    CatalogColumn("TABLE_NAME"),
    CatalogColumn("COLUMN_NAME"),
    CatalogColumn("DATA_TYPE"),
    nullable("DATA_SCALE", int, float, Decimal),
)


def tables_from(rows: Sequence[Sequence[Any]], datasource: str) -> tuple[TableSchema, ...]:
    """Group catalog rows into ``TableSchema`` values, dropping §11.3 system owners and names;
    a row of another shape is the discovery failure naming the column."""
    grouped: dict[tuple[str, str], list[Column]] = {}
    for owner, table, column, data_type, scale in catalog_rows(rows, _CATALOG_COLUMNS, datasource):
        if oracle_owner_excluded(owner) or oracle_table_excluded(table):
            continue
        family = oracle_family(str(data_type), None if scale is None else int(scale))
        columns = grouped.setdefault((owner, table), [])
        columns.append(Column(column, family, str(data_type)))
    return tuple(
        TableSchema(schema=owner, name=table, columns=tuple(columns))
        for (owner, table), columns in grouped.items()
    )
