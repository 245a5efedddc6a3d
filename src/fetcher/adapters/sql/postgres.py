"""The PostgreSQL connector: psycopg 3, async (contract §11.1, §11.2, §11.3, §11.4, §5.3).

* Connect (§2.9.1, §11.1): keyword arguments only (``hostaddr`` when the SSRF guard pinned an
  address), a 10 s timeout, and the session settings ``default_transaction_read_only=on`` and
  ``TimeZone=UTC``, plus ``IntervalStyle=iso_8601`` and ``DateStyle=ISO`` so that the text forms
  the value loaders below read are fixed.
* TLS (§11.2): ``ssl.mode`` → ``sslmode`` (default ``disable``); ``ssl.ca``/``cert``/``key`` →
  ``sslrootcert``/``sslcert``/``sslkey`` through temporary files (``O_EXCL``, 0600, in
  ``/dev/shm`` when available) that are unlinked right after the connect. Without a client
  certificate of the connection's own, ``sslcertmode=disable`` (§13 "Client certificates").
* Values (§5.3): per-connection text-format loaders turn every PostgreSQL value into its
  JSON-ready encoding, so array elements are encoded by the same rules as scalars; timestamps
  are finished per column (``_DateTimeText``), once per batch. Batches are
  :class:`~fetcher.adapters.jsonlayout.fastjson.FastRowBatch` columns, which write their own §5.4
  bytes through orjson (or leave them to the engine's writer).
* Depth: a ``json``/``jsonb`` value nested deeper than ``MAX_JSON_DEPTH`` (250) levels, which
  PostgreSQL accepts, fails the query with ``failed to query datasource '<ds>': column '<c>' of
  table '<schema.table>' holds a JSON value nested deeper than 250 levels``: raised here when
  the parser meets it (``map_postgres_errors``), or by the engine's writer when the parser could
  hold it, with the encoder process on or off.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import aclosing, contextmanager, suppress
from decimal import Decimal, InvalidOperation
from functools import partial
from operator import is_not, itemgetter
from types import TracebackType
from typing import Any, ClassVar, Self

import psycopg
from psycopg.abc import AdaptContext, Buffer
from psycopg.adapt import AdaptersMap, Loader, Transformer
from psycopg.pq import Format
from psycopg.pq.abc import PGresult
from psycopg.types.string import TextLoader

from fetcher.adapters.batch_sizing import BatchSizer
from fetcher.adapters.jsonlayout import (
    ColumnKind,
    ColumnPlan,
    FastRowBatch,
    LaidOutBatch,
    TextBatch,
    column_plan,
    encoded_batches,
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
    catalog_rows,
    engine_error,
    nullable,
    postgres_schema_excluded,
    postgres_table_excluded,
    result_columns,
    translate_errors,
    transposed,
)
from fetcher.engine import ConnectionDescriptor
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
    encode_datetime,
    encode_float,
    encode_float32,
    encode_interval,
    encode_time,
    encode_value,
    naming_column,
    parse_json_exact_fractions,
    render_select,
)

__all__ = ["PostgresConnector", "map_postgres_errors", "postgres_family"]

#: §3.3: the PostgreSQL default schema ``d``.
DEFAULT_SCHEMA = "public"

#: §11.1 session settings; the last two fix the text forms the loaders parse.
_SESSION_OPTIONS = (
    "-c default_transaction_read_only=on -c TimeZone=UTC -c IntervalStyle=iso_8601 -c DateStyle=ISO"
)

AsyncConn = psycopg.AsyncConnection[tuple[Any, ...]]
AsyncCursor = psycopg.AsyncServerCursor[tuple[Any, ...]]


@contextmanager
def map_postgres_errors(
    phase: Phase, datasource: str, table: TableSchema | None = None
) -> Iterator[None]:
    """Translate psycopg, socket and timeout failures, and a JSON value nested too deep in
    ``table``, into the §4.5 ``EngineError``."""
    with translate_errors(phase, datasource, (psycopg.Error,), table=table):
        yield


# --------------------------------------------------------------------------------------------
# Type families (§11.4)
# --------------------------------------------------------------------------------------------

_FAMILY_BY_UDT: dict[str, TypeFamily] = {
    **dict.fromkeys(("int2", "int4", "int8"), TypeFamily.INTEGER),
    **dict.fromkeys(("numeric", "money"), TypeFamily.DECIMAL),
    **dict.fromkeys(("float4", "float8"), TypeFamily.FLOAT),
    "bool": TypeFamily.BOOLEAN,
    **dict.fromkeys(
        ("text", "varchar", "bpchar", "char", "name", "citext", "xml"), TypeFamily.TEXT
    ),
    "date": TypeFamily.DATE,
    "timestamp": TypeFamily.TIMESTAMP,
    "timestamptz": TypeFamily.TIMESTAMPTZ,
    **dict.fromkeys(("time", "timetz"), TypeFamily.TIME),
    "uuid": TypeFamily.UUID,
    **dict.fromkeys(("json", "jsonb"), TypeFamily.JSON),
    "bytea": TypeFamily.BYTES,
}

#: Array element types whose values the connection can load element by element; any other
#: array (enums, citext, user types) is selected as ``text[]``.
_LOADABLE_ARRAYS = frozenset(
    f"_{name}"
    for name in (
        *_FAMILY_BY_UDT,
        "interval",
        "inet",
        "cidr",
        "oid",
    )
    if name not in {"money", "citext"}
)


def postgres_family(data_type: str, udt_name: str, *, is_enum: bool = False) -> Column:
    """§11.4: the family and native type of a column from ``information_schema.columns``.

    ``native_type`` is ``data_type`` for built-in types (``money``, ``real``, ``interval`` …)
    and ``udt_name`` for arrays and user-defined types (``_int4``, ``citext``, enum names).
    The ``name`` of the returned column is empty; callers replace it.
    """
    native = udt_name if data_type in {"ARRAY", "USER-DEFINED"} else data_type
    if data_type == "ARRAY":
        family = TypeFamily.ARRAY
    elif is_enum:
        family = TypeFamily.TEXT
    else:
        family = _FAMILY_BY_UDT.get(udt_name, TypeFamily.OTHER)
    return Column(name="", family=family, native_type=native)


# --------------------------------------------------------------------------------------------
# Value loaders (§5.3): text format in, JSON-ready value out
# --------------------------------------------------------------------------------------------
#
# Speed: psycopg calls a Python loader once per value, which dominates an extraction, so the hot
# types use psycopg's C text loader instead. Text is returned as is (see ``_C_TEXT_TYPES`` for
# invalid UTF-8); ``numeric`` and ``date`` text already is the §5.3 string (ASCII, scale kept,
# ``NaN``/``infinity``/BC/five-digit years as the engine prints them in the ISO DateStyle);
# timestamps are rewritten per column by ``stream`` (``_DateTimeText``). The other types keep a
# Python loader.


def _text(data: Buffer) -> str:
    """The raw text form of a value, with invalid UTF-8 replaced (§5.3 Text row).

    Decoding with ``replace`` never yields a surrogate (UTF-8 cannot encode one), so the result
    needs no further ``encode_text`` pass.
    """
    return str(data, "utf-8", "replace")


class _TextLoader(Loader):
    """text, varchar, char, name, xml and every type without a loader: a sanitized string."""

    format = Format.TEXT

    def load(self, data: Buffer) -> Any:
        return str(data, "utf-8", "replace")


class _Float4Loader(Loader):
    """real: the shortest text that round-trips as a float32 (§5.3)."""

    format = Format.TEXT

    def load(self, data: Buffer) -> Any:
        return encode_float32(float(_text(data)))


class _Float8Loader(Loader):
    """double precision: shortest round-trip; NaN and infinities as strings (§5.3)."""

    format = Format.TEXT

    def load(self, data: Buffer) -> Any:
        return encode_float(float(_text(data)))


class _DelegatingLoader(Loader):
    """Loads with psycopg's stock loader, then encodes; a value the stock loader or the encoder
    cannot represent (``infinity``, BC dates, years past 9999, ``24:00:00``) keeps the engine's
    text form, as §5.3 asks for dates and timestamps."""

    format = Format.TEXT
    datetime_like: ClassVar[bool] = True

    def __init__(self, oid: int, context: AdaptContext | None = None) -> None:
        super().__init__(oid, context)
        stock = psycopg.adapters.get_loader(oid, Format.TEXT)
        self._stock = stock(oid, context) if stock is not None else None

    def load(self, data: Buffer) -> Any:
        if self._stock is None or (self.datetime_like and _special_datetime(_text(data))):
            return _text(data)
        try:
            return self.encode(self._stock.load(data))
        except (ValueError, OverflowError, psycopg.DataError):
            return _text(data)

    def encode(self, value: Any) -> object:
        """The §5.3 encoding of the stock loader's value."""
        raise NotImplementedError


def _special_datetime(text: str) -> bool:
    """``infinity``, BC and five-digit-year values: kept as the engine's text (§5.3)."""
    head = text.split("-", 1)[0]
    return "infinity" in text or text.endswith(" BC") or (head.isdigit() and len(head) > 4)


class _DateTimeLoader(_DelegatingLoader):
    """timestamp/timestamptz: the reference path; ``_DateTimeText`` is the fast one."""

    def encode(self, value: Any) -> object:
        return encode_datetime(value)


class _TimeLoader(_DelegatingLoader):
    def encode(self, value: Any) -> object:
        return encode_time(value)


class _ByteaLoader(_DelegatingLoader):
    datetime_like = False

    def encode(self, value: Any) -> object:
        return encode_bytes(value)


_ISO_INTERVAL = re.compile(
    r"P(?:(?P<y>-?\d+)Y)?(?:(?P<mo>-?\d+)M)?(?:(?P<d>-?\d+)D)?"
    r"(?:T(?:(?P<h>-?\d+)H)?(?:(?P<mi>-?\d+)M)?(?:(?P<s>-?\d+(?:\.\d+)?)S)?)?"
)


def parse_iso_interval(text: str) -> tuple[int, int, int] | None:
    """PostgreSQL's ``IntervalStyle=iso_8601`` output → ``(months, days, microseconds)``.

    Each component carries its own sign (``P-1DT-2H``); ``None`` when the text does not match.
    """
    match = _ISO_INTERVAL.fullmatch(text)
    if match is None:
        return None
    part = {k: v or "0" for k, v in match.groupdict().items()}
    months = int(part["y"]) * 12 + int(part["mo"])
    try:
        seconds = Decimal(part["s"])
    except InvalidOperation:
        return None
    micros = (int(part["h"]) * 3600 + int(part["mi"]) * 60) * 1_000_000
    micros += int(seconds * 1_000_000)
    return months, int(part["d"]), micros


class _IntervalLoader(Loader):
    """interval: an ISO 8601 duration with §5.3 signs, from months, days and microseconds."""

    format = Format.TEXT

    def load(self, data: Buffer) -> Any:
        text = _text(data)
        parts = parse_iso_interval(text)
        return text if parts is None else encode_interval(*parts)


#: Text read by psycopg's C text loader, which decodes strict UTF-8. The server only sends valid
#: UTF-8 to a UTF8 client (it validates input and every conversion), so this matches
#: ``_TextLoader`` on anything but damaged storage; for that, a batch that fails to decode is
#: loaded again from the same result with ``_TextLoader`` (``_tolerant_rows``). ``"char"`` keeps
#: ``_TextLoader``: before PostgreSQL 15 it sends its byte as is.
_C_TEXT_TYPES = ("text", "varchar", "bpchar", "name", "xml")
#: ASCII text that is already the §5.3 string (numeric, date; uuid, which the server always
#: prints as lower-case canonical ``8-4-4-4-12``) or is rewritten per column (timestamps,
#: ``_DateTimeText``).
_C_ASCII_TYPES = ("numeric", "date", "uuid", "timestamp", "timestamptz")

#: JSON read as text by the C loader and parsed a whole column at a time (``_json_column``):
#: a Python loader per value cost more than the parse itself (issue 12).
_C_JSON_TYPES = ("json", "jsonb")

_LOADERS: dict[str | int, type[Loader]] = {
    0: TextLoader,  # types without a loader (enums, user types …): their text form
    **dict.fromkeys(_C_TEXT_TYPES + _C_ASCII_TYPES + _C_JSON_TYPES, TextLoader),
    '"char"': _TextLoader,
    "float4": _Float4Loader,
    "float8": _Float8Loader,
    **dict.fromkeys(("time", "timetz"), _TimeLoader),
    "bytea": _ByteaLoader,
    "interval": _IntervalLoader,
}


def install_loaders(conn: AsyncConn) -> None:
    """Register the §5.3 loaders on one connection (never globally)."""
    adapters = conn.adapters
    for name, loader in _LOADERS.items():
        adapters.register_loader(name, loader)


class _TolerantContext:
    """The connection's adapters with ``_TextLoader`` in place of every C text loader."""

    def __init__(self, conn: AsyncConn) -> None:
        self.connection = conn
        self.adapters = AdaptersMap(conn.adapters)
        for name in (0, *_C_TEXT_TYPES, *_C_ASCII_TYPES, *_C_JSON_TYPES):
            self.adapters.register_loader(name, _TextLoader)


def _tolerant_rows(result: PGresult, conn: AsyncConn) -> list[tuple[Any, ...]]:
    """The rows of a fetched result, loaded with invalid UTF-8 replaced (§5.3 Text row)."""
    transformer = Transformer(_TolerantContext(conn))
    transformer.set_pgresult(result)
    return transformer.load_rows(0, result.ntuples, tuple)


_is_not_none = partial(is_not, None)
_FIRST = itemgetter(0)
_AT_4 = itemgetter(4)
_AT_10 = itemgetter(10)
_LAST = itemgetter(-1)
_DIGITS = frozenset("0123456789")


_EMPTY_FOR_NONE: dict[object, Any] = {None: ""}


def _column_text(values: Sequence[Any], nullable: bool) -> str:
    """The values of a column, each followed by a newline, ``None`` as an empty line (text forms
    of timestamps hold neither newlines nor empty strings)."""
    lines: Iterable[str] = map(_EMPTY_FOR_NONE.get, values, values) if nullable else values
    return "\n".join(lines) + "\n"


class _DateTimeText:
    """§5.3 text of a timestamp(tz) from its text form in the UTC, ISO-DateStyle session.

    A value in years 1..9999 (``YYYY-MM-DD HH:MM:SS[.ffffff]``, plus ``+00`` with a zone) is
    rewritten by slicing: the engine already prints the fraction without trailing zeros, as
    §5.3 wants. Anything else (``infinity``, BC, five-digit years, an unexpected offset) takes
    the reference path of :class:`_DateTimeLoader`, so the result is the same either way.
    """

    def __init__(self, oid: int, context: AdaptContext | None, *, zoned: bool) -> None:
        self._reference = _DateTimeLoader(oid, context)
        self._zoned = zoned

    def text(self, value: str) -> object:
        """One value (``str`` from the C text loader)."""
        if value[4:5] == "-" and value[10:11] == " ":
            if self._zoned:
                if value.endswith("+00"):
                    return value[:10] + "T" + value[11:-3] + "Z"
            elif value[-1:].isdigit():
                return value[:10] + "T" + value[11:] + "Z"
        return self._reference.load(value.encode())

    def column(self, values: Sequence[Any]) -> Sequence[object]:
        """A column of scalars (``None`` for NULL): :meth:`text` of each value, computed for the
        whole column at once when every value has the common shape (checked first)."""
        nullable = None in values
        present: Sequence[str] = list(filter(_is_not_none, values)) if nullable else values
        count = len(present)
        if not count:
            return values
        joined = _column_text(values, nullable)
        if self._common_shape(present, joined, count):
            if self._zoned:
                text = joined.replace(" ", "T").replace("+00\n", "Z\n")
                absent = ""
            else:
                text = joined.replace(" ", "T").replace("\n", "Z\n")
                absent = "Z"
            parts = text[:-1].split("\n")
            return list(map({absent: None}.get, parts, parts)) if nullable else parts
        convert = self.text
        return [value if value is None else convert(value) for value in values]

    def _common_shape(self, present: Sequence[str], joined: str, count: int) -> bool:
        """Whether every value is ``YYYY-MM-DD HH:MM:SS[.ffffff]`` (plus ``+00`` when zoned):
        four-digit year (not ``infinity``), no BC, one space at index 10."""
        try:
            if set(map(_AT_4, present)) != {"-"} or set(map(_AT_10, present)) != {" "}:
                return False
        except IndexError:
            return False
        if "C" in joined or joined.count(" ") != count:
            return False
        if self._zoned:
            return joined.count("+00\n") == count
        return _DIGITS.issuperset(map(_LAST, present))

    def array_column(self, values: Sequence[Any]) -> list[object]:
        """A column of (nested) arrays whose elements are the text forms."""
        return [self._array(value) for value in values]

    def _array(self, value: Any) -> object:
        if isinstance(value, list):
            return [self._array(item) for item in value]
        return value if value is None else self.text(value)


def _finish(value: object) -> object:
    """Last pass over a loaded value: lists recurse; driver objects without a §5.3 loader
    (``inet``, ranges …) go through the generic encoder."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, list):
        return [_finish(item) for item in value]
    return encode_value(value)


def _finish_column(values: Sequence[Any]) -> list[object]:
    return list(map(_finish, values))


ColumnConverter = Callable[[Sequence[Any]], Sequence[object]]


def _oids(*names: str) -> frozenset[int]:
    types = psycopg.postgres.types
    scalars = {types[name].oid for name in names}
    arrays = {types[name].array_oid for name in names}
    return frozenset(scalars | arrays)


#: Result types whose loaded values (scalars and arrays) are final: stock C loaders that return
#: ``int``/``bool`` and the §5.3 loaders above that return JSON-ready values.
_FINAL_TYPES = (
    "int2", "int4", "int8", "oid", "bool", "text", "varchar", "bpchar", "name", '"char"', "xml",
    "numeric", "date", "float4", "float8", "time", "timetz", "bytea", "uuid", "interval",
)  # fmt: skip
_FINAL_OIDS = _oids(*_FINAL_TYPES)
#: Their scalars (not arrays): what the fast path writes as loaded (``_result_kind``).
_FINAL_SCALAR_OIDS = frozenset(psycopg.postgres.types[name].oid for name in _FINAL_TYPES)
_TIMESTAMP_OIDS = {
    psycopg.postgres.types[name].oid: zoned
    for name, zoned in (("timestamp", False), ("timestamptz", True))
}
_TIMESTAMP_ARRAY_OIDS = {
    psycopg.postgres.types[name].array_oid: psycopg.postgres.types[name].oid
    for name in ("timestamp", "timestamptz")
}


#: json/jsonb result types → whether their integers are canonical (``jsonb``: ``numeric`` text).
_JSON_OIDS = {
    psycopg.postgres.types[name].oid: name == "jsonb" for name in ("json", "jsonb")
}  # fmt: skip
_JSON_ARRAY_OIDS = frozenset(psycopg.postgres.types[name].array_oid for name in ("json", "jsonb"))


def _json_array_element(value: Any) -> object:
    if isinstance(value, list):
        return [_json_array_element(item) for item in value]
    return value if value is None else parse_json_exact_fractions(value)


def _json_array_column(values: Sequence[Any]) -> list[object]:
    """A column of (nested) arrays of JSON texts: each element parsed (§5.3 arrays)."""
    return [_json_array_element(value) for value in values]


def _column_converter(
    column: Column, type_oid: int, context: AdaptContext | None
) -> ColumnConverter | None:
    """How one result column is finished, chosen once per query; ``None``: values are final.

    JSON (and JSON arrays) is parsed from its text; timestamps are rewritten from their text;
    types the loaders above already encode are final; anything else gets ``_finish``.
    """
    if type_oid in _JSON_OIDS:
        return partial(parse_json_column, canonical_ints=_JSON_OIDS[type_oid])
    if type_oid in _JSON_ARRAY_OIDS:
        return _json_array_column
    if type_oid in _FINAL_OIDS:
        return None
    if type_oid in _TIMESTAMP_OIDS:
        return _DateTimeText(type_oid, context, zoned=_TIMESTAMP_OIDS[type_oid]).column
    if type_oid in _TIMESTAMP_ARRAY_OIDS:
        base = _TIMESTAMP_ARRAY_OIDS[type_oid]
        return _DateTimeText(base, context, zoned=_TIMESTAMP_OIDS[base]).array_column
    return _finish_column


def _columns(
    rows: list[tuple[Any, ...]],
    converters: Sequence[tuple[int, ColumnConverter]],
    names: Sequence[str],
    datasource: str,
) -> list[Sequence[object]]:
    """One fetched batch as columns, with the column converters applied; a JSON value nested
    too deep raises ``JsonDepthError`` naming its column (of ``names``), a row of another
    width the query failure naming the selected columns."""
    columns: list[Sequence[object]] = list(transposed(rows, names, datasource))
    for index, convert in converters:
        with naming_column(names[index]):
            columns[index] = convert(columns[index])
    return columns


# --------------------------------------------------------------------------------------------
# SQL
# --------------------------------------------------------------------------------------------

_CATALOG_TEMPLATE = """
SELECT t.table_schema::text, t.table_name::text, c.column_name::text, c.data_type::text,
       c.udt_name::text,
       EXISTS (
           SELECT 1 FROM pg_catalog.pg_type AS ty
           JOIN pg_catalog.pg_namespace AS ns ON ns.oid = ty.typnamespace
           WHERE ty.typname = c.udt_name AND ns.nspname = c.udt_schema AND ty.typtype = 'e'
       ) AS is_enum
FROM information_schema.tables AS t
LEFT JOIN information_schema.columns AS c
       ON c.table_schema = t.table_schema AND c.table_name = t.table_name
WHERE t.table_type IN ('BASE TABLE', 'VIEW') AND t.table_schema = ANY(%s){names}
ORDER BY t.table_schema, t.table_name, c.ordinal_position
"""
_CATALOG_SQL = _CATALOG_TEMPLATE.format(names="")
#: What each catalog row holds (a table without columns has NULL column values).
_CATALOG_COLUMNS = (
    CatalogColumn("table_schema"),
    CatalogColumn("table_name"),
    nullable("column_name"),
    nullable("data_type"),
    nullable("udt_name"),
    CatalogColumn("is_enum", (bool,)),
)
#: The catalog of the tables with one of the given exact names only (``discover_tables``).
_NAMED_SQL = _CATALOG_TEMPLATE.format(names=" AND t.table_name = ANY(%s)")


def quote_ident(name: str) -> str:
    """§3.4: ``"x"`` with ``"`` doubled, and ``%`` doubled for the ``%s`` paramstyle."""
    return '"' + name.replace('"', '""').replace("%", "%%") + '"'


def _cast_for(column: Column) -> str:
    """The outer cast a projected column needs: ``money[]`` → ``numeric[]`` (§5.3, never a
    locale string; ``render_select`` already casts scalar ``money``) and arrays without element
    loaders (enums, citext, user types) → ``text[]``."""
    if column.native_type == "_money":
        return "numeric[]"
    if column.family is TypeFamily.ARRAY and column.native_type not in _LOADABLE_ARRAYS:
        return "text[]"
    return ""


def select_sql(query: TableQuery) -> tuple[str, list[object]]:
    """The rendered SELECT (quoted identifiers, bound parameters), wrapped in an outer SELECT
    when a column needs a cast; the row keys stay the catalog names."""
    dialect = dialect_for(EngineType.POSTGRESQL)
    sql, params = render_select(
        dialect, query.table.schema, query.table.name, query.columns, query.filters
    )
    casts = [_cast_for(column) for column in query.columns]
    if not any(casts):
        return sql, list(params)
    exprs = ", ".join(
        f"{quote_ident(c.name)}::{cast} AS {quote_ident(c.name)}" if cast else quote_ident(c.name)
        for c, cast in zip(query.columns, casts, strict=True)
    )
    wrapped = f'SELECT {exprs} FROM ({sql}) AS "fetcher_rows"'  # noqa: S608 - quoted identifiers
    return wrapped, list(params)


#: The C layout's kind of each result type whose loaded values are written as they are (the
#: general path's ``_FINAL_OIDS`` scalars): ``int`` and ``bool`` from psycopg's C loaders, the
#: floats of the §5.3 float loaders, and ``str`` for the rest (text, numeric, uuid, date from
#: the C text loader; time, bytea and ``"char"`` from the §5.3 loaders).
_FINAL_KINDS = {
    **{
        psycopg.postgres.types[name].oid: ColumnKind.NUMBER
        for name in ("int2", "int4", "int8", "oid")
    },
    psycopg.postgres.types["bool"].oid: ColumnKind.BOOL,
    **{psycopg.postgres.types[name].oid: ColumnKind.FLOAT for name in ("float4", "float8")},
}
_STAMP_KINDS = {
    oid: ColumnKind.ZONED_STAMP if zoned else ColumnKind.STAMP
    for oid, zoned in _TIMESTAMP_OIDS.items()
}


def _result_kind(column: Column, type_oid: int) -> ColumnKind | None:
    """How the C layout writes ``column``, of result type ``type_oid``, exactly as the general
    path does (:func:`_column_converter`): final scalars as loaded, JSON texts laid out,
    timestamps from their text, and the text forms of enums and other text types (``citext``)
    as strings; ``None`` for arrays and the types ``_finish`` converts (network, ranges …)."""
    if type_oid in _JSON_OIDS:  # jsonb's integers are read canonically (_column_converter)
        return ColumnKind.JSONB if _JSON_OIDS[type_oid] else ColumnKind.JSON
    if type_oid in _STAMP_KINDS:
        return _STAMP_KINDS[type_oid]
    if type_oid in _FINAL_SCALAR_OIDS:
        return _FINAL_KINDS.get(type_oid, ColumnKind.STRING)
    if column.family is TypeFamily.TEXT:  # loaded as text by loader 0, final as a str
        return ColumnKind.STRING
    return None


def layout_plan(query: TableQuery, description: Sequence[psycopg.Column]) -> ColumnPlan | None:
    """Issue 23's fast path: how the C layout writes this query's rows from the driver's
    tuples (:func:`~fetcher.adapters.jsonlayout.columns.layout_columns`), chosen from the result
    types; ``None`` when a column is of a type it does not cover (arrays, ranges, network and
    user types …) and the table takes the general path. A value of another Python type than
    its kind expects (a non-finite float's string) makes the layout decline its batch."""
    if len(description) != len(query.columns):
        return None
    kinds = [
        _result_kind(column, described.type_code)
        for column, described in zip(query.columns, description, strict=True)
    ]
    if None in kinds:
        return None
    return column_plan([column.name for column in query.columns], kinds)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# TLS files (§11.2)
# --------------------------------------------------------------------------------------------


@contextmanager
def tls_files(tls: TlsSettings | None) -> Iterator[dict[str, str]]:
    """libpq ``sslrootcert``/``sslcert``/``sslkey`` paths for the PEMs of ``tls``, unlinked on
    exit. Nothing is written when the mode is ``disable`` (or empty)."""
    wanted: list[tuple[str, str]] = []
    if tls is not None and (tls.mode or "disable") != "disable":
        pems = (("sslrootcert", tls.ca), ("sslcert", tls.cert), ("sslkey", tls.key))
        wanted = [(param, pem) for param, pem in pems if pem]
    with pem_files(*(pem for _, pem in wanted)) as paths:
        yield {param: path for (param, _), path in zip(wanted, paths, strict=True)}


def connect_kwargs(
    connection: ConnectionDescriptor, pinned_address: str | None, tls_params: dict[str, str]
) -> dict[str, Any]:
    """The libpq parameters of one connect, each its own keyword argument (§2.9.1).

    ``tls_params`` are the file paths of :func:`tls_files`. Without a client certificate of the
    connection's own, ``sslcertmode=disable`` (§13 "Client certificates", libpq ≥ 16): libpq
    would otherwise offer the service account's ``~/.postgresql/postgresql.crt`` (or
    ``PGSSLCERT``) to whatever server a caller pointed the connection at.
    """
    tls = connection.ssl
    return {
        "host": connection.host,
        "hostaddr": pinned_address,
        "port": connection.port if connection.port is not None else 5432,
        "dbname": connection.database,
        "user": connection.username,
        "password": connection.password,
        "sslmode": tls.mode if tls is not None and tls.mode else "disable",
        "connect_timeout": CONNECT_TIMEOUT_SECONDS,
        "options": _SESSION_OPTIONS,
        "client_encoding": "UTF8",
        "application_name": "fetcher",
        "sslrootcert": tls_params.get("sslrootcert"),
        "sslcert": tls_params.get("sslcert"),
        "sslkey": tls_params.get("sslkey"),
        "sslcertmode": None if "sslcert" in tls_params else "disable",
    }


# --------------------------------------------------------------------------------------------
# The connector
# --------------------------------------------------------------------------------------------


class PostgresConnector(NetworkConnector):
    """A read-only psycopg 3 session on one PostgreSQL datasource (the ``Connector`` port)."""

    _conn: AsyncConn | None = None
    #: Issue 23: batches of tables whose every result column :func:`layout_plan` covers are
    #: written in C from the driver's rows; ``False`` (tests comparing the two paths) keeps the
    #: general path.
    laid_out: ClassVar[bool] = True
    #: The fast path's ``FETCH`` in flight, ended before the connection closes.
    _prefetch: asyncio.Task[list[tuple[Any, ...]]] | None = None

    async def __aenter__(self) -> Self:
        with map_postgres_errors(Phase.CONNECT, self._name):
            async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                self._conn = await self._open()
        return self

    async def _open(self) -> AsyncConn:
        """§2.9.1: every connection parameter is its own keyword argument."""
        with tls_files(self._connection.ssl) as tls_params:
            conn = await psycopg.AsyncConnection.connect(
                **connect_kwargs(self._connection, self._pinned_address, tls_params),
                autocommit=True,
            )
        install_loaders(conn)
        return conn

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        conn, self._conn = self._conn, None
        prefetch, self._prefetch = self._prefetch, None
        if prefetch is not None:  # a stream left at a batch (a failed job)
            await _cancel_fetch(prefetch)
        if conn is not None:
            with suppress(psycopg.Error, OSError):
                await conn.close()

    def _require(self, phase: Phase) -> AsyncConn:
        if self._conn is None or self._conn.closed:
            raise engine_error(phase, self._name, "connection is not open")
        return self._conn

    async def probe(self) -> None:
        """§2.6.7: ``SELECT 1``; a failure is a connect failure."""
        conn = self._require(Phase.CONNECT)
        with map_postgres_errors(Phase.CONNECT, self._name):
            async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                await conn.execute("SELECT 1")

    async def discover(self, schemas: Sequence[str]) -> DiscoveredSchema:
        """§11.1/§11.3: tables and views of ``schemas``, system objects excluded, in 30 s."""
        return await self._discover(schemas, None)

    async def discover_tables(
        self, schemas: Sequence[str], names: Sequence[str]
    ) -> DiscoveredSchema:
        """:meth:`discover` for the tables named ``names`` only (the engine's
        ``NamedDiscovery``): PostgreSQL catalog matching is exact (§3.3), so the catalog is
        filtered by those exact names, and a job's planning no longer grows with the schema."""
        return await self._discover(schemas, sorted(set(names)))

    async def _discover(
        self, schemas: Sequence[str], names: Sequence[str] | None
    ) -> DiscoveredSchema:
        conn = self._require(Phase.DISCOVER)
        scope = sorted({s for s in schemas if not postgres_schema_excluded(s)})
        if not scope:
            return DiscoveredSchema(default_schema=DEFAULT_SCHEMA)
        sql, params = (_CATALOG_SQL, [scope]) if names is None else (_NAMED_SQL, [scope, names])
        with map_postgres_errors(Phase.DISCOVER, self._name):
            async with asyncio.timeout(DISCOVERY_TIMEOUT_SECONDS):
                cursor = await conn.execute(sql, params)
                rows = await cursor.fetchall()
        tables = _tables_from(rows, self._name)
        return DiscoveredSchema(default_schema=DEFAULT_SCHEMA, tables=tables)

    async def stream(self, query: TableQuery) -> AsyncIterator[Sequence[Row]]:
        """Rows through a server-side cursor, at most ``batch_size`` (and about
        ``BATCH_TARGET_BYTES``) at a time, encoded per §5.3.

        When :func:`layout_plan` covers every result column, each batch is laid out in C from
        the driver's tuples (:class:`~fetcher.adapters.jsonlayout.columns.LaidOutBatch`). Otherwise
        each batch is a :class:`~fetcher.adapters.jsonlayout.fastjson.FastRowBatch`: the columns
        and their names, which encode themselves (orjson) without a Python step per row; with the
        host's batch encoder process, a ``PreEncodedBatch`` encoded there
        (:func:`~fetcher.adapters.jsonlayout.encoder_process.encoded_batches`).
        """
        conn = self._require(Phase.QUERY)
        sql, params = select_sql(query)
        names = tuple(column.name for column in query.columns)
        json_columns = _json_columns(query.columns)
        with map_postgres_errors(Phase.QUERY, self._name, query.table):
            async with conn.transaction():
                cursor_name = f"fetcher_{secrets.token_hex(8)}"
                async with conn.cursor(name=cursor_name) as cursor:
                    await cursor.execute(sql, params)
                    converters = self._converters(query, cursor.description, conn)
                    plan = layout_plan(query, cursor.description or ()) if self.laid_out else None
                    if plan is not None:
                        general = partial(
                            _columns, converters=converters, names=names, datasource=self._name
                        )
                        laid_out = self._laid_out_batches(
                            cursor, conn, plan, general, names=names, json_columns=json_columns
                        )
                        async with aclosing(laid_out) as batches:
                            async for batch in batches:
                                yield batch
                                del batch  # handed on: not held while the next is made
                        return
                    sizer = BatchSizer(self._batch_size)
                    if self._encoder is not None:
                        self._encoder.start_soon()  # batches are encoded here until it is up
                        source = self._text_batches(cursor, conn, converters, names, sizer)
                        layout = (names, json_columns)
                        async with aclosing(
                            encoded_batches(self._encoder, source, layout)
                        ) as batches:
                            async for batch in batches:
                                yield batch
                                del batch
                        return
                    while rows := await self._fetch(cursor, conn, sizer):
                        columns = _columns(rows, converters, names, self._name)
                        yield FastRowBatch(names, columns, json_columns=json_columns)
                        del rows, columns  # not held while the next batch is fetched

    async def _laid_out_batches(
        self,
        cursor: AsyncCursor,
        conn: AsyncConn,
        plan: ColumnPlan,
        general: Callable[[list[tuple[Any, ...]]], list[Sequence[object]]],
        *,
        names: Sequence[str],
        json_columns: Sequence[int],
    ) -> AsyncGenerator[LaidOutBatch | FastRowBatch, None]:
        """The fast path's batches (:func:`layout_plan`), each laid out in C from the fetched
        tuples, with the next ``FETCH`` in flight meanwhile: the server writes rows (its share
        of the work) while this process lays them out, one batch ahead at most. A batch the
        layout declines takes the general path (``general``: the rows as converted columns),
        which also raises whatever that batch deserves."""
        sizer = BatchSizer(self._batch_size)
        pending = self._prefetch = asyncio.ensure_future(self._fetch(cursor, conn, sizer))
        try:
            while rows := await pending:
                pending = self._prefetch = asyncio.ensure_future(self._fetch(cursor, conn, sizer))
                await asyncio.sleep(0)  # the next FETCH leaves before this batch's work
                convert = partial(general, rows)
                laid = layout_columns(rows, plan)
                if laid is not None:
                    yield LaidOutBatch(names, len(rows), laid, convert, json_columns=json_columns)
                else:  # declined: the general path writes (or refuses) this batch
                    yield FastRowBatch(names, convert(), json_columns=json_columns)
                del rows, convert, laid  # written: not held while the next is laid out
        finally:
            await _cancel_fetch(pending)  # stopped early: a failed or cancelled job
            self._prefetch = None

    async def _text_batches(
        self,
        cursor: AsyncCursor,
        conn: AsyncConn,
        converters: Sequence[tuple[int, ColumnConverter]],
        names: Sequence[str],
        sizer: BatchSizer,
    ) -> AsyncGenerator[TextBatch, None]:
        """Each fetched batch for the encoder process: the ``json``/``jsonb`` columns (not
        arrays) left as text for it to parse, every other column converted here."""
        texts = {  # the json/jsonb result columns (not arrays) → canonical_ints
            index: _JSON_OIDS[column.type_code]
            for index, column in enumerate(cursor.description or ())
            if column.type_code in _JSON_OIDS
        }
        local = [(index, convert) for index, convert in converters if index not in texts]
        while rows := await self._fetch(cursor, conn, sizer):
            yield _columns(rows, local, names, self._name), texts

    async def _fetch(
        self, cursor: AsyncCursor, conn: AsyncConn, sizer: BatchSizer
    ) -> list[tuple[Any, ...]]:
        """The next batch of ``sizer.rows`` rows (bounded by bytes, see
        :mod:`~fetcher.adapters.batch_sizing`); one with text that is not UTF-8 is loaded
        again, tolerantly."""
        try:
            rows = await cursor.fetchmany(sizer.rows)
        except UnicodeDecodeError:
            if cursor.pgresult is None:
                raise
            rows = _tolerant_rows(cursor.pgresult, conn)
        sizer.observe(rows)
        return rows

    def _converters(
        self,
        query: TableQuery,
        description: Sequence[psycopg.Column] | None,
        conn: AsyncConn,
    ) -> list[tuple[int, ColumnConverter]]:
        """The column converters of one query (by result type), skipping final columns."""
        columns = query.columns
        names = [column.name for column in columns]
        result = result_columns(description, names, self._name, query.table.label)
        chosen = (
            (index, _column_converter(column, described.type_code, conn))
            for index, (column, described) in enumerate(zip(columns, result, strict=True))
        )
        return [(index, convert) for index, convert in chosen if convert is not None]


async def _cancel_fetch(fetch: asyncio.Task[list[tuple[Any, ...]]]) -> None:
    """End a ``FETCH`` still in flight: psycopg cancels it on the server, which may be slow (a
    view that sleeps per row), instead of waiting for its rows."""
    if not fetch.done():
        fetch.cancel()
        with suppress(psycopg.Error, OSError, asyncio.CancelledError):
            await fetch


def _json_columns(columns: Sequence[Column]) -> tuple[int, ...]:
    """Indices of the JSON columns (and arrays of JSON): their values are parsed by
    ``parse_json_column``/``parse_json_exact_fractions``, float-free by construction."""
    return tuple(
        index
        for index, column in enumerate(columns)
        if column.family is TypeFamily.JSON or column.native_type in {"_json", "_jsonb"}
    )


def _tables_from(rows: Sequence[tuple[Any, ...]], datasource: str) -> tuple[TableSchema, ...]:
    """Group catalog rows into ``TableSchema`` values; ``pg_*`` tables are dropped (§11.3).
    A row of another shape is the discovery failure naming the column."""
    grouped: dict[tuple[str, str], list[Column]] = {}
    for schema, table, column, data_type, udt_name, is_enum in catalog_rows(
        rows, _CATALOG_COLUMNS, datasource
    ):
        if postgres_schema_excluded(schema) or postgres_table_excluded(table):
            continue
        columns = grouped.setdefault((schema, table), [])
        if column is not None:
            typed = postgres_family(data_type, udt_name, is_enum=bool(is_enum))
            columns.append(Column(column, typed.family, typed.native_type))
    return tuple(
        TableSchema(schema=schema, name=table, columns=tuple(columns))
        for (schema, table), columns in grouped.items()
    )
