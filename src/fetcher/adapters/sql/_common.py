"""Shared pieces of the SQL connectors (contract §11.1, §11.3, §4.5).

Each adapter keeps its own ``map_<engine>_errors()`` context manager (it knows its driver's
exception types); this module holds what they share: the fixed §4.5 failure texts, the §11.1
timeouts, the default batch size, the §11.3 exclusion predicates and the translation step
itself.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from fetcher.adapters.jsonlayout import BatchEncoder
from fetcher.engine import ConnectionDescriptor, EngineError, ErrorCategory
from fetcher.engine.kit import JsonDepthError, TableSchema, query_error

__all__ = [
    "CONNECT_TIMEOUT_SECONDS",
    "DEFAULT_BATCH_SIZE",
    "DISCOVERY_TIMEOUT_SECONDS",
    "CatalogColumn",
    "NetworkConnector",
    "Phase",
    "ServerNameContext",
    "catalog_rows",
    "catalog_type_error",
    "engine_error",
    "result_columns",
    "transposed",
    "mysql_schema_excluded",
    "nullable",
    "oracle_owner_excluded",
    "oracle_table_excluded",
    "postgres_schema_excluded",
    "postgres_table_excluded",
    "sqlserver_schema_excluded",
    "sqlite_name_excluded",
    "translate_errors",
]

#: §11.1: connect within 10 s.
CONNECT_TIMEOUT_SECONDS = 10
#: §11.1: discovery within 30 s.
DISCOVERY_TIMEOUT_SECONDS = 30
#: §4.3 step 3: rows are streamed in batches; the size is implementation-defined.
DEFAULT_BATCH_SIZE = 2_000


class ServerNameContext(ssl.SSLContext):
    """An SSLContext that decides, at wrap time, the server name the TLS session presents for
    SNI and checks the certificate against (:meth:`server_name`), whatever address the driver
    dialled: with the SSRF guard the vetted IP is dialled and the connection's host name is kept
    for TLS (§2.9.1 rule 3). The base keeps the driver's name."""

    def server_name(self, requested: str | bytes | None) -> str | bytes | None:
        """The name to use instead of ``requested`` (the one the driver passed)."""
        return requested

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        name = self.server_name(server_hostname)
        return super().wrap_bio(incoming, outgoing, server_side, name, session)


#: §11.3: PostgreSQL system schemas (``pg_toast*`` is matched by prefix).
_PG_SYSTEM_SCHEMAS = frozenset({"pg_catalog", "information_schema"})


class NetworkConnector:
    """What every networked connector is built from: the registry's one constructor call
    (``SqlConnectorRegistry.connector_for``), the batch size, the SSRF pre-dial's pinned
    address (§2.9.1 rule 3) and the host's batch encoder process, for the connectors that hand
    it their batches (PostgreSQL). Subclasses declare their own session state as class
    defaults."""

    def __init__(
        self,
        connection: ConnectionDescriptor,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        pinned_address: str | None = None,
        encoder: BatchEncoder | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be positive")
        self._connection = connection
        self._batch_size = batch_size
        self._pinned_address = pinned_address
        self._encoder = encoder

    @property
    def _name(self) -> str:
        return self._connection.config_name


class Phase(StrEnum):
    """Where a driver failure happened; it picks the §4.5 category and fixed text."""

    CONNECT = "connect"
    DISCOVER = "discover"
    QUERY = "query"


def engine_error(phase: Phase, datasource: str, detail: str | None = None) -> EngineError:
    """The §4.5 ``EngineError`` for ``phase``; ``detail`` is driver text (hosts redact it)."""
    if phase is Phase.CONNECT:
        return EngineError(
            ErrorCategory.CONNECT,
            f"failed to connect to datasource '{datasource}'",
            detail=detail,
        )
    if phase is Phase.DISCOVER:
        return EngineError(
            ErrorCategory.UNAVAILABLE,
            f"failed to discover datasource schema '{datasource}'",
            detail=detail,
        )
    return query_error(datasource, detail)


def _detail(exc: BaseException) -> str:
    """Driver text for ``detail``: the exception text, or its type when the text is empty."""
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc).strip()
    return text or type(exc).__name__


@contextmanager
def translate_errors(
    phase: Phase,
    datasource: str,
    driver_errors: tuple[type[Exception], ...],
    *,
    table: TableSchema | None = None,
) -> Iterator[None]:
    """Turn ``driver_errors`` (plus ``OSError`` and timeouts) into the §4.5 ``EngineError``.

    An ``EngineError`` raised inside passes through unchanged. The original exception is kept as
    ``__cause__`` for debugging; only its text reaches ``detail``, never a DSN or password (the
    connectors pass credentials as keyword arguments, which drivers do not echo).

    A value nested deeper than ``MAX_JSON_DEPTH`` (the engine's ``JsonDepthError``, raised by a
    JSON parser or value encoder while a batch is converted) fails the same way, its detail
    naming the column (when the connector named it) and ``table`` (the one streamed):
    ``failed to query datasource '<ds>': column 'c' of table 't' holds a JSON value nested
    deeper than 250 levels``.
    """
    caught: tuple[type[Exception], ...] = (*driver_errors, OSError, TimeoutError)
    try:
        yield
    except EngineError:
        raise
    except JsonDepthError as exc:
        located = exc.located(table=None if table is None else table.label)
        raise engine_error(phase, datasource, located.detail) from None
    except caught as exc:
        raise engine_error(phase, datasource, _detail(exc)) from exc


# --- answers of a shape the connector does not expect (§4.5, §2.6) -------------------------
#
# A source's catalog or result answer is data from a server we do not control. One of a shape
# the code does not expect (one int column where six are expected, a name that is a number)
# fails the discovery or the query it belongs to, with the column named, instead of escaping
# as an unpacking or attribute error (an "internal error", a 500).

_Described = TypeVar("_Described")


@dataclass(frozen=True, slots=True)
class CatalogColumn:
    """One column of a catalog query: its name and the Python types its values may have."""

    name: str
    kinds: tuple[type, ...] = (str,)


def nullable(name: str, *kinds: type) -> CatalogColumn:
    """A catalog column that may be NULL (a table without columns, an unknown scale)."""
    return CatalogColumn(name, (*(kinds or (str,)), type(None)))


def catalog_rows(
    rows: Iterable[object], columns: Sequence[CatalogColumn], datasource: str
) -> Iterator[tuple[Any, ...]]:
    """Each catalog row as a tuple of exactly ``len(columns)`` values of the declared types;
    otherwise the §4.5 discovery failure (``/schema`` → 502 FET-1042) naming the column."""
    for row in rows:
        values = _row_values(row)
        if len(values) != len(columns):
            names = ", ".join(column.name for column in columns)
            detail = (
                f"the catalog answered a row of {len(values)} value(s) where {len(columns)} "
                f"are expected ({names})"
            )
            raise engine_error(Phase.DISCOVER, datasource, detail)
        for value, column in zip(values, columns, strict=True):
            if not isinstance(value, column.kinds):
                raise catalog_type_error(datasource, column.name, value)
        yield values


def _row_values(row: object) -> tuple[Any, ...]:
    """A driver row (a tuple, a ``pyodbc.Row``, …) as a tuple; anything else as one value."""
    if isinstance(row, str | bytes | bytearray) or not isinstance(row, Iterable):
        return (row,)
    return tuple(row)


def catalog_type_error(datasource: str, column: str, value: object) -> EngineError:
    """The §4.5 discovery failure for a catalog ``column`` holding an unexpected value."""
    detail = f"the catalog column '{column}' holds a {type(value).__name__} value"
    return engine_error(Phase.DISCOVER, datasource, detail)


def result_columns(
    description: Sequence[_Described] | None, names: Sequence[str], datasource: str, table: str
) -> Sequence[_Described]:
    """A result's column ``description`` when it has one column per selected name, else the
    §4.5 query failure naming the selected columns."""
    if description is not None and len(description) == len(names):
        return description
    got = "no" if description is None else str(len(description))
    detail = (
        f"table '{table}' answered {got} result column(s) where {len(names)} are selected "
        f"({', '.join(names)})"
    )
    raise engine_error(Phase.QUERY, datasource, detail)


def transposed(
    rows: Sequence[Sequence[Any]], names: Sequence[str], datasource: str
) -> list[tuple[Any, ...]]:
    """The columns of a fetched batch (one tuple per selected column, ``names``); a row of
    another width is the §4.5 query failure naming the selected columns."""
    try:
        columns = list(zip(*rows, strict=True))
    except (ValueError, TypeError):
        columns = []
    if rows and len(columns) != len(names):
        widths = "/".join(sorted({str(len(row)) for row in rows if isinstance(row, Sequence)}))
        detail = (
            f"the source answered rows of {widths or '?'} value(s) where {len(names)} "
            f"columns are selected ({', '.join(names)})"
        )
        raise engine_error(Phase.QUERY, datasource, detail)
    return columns


#: §11.3: MySQL/MariaDB system schemas (database names; compared case-insensitively, as
#: MySQL does for ``information_schema`` and on case-insensitive file systems).
_MYSQL_SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})


def mysql_schema_excluded(schema: str) -> bool:
    """§11.3: ``mysql``, ``information_schema``, ``performance_schema`` and ``sys`` are never
    discovered."""
    return schema.casefold() in _MYSQL_SYSTEM_SCHEMAS


def postgres_schema_excluded(schema: str) -> bool:
    """§11.3: ``pg_catalog``, ``information_schema`` and ``pg_toast*`` are never discovered."""
    return schema in _PG_SYSTEM_SCHEMAS or schema.startswith("pg_toast")


def postgres_table_excluded(table: str) -> bool:
    """§11.3: PostgreSQL tables named ``pg_*`` are system objects."""
    return table.startswith("pg_")


def sqlite_name_excluded(name: str) -> bool:
    """§11.3: SQLite names starting ``sqlite_`` (SQLite reserves them case-insensitively)."""
    return name.casefold().startswith("sqlite_")


#: §11.3: SQL Server system schemas (``db_*`` is matched by prefix).
_MSSQL_SYSTEM_SCHEMAS = frozenset({"sys", "information_schema", "guest"})


def sqlserver_schema_excluded(schema: str) -> bool:
    """§11.3: ``sys``, ``INFORMATION_SCHEMA``, ``db_*`` and ``guest`` are never discovered.

    Compared case-insensitively: under the usual case-insensitive catalog collation ``SYS`` and
    ``sys`` name the same schema."""
    folded = schema.casefold()
    return folded in _MSSQL_SYSTEM_SCHEMAS or folded.startswith("db_")


#: §11.3: Oracle-maintained owners (``APEX_*`` is matched by prefix).
_ORACLE_SYSTEM_OWNERS = frozenset(
    {
        "SYS", "SYSTEM", "OUTLN", "XDB", "MDSYS", "CTXSYS", "DBSNMP", "WMSYS", "EXFSYS",
        "ORDSYS", "ORDDATA", "ORDPLUGINS", "SI_INFORMTN_SCHEMA", "APEX_PUBLIC_USER",
        "FLOWS_FILES", "ANONYMOUS",
    }
)  # fmt: skip
#: §11.3: prefixes of Oracle system table names.
_ORACLE_SYSTEM_PREFIXES = ("LOGMNR", "REDO_", "MVIEW$", "AQ$", "DEF$", "REPCAT$", "SQLPLUS_")


def oracle_owner_excluded(owner: str) -> bool:
    """§11.3: the Oracle-maintained owners and ``APEX_*`` are never discovered."""
    return owner in _ORACLE_SYSTEM_OWNERS or owner.startswith("APEX_")


def oracle_table_excluded(name: str) -> bool:
    """§11.3: names containing ``$``, the system prefixes, and ``PLAN_TABLE``."""
    return "$" in name or name.startswith(_ORACLE_SYSTEM_PREFIXES) or name == "PLAN_TABLE"
