"""The MySQL/MariaDB connector: asyncmy, async (contract §2.9.1, §3.3, §3.4, §5.3, §11).

* Driver: asyncmy, the faster of asyncmy and aiomysql on the same extraction
  (``bench/mysql_drivers.py``: about 7× the rows per second through an unbuffered cursor).
* Connect (§2.9.1, §11.1): keyword arguments only; the SSRF guard's pinned address is dialled as
  the host, and the original name is kept for TLS SNI and hostname checks (``_PinnedNameContext``);
  ``local_infile=False``; 10 s timeout. The session then runs ``SET SESSION TRANSACTION READ
  ONLY`` and sets ``time_zone='+00:00'`` and ``sql_mode`` without ``NO_BACKSLASH_ESCAPES`` (so
  ``ESCAPE '\\\\'`` and the driver's backslash escaping keep their meaning, §3.4).
* TLS (§11.2): ``false``/empty → none; ``true`` → verified (``ssl.ca`` or the system store) with
  the hostname checked; ``skip-verify`` → unverified; both then require TLS to be active on the
  session (the server advertised ``CLIENT.SSL`` and the transport is an SSL transport), else
  the connect fails. ``preferred`` → unverified TLS when the server offers it, else plaintext.
  ``ssl.cert``/``ssl.key`` → the client certificate of the SSLContext, loaded from 0600
  ``O_EXCL`` files in ``/dev/shm`` that are unlinked right after loading.
* Discovery (§3.3, §11.3): ``information_schema.TABLES``/``COLUMNS`` of ``DATABASE()`` (base
  tables, views, system-versioned tables); the system schemas are never discovered. MariaDB's
  ``json`` is ``LONGTEXT`` with a ``json_valid(`c`)`` check constraint: such columns are found
  through ``information_schema.CHECK_CONSTRAINTS`` and get the json family (§5.3).
* Streaming: an unbuffered ``SSCursor`` and ``fetchmany(batch_size)``; never a full fetch. A
  stream that stops early (cancelled, closed, failed) closes the socket instead of draining the
  rest of the result, which is what an unbuffered cursor's ``close`` would do.
* Values (§5.3): DECIMAL, DATE, DATETIME, TIMESTAMP and TIME arrive as the server's text (the
  driver's decoders for them are removed), so decimals keep their exact digits and scale, zero
  dates stay ``0000-00-00``/``0000-00-00 00:00:00``, and timestamps are rewritten to RFC 3339
  by slicing; JSON is parsed with exact numbers, a whole column per batch; binary strings,
  BLOBs and BIT are base64; YEAR is an integer; ENUM and SET are strings.
* Batches are :class:`~fetcher.adapters.jsonlayout.fastjson.FastRowBatch` columns, which write
their own
  §5.4 bytes through orjson (speed, issue 12); JSON columns are marked (``json_columns``) and
  hold no ``float`` (fractions are orjson fragments or ``ExactNumber``), so their nested values
  take that path too.
* Depth: MySQL's JSON nests at most 100 levels and MariaDB's ``json_valid`` 31, but a MariaDB
  ``longtext`` checked by ``json_valid`` may hold deeper text written while checks were off
  (``check_constraint_checks=0``); a value nested deeper than ``MAX_JSON_DEPTH`` (250) fails
  the query with ``failed to query datasource '<ds>': column '<c>' of table '<db.table>' holds
  a JSON value nested deeper than 250 levels`` (never kept as text: it is not "text that is
  not JSON").
"""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from functools import partial
from types import TracebackType
from typing import Any, ClassVar, Final, Self
from uuid import UUID

import asyncmy
from asyncmy import errors as mysql_errors
from asyncmy.constants import CLIENT, FIELD_TYPE
from asyncmy.converters import conversions as _stock_conversions
from asyncmy.cursors import SSCursor

from fetcher.adapters.batch_sizing import BatchSizer
from fetcher.adapters.jsonlayout import (
    ColumnKind,
    ColumnPlan,
    FastRowBatch,
    LaidOutBatch,
    column_plan,
    layout_columns,
    parse_json_column,
)
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
    mysql_schema_excluded,
    nullable,
    translate_errors,
    transposed,
)
from fetcher.engine.kit import (
    Column,
    DiscoveredSchema,
    EngineType,
    Row,
    TableQuery,
    TableSchema,
    TlsSettings,
    TypeFamily,
    dialect_for,
    encode_bytes,
    encode_value,
    naming_column,
    parse_json_exact_fractions,
    render_select,
)

__all__ = [
    "MysqlConnector",
    "build_tls_context",
    "datetime_column",
    "datetime_text",
    "json_checked_column",
    "map_mysql_errors",
    "mysql_family",
    "mysql_param",
    "layout_plan",
    "select_sql",
    "time_text",
    "tls_active",
]

DEFAULT_PORT = 3306

#: ``asyncmy.Connection`` (untyped): built directly so that a failed connect still tells which
#: capabilities the server's greeting offered (mode ``preferred``, §11.2).
_new_connection: Callable[..., Any] = asyncmy.Connection

_DRIVER_ERRORS: tuple[type[Exception], ...] = (mysql_errors.MySQLError, UnicodeError)


@contextmanager
def map_mysql_errors(
    phase: Phase, datasource: str, table: TableSchema | None = None
) -> Iterator[None]:
    """Translate asyncmy, socket, decoding and timeout failures, and a JSON value nested too
    deep in ``table``, into the §4.5 ``EngineError``."""
    with translate_errors(phase, datasource, _DRIVER_ERRORS, table=table):
        yield


# --------------------------------------------------------------------------------------------
# Type families (§11.4)
# --------------------------------------------------------------------------------------------

_FAMILY_BY_TYPE: dict[str, TypeFamily] = {
    **dict.fromkeys(
        ("tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"),
        TypeFamily.INTEGER,
    ),
    **dict.fromkeys(("decimal", "numeric"), TypeFamily.DECIMAL),
    **dict.fromkeys(("float", "double", "real", "double precision"), TypeFamily.FLOAT),
    **dict.fromkeys(
        ("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"),
        TypeFamily.TEXT,
    ),
    "date": TypeFamily.DATE,
    "datetime": TypeFamily.TIMESTAMP,
    "timestamp": TypeFamily.TIMESTAMPTZ,
    "time": TypeFamily.TIME,
    "json": TypeFamily.JSON,
    **dict.fromkeys(
        ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "bit"),
        TypeFamily.BYTES,
    ),
}


def mysql_family(data_type: str, *, json_checked: bool = False) -> TypeFamily:
    """§11.4: the family of ``information_schema.COLUMNS.DATA_TYPE``; ``tinyint(1)`` stays an
    integer; a MariaDB ``longtext`` with a ``json_valid`` check is json (§5.3)."""
    if json_checked:
        return TypeFamily.JSON
    return _FAMILY_BY_TYPE.get(data_type.lower(), TypeFamily.OTHER)


# --------------------------------------------------------------------------------------------
# Values (§5.3)
# --------------------------------------------------------------------------------------------

#: The driver's conversions (its encoders, keyed by Python type, and decoders, keyed by field
#: type) without the decoders for DECIMAL, dates, times and JSON: those values arrive as the
#: server's text, which ``_converter`` finishes (exact decimals, zero dates kept).
_TEXT_FIELDS = frozenset(
    {
        FIELD_TYPE.DECIMAL,
        FIELD_TYPE.NEWDECIMAL,
        FIELD_TYPE.DATE,
        FIELD_TYPE.DATETIME,
        FIELD_TYPE.TIMESTAMP,
        FIELD_TYPE.TIME,
        FIELD_TYPE.JSON,
    }
)
_CONVERSIONS: dict[Any, Any] = {
    key: fn
    for key, fn in _stock_conversions.items()
    if not (isinstance(key, int) and key in _TEXT_FIELDS)
}


def datetime_text(value: str) -> str:
    """A DATETIME/TIMESTAMP text in the UTC session → RFC 3339 UTC with ``Z`` and the fraction's
    trailing zeros removed (§5.3). Zero dates and dates with a zero month or day (allowed by
    lax ``sql_mode``) are outside years 1..9999 and keep the engine's text, with the fraction
    trimmed the same way (§5.3: the zero datetime is ``0000-00-00 00:00:00``)."""
    fraction = value[20:].rstrip("0")
    seconds = value[11:19] + ("." + fraction if fraction else "")
    if value[:4] == "0000" or value[5:7] == "00" or value[8:10] == "00":
        return value[:10] + " " + seconds  # "0000-00-00 00:00:00", whatever the precision
    return value[:10] + "T" + seconds + "Z"


#: Text that only a zero date or a zero month or day puts in a DATETIME column (the server
#: prints digits, ``-``, one space, ``:`` and at most one ``.`` per value).
_ZERO_DATE_MARKS: Final = ("0000-", "-00-", "-00 ")
#: ``YYYY-MM-DD`` and ``YYYY-MM-DD HH:MM:SS``: where the space is, and where a fraction starts.
_DATE_WIDTH: Final = 10
_SECONDS_WIDTH: Final = 19


def datetime_column(values: Sequence[Any]) -> Sequence[object]:
    """:func:`datetime_text` of one batch's column (``None`` stays ``None``) in a few C string
    passes over the joined texts instead of a Python call per value (speed, issue 12); the
    value-by-value path whenever the column is not the server's uniform text (see
    :func:`_datetime_texts`)."""
    texts = values if None not in values else [value for value in values if value is not None]
    finished = _datetime_texts(texts)
    if finished is None:
        return _convert_column(values, datetime_text)
    if texts is values:
        return finished
    done = iter(finished)
    return [None if value is None else next(done) for value in values]


def _datetime_texts(texts: Sequence[Any]) -> list[str] | None:
    """Each text as :func:`datetime_text` writes it, or ``None`` unless every value has the
    server's shape for one column: the same width (one precision), one space, and either no
    fraction or one ``.`` after the seconds; and no zero date (those keep the engine's
    text, which the value-by-value path writes). Trailing zeros of the fractions are removed a
    digit at a time over the whole batch; all-zero fractions first, in one pass."""
    if not texts:
        return []
    try:
        text = "\n".join(texts) + "\n"
    except TypeError:  # not all text
        return None
    count, width = len(texts), len(texts[0])
    if len(text) != count * (width + 1) or text[_DATE_WIDTH :: width + 1] != " " * count:
        return None
    if text.count(" ") != count or any(mark in text for mark in _ZERO_DATE_MARKS):
        return None
    dots = text.count(".")
    if dots == count and text[_SECONDS_WIDTH :: width + 1] == "." * count:
        text = text.replace("." + "0" * (width - _SECONDS_WIDTH - 1) + "\n", "\t")
        while "0\n" in text:  # each fraction left has a non-zero digit: it stops there
            text = text.replace("0\n", "\n")
        text = text.replace("\t", "\n")
    elif dots or width != _SECONDS_WIDTH:
        return None
    finished = text.replace(" ", "T").replace("\n", "Z\n").split("\n")
    finished.pop()  # after the last newline
    return finished


def time_text(value: str) -> str:
    """TIME text (``[-]HHH:MM:SS[.ffffff]``, possibly negative or past 24 h) with the fraction's
    trailing zeros removed (§5.3); the server already prints at least two hour digits."""
    if "." in value:
        return value.rstrip("0").rstrip(".")
    return value


def _json(value: object) -> object:
    """JSON text parsed with exact numbers, fractions as ``ExactNumber`` (no ``float``); text
    that is not JSON (a MariaDB ``longtext`` whose check was dropped later) stays a string."""
    try:
        return parse_json_exact_fractions(value if isinstance(value, str | bytes) else str(value))
    except ValueError:
        return value


_TEXT_COLUMN: Final = frozenset({str, type(None)})


def _json_column(values: Sequence[Any]) -> list[object]:
    """A JSON column of one batch: all texts parsed in one C-scanner call (fractions as orjson
    fragments, see :func:`~fetcher.adapters.jsonlayout.fastjson.parse_json_column`); the
    value-by-value :func:`_json` when a value is not text or not JSON. MySQL and MariaDB may print
    ``-0`` or exponents (MariaDB keeps the text as written), so integers keep their text check."""
    if _TEXT_COLUMN.issuperset(map(type, values)):
        try:
            return parse_json_column(values, canonical_ints=False)
        except ValueError:
            pass
    return _convert_column(values, _json)


def _other(value: object) -> object:
    if isinstance(value, bytes | bytearray):
        return encode_bytes(value)
    return encode_value(value)


_CONVERTERS: dict[TypeFamily, Callable[[Any], object]] = {
    TypeFamily.TIMESTAMP: datetime_text,
    TypeFamily.TIMESTAMPTZ: datetime_text,
    TypeFamily.TIME: time_text,
    TypeFamily.BYTES: encode_bytes,
    TypeFamily.OTHER: _other,
}


def _converter(column: Column) -> Callable[[Any], object] | None:
    """How one column's non-null values are finished; ``None``: the driver value is final
    (integers, floats, text, and DECIMAL/DATE text, which already is the §5.3 string)."""
    return _CONVERTERS.get(column.family)


def _convert_column(values: Sequence[Any], convert: Callable[[Any], object]) -> list[object]:
    return [None if value is None else convert(value) for value in values]


_AS_DECODED: Final = frozenset({str, int, type(None)})


def _other_column(values: Sequence[Any]) -> Sequence[object]:
    """A column of another type (``UUID``, ``INET6``, ``GEOMETRY`` text, …): when every value is
    text or an integer it is final as it is, with no Python step per value (the driver decodes
    text strictly, so a string never holds a lone surrogate for ``encode_text`` to replace);
    else each value through ``_other``."""
    if _AS_DECODED.issuperset(map(type, values)):
        return values
    return _convert_column(values, _other)


def _column_converter(column: Column) -> Callable[[Sequence[Any]], Sequence[object]] | None:
    """How one column of a batch is finished; ``None``: the driver values are final."""
    if column.family is TypeFamily.JSON:
        return _json_column
    if column.family in (TypeFamily.TIMESTAMP, TypeFamily.TIMESTAMPTZ):
        return datetime_column
    if column.family is TypeFamily.OTHER:
        return _other_column
    convert = _converter(column)
    return None if convert is None else partial(_convert_column, convert=convert)


#: Issue 23: how :func:`~fetcher.adapters.jsonlayout.columns.layout_columns` writes each family's
#: driver values, the same conversion as :func:`_column_converter` (tested byte for byte
#: against it); a family absent here sends the table to the general path.
_KINDS: dict[TypeFamily, ColumnKind] = {
    TypeFamily.INTEGER: ColumnKind.NUMBER,
    TypeFamily.FLOAT: ColumnKind.FLOAT,
    TypeFamily.DECIMAL: ColumnKind.STRING,
    TypeFamily.TEXT: ColumnKind.STRING,
    TypeFamily.DATE: ColumnKind.STRING,
    TypeFamily.TIMESTAMP: ColumnKind.DATETIME,
    TypeFamily.TIMESTAMPTZ: ColumnKind.DATETIME,
    TypeFamily.TIME: ColumnKind.TIME,
    TypeFamily.BYTES: ColumnKind.BYTES,
    TypeFamily.JSON: ColumnKind.JSON,
    TypeFamily.OTHER: ColumnKind.SCALAR,
}


def layout_plan(columns: Sequence[Column]) -> ColumnPlan | None:
    """The C layout of a query's rows, when every column's family is one it covers."""
    kinds = [_KINDS.get(column.family) for column in columns]
    if None in kinds:
        return None
    return column_plan([column.name for column in columns], kinds)  # type: ignore[arg-type]


def _columns(
    rows: Sequence[Sequence[Any]],
    names: Sequence[str],
    converters: Sequence[tuple[int, Callable[[Sequence[Any]], Sequence[object]]]],
    datasource: str,
) -> list[Sequence[object]]:
    """One fetched batch as converted columns; a JSON value nested too deep raises
    ``JsonDepthError`` naming its column, a row of another width the query failure."""
    columns: list[Sequence[object]] = (
        list(transposed(rows, names, datasource)) if rows else [()] * len(names)
    )
    for index, convert in converters:
        with naming_column(names[index]):
            columns[index] = convert(columns[index])
    return columns


def mysql_param(value: object) -> object:
    """A bound filter value as asyncmy escapes it: aware datetimes as naive UTC (the session
    time zone is UTC), UUIDs as text; everything else as is."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    if isinstance(value, UUID):
        return str(value)
    return value


def select_sql(query: TableQuery) -> tuple[str, tuple[object, ...]]:
    """The rendered ``SELECT`` (backtick-quoted ``database``.``table``, ``%`` doubled inside
    identifiers) and its parameters as a tuple: asyncmy applies ``%`` formatting whenever
    parameters are given, so an empty tuple still turns ``%%`` back into ``%``."""
    sql, params = render_select(
        dialect_for(EngineType.MYSQL),
        query.table.schema,
        query.table.name,
        query.columns,
        query.filters,
    )
    return sql, tuple(mysql_param(value) for value in params)


# --------------------------------------------------------------------------------------------
# TLS (§11.2)
# --------------------------------------------------------------------------------------------

#: Modes that require TLS to be active once connected.
_TLS_REQUIRED = frozenset({"true", "skip-verify"})
_TLS_MODES = frozenset({"", "false", "true", "skip-verify", "preferred"})


class _PinnedNameContext(ServerNameContext):
    """An SSLContext that presents ``sni_name`` (the connection's host name) for SNI and
    hostname verification, whatever host the driver dialled: with the SSRF guard the driver
    dials the pinned IP, and the name is never resolved again (§2.9.1 rule 3)."""

    sni_name: str | None = None

    def server_name(self, requested: str | bytes | None) -> str | bytes | None:
        return self.sni_name if self.sni_name else requested


def build_tls_context(tls: TlsSettings | None, host: str | None) -> ssl.SSLContext | None:
    """The SSLContext of §11.2 for ``tls`` (``None``: no TLS). ``host`` is the name used for SNI
    and, in mode ``true``, the hostname check. Raises ``ValueError`` for an unknown mode."""
    mode = tls.mode if tls is not None and tls.mode else ""
    if mode not in _TLS_MODES:
        raise ValueError(f"unsupported ssl.mode for MYSQL: {mode!r}")
    if tls is None or mode in {"", "false"}:
        return None
    context = _PinnedNameContext(ssl.PROTOCOL_TLS_CLIENT)
    context.sni_name = host
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if mode == "true":
        context.check_hostname = True
        context.verify_mode = ssl.CERT_REQUIRED
        if tls.ca:
            context.load_verify_locations(cadata=tls.ca)
        else:
            context.load_default_certs()
    else:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if tls.cert:
        with pem_files(tls.cert, *([tls.key] if tls.key else [])) as paths:
            context.load_cert_chain(paths[0], paths[1] if len(paths) > 1 else None)
    return context


def tls_active(conn: Any) -> bool:
    """§11.2: the server advertised ``CLIENT.SSL`` and the session's transport is encrypted, so
    a stripped capability flag cannot leave a ``true``/``skip-verify`` session in plaintext."""
    transport = getattr(conn, "_transport", None)
    capabilities = int(getattr(conn, "server_capabilities", 0) or 0)
    encrypted = transport is not None and transport.get_extra_info("ssl_object") is not None
    return bool(capabilities & CLIENT.SSL) and encrypted


# --------------------------------------------------------------------------------------------
# SQL
# --------------------------------------------------------------------------------------------

#: §11.1: read-only, UTC, and backslash escapes kept (§3.4). The ``sql_mode`` expression drops
#: the one flag and leaves every other flag the server or account set.
_SESSION_SQL = (
    "SET SESSION TRANSACTION READ ONLY",
    "SET SESSION time_zone = '+00:00', SESSION sql_mode = TRIM(BOTH ',' FROM "
    "REPLACE(CONCAT(',', @@SESSION.sql_mode, ','), ',NO_BACKSLASH_ESCAPES,', ','))",
)

_CATALOG_TEMPLATE = """
SELECT t.TABLE_NAME, c.COLUMN_NAME, c.DATA_TYPE
FROM information_schema.TABLES AS t
LEFT JOIN information_schema.COLUMNS AS c
       ON c.TABLE_SCHEMA = t.TABLE_SCHEMA AND c.TABLE_NAME = t.TABLE_NAME
WHERE t.TABLE_SCHEMA = DATABASE()
  AND t.TABLE_TYPE IN ('BASE TABLE', 'VIEW', 'SYSTEM VERSIONED'){names}
ORDER BY t.TABLE_NAME, c.ORDINAL_POSITION
"""
#: The same tables' names alone: no table definition is opened.
_TABLE_NAMES_SQL = """
SELECT t.TABLE_NAME FROM information_schema.TABLES AS t
WHERE t.TABLE_SCHEMA = DATABASE()
  AND t.TABLE_TYPE IN ('BASE TABLE', 'VIEW', 'SYSTEM VERSIONED')
"""


#: information_schema text arrives as ``str``, or ``bytes`` on some MySQL 8 columns.
_TEXT = (str, bytes, bytearray)
_TABLE_NAME_COLUMNS = (CatalogColumn("TABLE_NAME", _TEXT),)
_CATALOG_COLUMNS = (
    CatalogColumn("TABLE_NAME", _TEXT),
    nullable("COLUMN_NAME", *_TEXT),
    nullable("DATA_TYPE", *_TEXT),
)
_JSON_CHECK_COLUMNS = (CatalogColumn("TABLE_NAME", _TEXT), nullable("CHECK_CLAUSE", *_TEXT))
_DATABASE_COLUMNS = (nullable("DATABASE()", *_TEXT),)


async def _named_tables(cursor: Any, folded: frozenset[str], datasource: str) -> list[str]:
    """The catalog names of the tables whose casefolded name is in ``folded``."""
    await cursor.execute(_TABLE_NAMES_SQL)
    rows = await cursor.fetchall()
    names = [_text(name) for (name,) in catalog_rows(rows, _TABLE_NAME_COLUMNS, datasource)]
    return [name for name in names if name.casefold() in folded]


async def _catalog_query(
    cursor: Any, template: str, tables: Sequence[str] | None
) -> Sequence[Sequence[Any]]:
    """The rows of a catalog ``template``, for the tables named exactly ``tables`` only when
    given (bound parameters; a literal ``%`` of the template is doubled for them)."""
    if tables is None:
        await cursor.execute(template.format(names=""))
    else:
        placeholders = ", ".join(["%s"] * len(tables))
        names = f" AND t.TABLE_NAME IN ({placeholders})"
        await cursor.execute(template.replace("%", "%%").format(names=names), list(tables))
    rows: Sequence[Sequence[Any]] = await cursor.fetchall()
    return rows


#: MariaDB only (MySQL's CHECK_CONSTRAINTS has no TABLE_NAME, and MySQL has a real JSON type).
_JSON_CHECKS = """
SELECT t.TABLE_NAME, t.CHECK_CLAUSE
FROM information_schema.CHECK_CONSTRAINTS AS t
WHERE t.CONSTRAINT_SCHEMA = DATABASE() AND t.CHECK_CLAUSE LIKE 'json\\\\_valid(%'{names}
"""

_JSON_VALID = re.compile(r"json_valid\(`((?:[^`]|``)+)`\)", re.IGNORECASE)


def json_checked_column(clause: str) -> str | None:
    """The column of a MariaDB ``json_valid(`c`)`` check clause, or ``None``."""
    match = _JSON_VALID.fullmatch(clause.strip())
    return match.group(1).replace("``", "`") if match else None


def _text(value: object) -> str:
    """information_schema values arrive as ``str`` (or ``bytes`` on some MySQL 8 columns)."""
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return "" if value is None else str(value)


def _tables_from(
    database: str,
    rows: Sequence[Sequence[Any]],
    json_columns: set[tuple[str, str]],
    datasource: str,
) -> tuple[TableSchema, ...]:
    grouped: dict[str, list[Column]] = {}
    for raw_table, raw_column, raw_type in catalog_rows(rows, _CATALOG_COLUMNS, datasource):
        table = _text(raw_table)
        columns = grouped.setdefault(table, [])
        if raw_column is None:
            continue
        column, data_type = _text(raw_column), _text(raw_type).lower()
        checked = (table, column) in json_columns and data_type == "longtext"
        family = mysql_family(data_type, json_checked=checked)
        columns.append(Column(column, family, "json" if checked else data_type))
    return tuple(
        TableSchema(schema=database, name=name, columns=tuple(columns))
        for name, columns in grouped.items()
    )


# --------------------------------------------------------------------------------------------
# The connector
# --------------------------------------------------------------------------------------------


class MysqlConnector(NetworkConnector):
    """A read-only asyncmy session on one MySQL/MariaDB datasource (the ``Connector`` port)."""

    #: Issue 23: batches of tables whose every column :func:`layout_plan` covers are written
    #: in C from the driver's rows (:class:`~fetcher.adapters.jsonlayout.columns.LaidOutBatch`);
    #: tests turn it off to compare with the general path.
    laid_out: ClassVar[bool] = True

    _conn: Any = None

    async def __aenter__(self) -> Self:
        with map_mysql_errors(Phase.CONNECT, self._name):
            async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                self._conn = await self._open()
        return self

    def _connect_kwargs(self) -> dict[str, Any]:
        """§2.9.1: every parameter is its own keyword argument; the pinned IP is dialled."""
        c = self._connection
        return {
            "host": self._pinned_address or c.host,
            "port": c.port if c.port is not None else DEFAULT_PORT,
            "user": c.username,
            "password": c.password or "",
            "database": c.database,
            "charset": "utf8mb4",
            "connect_timeout": CONNECT_TIMEOUT_SECONDS,
            "local_infile": False,
            "autocommit": True,
            "conv": _CONVERSIONS,
        }

    async def _open(self) -> Any:
        tls = self._connection.ssl
        mode = tls.mode if tls is not None and tls.mode else ""
        try:
            context = build_tls_context(tls, self._connection.host)
        except (ValueError, ssl.SSLError) as exc:
            raise engine_error(Phase.CONNECT, self._name, f"invalid TLS settings: {exc}") from None
        conn = await self._dial(context, fallback=mode == "preferred")
        try:
            if mode in _TLS_REQUIRED and not tls_active(conn):
                raise engine_error(Phase.CONNECT, self._name, "TLS is not active on the session")
            async with conn.cursor() as cursor:
                for statement in _SESSION_SQL:
                    await cursor.execute(statement)
        except BaseException:
            conn.close()
            raise
        return conn

    async def _dial(self, context: ssl.SSLContext | None, *, fallback: bool) -> Any:
        """Connect; in mode ``preferred``, a server whose greeting offered no TLS is dialled
        again in plaintext (§11.2)."""
        kwargs = self._connect_kwargs()
        conn = _new_connection(**kwargs, ssl=context)
        try:
            await conn.connect()
        except _DRIVER_ERRORS:
            offered = int(getattr(conn, "server_capabilities", 0) or 0) & CLIENT.SSL
            if not (fallback and context is not None and not offered):
                raise
            conn.close()
            conn = _new_connection(**kwargs)
            await conn.connect()
        return conn

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with suppress(*_DRIVER_ERRORS, OSError, RuntimeError):
                async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                    await conn.ensure_closed()
            conn.close()

    def _abort(self) -> None:
        """Drop the connection without draining an unfinished result (the server stops the
        statement when its socket closes)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _require(self, phase: Phase) -> Any:
        if self._conn is None or not self._conn.connected:
            raise engine_error(phase, self._name, "connection is not open")
        return self._conn

    async def probe(self) -> None:
        """§2.6.7: ``SELECT 1``; a failure is a connect failure."""
        conn = self._require(Phase.CONNECT)
        with map_mysql_errors(Phase.CONNECT, self._name):
            async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS), conn.cursor() as cursor:
                await cursor.execute("SELECT 1")
                await cursor.fetchall()

    async def discover(self, schemas: Sequence[str]) -> DiscoveredSchema:
        """§3.3/§11.3: the tables and views of the connected database (``schemas`` is ignored:
        the scope is always ``DATABASE()``); a system schema is never discovered."""
        return await self._discover(None)

    async def discover_tables(
        self, schemas: Sequence[str], names: Sequence[str]
    ) -> DiscoveredSchema:
        """:meth:`discover` for the tables named ``names`` only (the engine's
        ``NamedDiscovery``). Catalog matching is case-insensitive here by Python's
        ``casefold`` (§3.3), which no SQL ``LOWER`` reproduces for every name, so the table
        names are listed (one cheap query), matched here the same way, and only the matching
        tables' columns are read: MariaDB opens every table's definition to list columns, 2.7 s
        a job for a database of 2,000 tables."""
        return await self._discover(frozenset(name.casefold() for name in names))

    async def _discover(self, folded: frozenset[str] | None) -> DiscoveredSchema:
        conn = self._require(Phase.DISCOVER)
        with map_mysql_errors(Phase.DISCOVER, self._name):
            async with asyncio.timeout(DISCOVERY_TIMEOUT_SECONDS), conn.cursor() as cursor:
                await cursor.execute("SELECT DATABASE()")
                answered = await cursor.fetchall()
                current = catalog_rows(answered[:1], _DATABASE_COLUMNS, self._name)
                database = _text(next(current, (None,))[0])
                if not database or mysql_schema_excluded(database):
                    return DiscoveredSchema(default_schema=database)
                tables = None if folded is None else await _named_tables(cursor, folded, self._name)
                if tables == []:
                    return DiscoveredSchema(default_schema=database)
                rows = await _catalog_query(cursor, _CATALOG_TEMPLATE, tables)
                json_columns: set[tuple[str, str]] = set()
                if "mariadb" in _text(getattr(conn, "server_version", "")).lower():
                    checks = await _catalog_query(cursor, _JSON_CHECKS, tables)
                    for table, clause in catalog_rows(checks, _JSON_CHECK_COLUMNS, self._name):
                        column = json_checked_column(_text(clause))
                        if column is not None:
                            json_columns.add((_text(table), column))
        return DiscoveredSchema(
            default_schema=database,
            tables=_tables_from(database, rows, json_columns, self._name),
        )

    async def stream(self, query: TableQuery) -> AsyncIterator[Sequence[Row]]:
        """Rows through an unbuffered server-side cursor, at most ``batch_size`` (and about
        ``BATCH_TARGET_BYTES``) at a time, encoded per §5.3: each batch laid out in C from
        the driver's rows when :func:`layout_plan` covers the table and the C layout accepts
        the batch, else as :class:`~fetcher.adapters.jsonlayout.fastjson.FastRowBatch` columns."""
        conn = self._require(Phase.QUERY)
        sql, params = select_sql(query)
        names = tuple(column.name for column in query.columns)
        converters = [
            (index, convert)
            for index, column in enumerate(query.columns)
            if (convert := _column_converter(column)) is not None
        ]
        json_columns = [
            index for index, column in enumerate(query.columns) if column.family is TypeFamily.JSON
        ]
        plan = layout_plan(query.columns) if self.laid_out else None
        finished = False
        cursor = conn.cursor(SSCursor)
        try:
            with map_mysql_errors(Phase.QUERY, self._name, query.table):
                await cursor.execute(sql, params)
                sizer = BatchSizer(self._batch_size)
                while batch := await self._fetch(conn, cursor, sizer):
                    convert = partial(_columns, batch, names, converters, self._name)
                    laid = None if plan is None else layout_columns(batch, plan)
                    if laid is not None:
                        yield LaidOutBatch(
                            names, len(batch), laid, convert, json_columns=json_columns
                        )
                    else:  # declined: the general path writes (or refuses) this batch
                        yield FastRowBatch(names, convert(), json_columns=json_columns)
                    del batch, convert, laid  # written: not held while the next is fetched
                await cursor.close()
                finished = True
        finally:
            if not finished:
                self._abort()

    async def _fetch(self, conn: Any, cursor: Any, sizer: BatchSizer) -> list[Any]:
        """The next batch of ``sizer.rows`` rows (bounded by bytes, see
        :mod:`~fetcher.adapters.batch_sizing`), with the socket read only while fetching.

        asyncmy's protocol reads every byte the server sends into its buffer, so while the
        consumer works (spool, upload) an unbuffered result would pile up in memory. Reading
        is paused between batches, which leaves the rest of the result in the server (its
        statement blocks on the full socket): memory stays at about one batch.
        """
        transport = conn._transport  # asyncmy exposes no flow-control API
        if transport is not None:
            transport.resume_reading()
        rows: list[Any] = await cursor.fetchmany(sizer.rows)
        transport = conn._transport
        if rows and transport is not None:
            transport.pause_reading()
        sizer.observe(rows)
        return rows
