"""The SQL Server connector without a server (none can run here): the braced connection string as
the driver's own parser reads it, the §11.2 Encrypt modes, every rendered statement parsed as
T-SQL, §11.4 families, §5.3 encodings of the driver's Python values, error translation with
redacted details, and the driver's own bounded thread pool."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import time
import uuid
from decimal import Decimal
from typing import Any

import mssql_python
import pytest
import sqlglot
from mssql_python.connection_string_parser import _ConnectionStringParser
from mssql_python.exceptions import ConnectionStringParseError
from mssql_python.pooling import PoolingManager

from fetcher.adapters.sql import sqlserver
from fetcher.adapters.sql._common import Phase, sqlserver_schema_excluded
from fetcher.adapters.sql.sqlserver import (
    MSSQL_THREADS,
    PROBE_SQL,
    SqlServerConnector,
    catalog_sql,
    column_converter,
    connection_string,
    map_sqlserver_errors,
    odbc_value,
    select_sql,
    sqlserver_family,
    tables_from,
    tls_options,
)
from fetcher.crypto.redact import Redactor
from fetcher.engine.errors import EngineError, ErrorCategory
from fetcher.engine.filters.ast import BoundCondition, BoundFieldFilter, Operator
from fetcher.engine.model import ConnectionDescriptor, TlsSettings
from fetcher.engine.ports import TableQuery
from fetcher.engine.types import Column, EngineType, TableSchema, TypeFamily

PASSWORD = "p}w;d={x}"


def descriptor(**overrides: object) -> ConnectionDescriptor:
    values: dict[str, object] = {
        "config_name": "mssql",
        "type": EngineType.SQL_SERVER,
        "host": "db.example.com",
        "port": 14330,
        "database": "ledger db",
        "username": "reader",
        "password": PASSWORD,
    }
    values.update(overrides)
    return ConnectionDescriptor(**values)  # type: ignore[arg-type]


def parsed(conn_str: str) -> dict[str, str]:
    """The connection string as mssql-python's own (validating) parser reads it, with the
    driver's canonical key names."""
    raw = _ConnectionStringParser(validate_keywords=True)._parse(conn_str)
    return dict(_ConnectionStringParser._normalize_params(raw, warn_rejected=False))


# --------------------------------------------------------------------------------------------
# Connection string (§2.9.1) and Encrypt modes (§11.2)
# --------------------------------------------------------------------------------------------


def test_values_are_braced_with_closing_braces_doubled() -> None:
    assert odbc_value("a}b") == "{a}}b}"
    assert odbc_value("") == "{}"
    conn_str = connection_string(descriptor())
    assert conn_str.startswith("Server={db.example.com,14330};Database={ledger db};")
    assert "PWD={p}}w;d={x}}}" in conn_str


def test_driver_reads_exactly_the_intended_values() -> None:
    hostile = descriptor(
        username="u};Encrypt=no;{",
        password="x};Server={evil,1};PWD={y",
        database="db}x",
    )
    assert parsed(connection_string(hostile)) == {
        "Server": "db.example.com,14330",
        "Database": "db}x",
        "UID": "u};Encrypt=no;{",
        "PWD": "x};Server={evil,1};PWD={y",
        "ApplicationIntent": "ReadOnly",
        "Encrypt": "no",
    }


def test_default_port_and_pinned_address() -> None:
    values = parsed(connection_string(descriptor(port=None), pinned_address="203.0.113.9"))
    assert values["Server"] == "203.0.113.9,1433"
    assert "HostnameInCertificate" not in values  # no TLS, nothing to verify


@pytest.mark.parametrize(
    ("mode", "options"),
    [
        (None, {"Encrypt": "no"}),
        ("", {"Encrypt": "no"}),
        ("disable", {"Encrypt": "no"}),
        ("false", {"Encrypt": "no"}),
        ("true", {"Encrypt": "yes", "TrustServerCertificate": "yes"}),
        ("strict", {"Encrypt": "strict"}),
    ],
)
def test_encrypt_modes(mode: str | None, options: dict[str, str]) -> None:
    tls = None if mode is None else TlsSettings(mode, ca="-----BEGIN CERTIFICATE-----")
    values = parsed(connection_string(descriptor(ssl=tls)))
    chosen = {k: v for k, v in values.items() if k in {"Encrypt", "TrustServerCertificate"}}
    assert chosen == options
    assert values["ApplicationIntent"] == "ReadOnly"
    assert "ServerCertificate" not in values  # ssl.ca is ignored (§11.2)


@pytest.mark.parametrize("mode", ["true", "strict"])
def test_pinned_tls_keeps_the_name_for_the_certificate(mode: str) -> None:
    values = parsed(connection_string(descriptor(ssl=TlsSettings(mode)), "203.0.113.9"))
    assert values["Server"] == "203.0.113.9,14330"
    assert values["HostnameInCertificate"] == "db.example.com"


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match=r"unsupported ssl\.mode"):
        tls_options(TlsSettings("verify-full"))


# --------------------------------------------------------------------------------------------
# SQL: every rendered statement parses as T-SQL
# --------------------------------------------------------------------------------------------

ID = Column("id", TypeFamily.INTEGER, "int")
NAME = Column("Name", TypeFamily.TEXT, "nvarchar")
GUID = Column("guid", TypeFamily.UUID, "uniqueidentifier")
SEEN = Column("seen", TypeFamily.TIMESTAMPTZ, "datetimeoffset")
ODD = Column("we]ird; DROP", TypeFamily.TEXT, "varchar")
NODE = Column("node", TypeFamily.OTHER, "hierarchyid")
PLACE = Column("place", TypeFamily.OTHER, "geography")
VARIANT = Column("v", TypeFamily.OTHER, "sql_variant")


def parse_tsql(sql: str, params: int) -> sqlglot.exp.Expr:
    assert sql.count("?") == params
    return sqlglot.parse_one(sql, read="tsql")


def every_operator() -> tuple[BoundFieldFilter, ...]:
    c = BoundCondition
    return (
        BoundFieldFilter(
            ID,
            (
                c(Operator.EQ, (1,)),
                c(Operator.EQ, (1, 2, None)),
                c(Operator.NE, (3, None)),
                c(Operator.GT, (0,)),
                c(Operator.GTE, (0,)),
                c(Operator.LT, (9,)),
                c(Operator.LTE, (9,)),
                c(Operator.BETWEEN, (1, 5)),
                c(Operator.IN, (1, None)),
                c(Operator.NIN, (7, None)),
                c(Operator.EQ, (None,)),
            ),
        ),
        BoundFieldFilter(NAME, (c(Operator.LIKE, ("a[b]%_\\%",)),)),
        BoundFieldFilter(GUID, (c(Operator.EQ, (uuid.UUID(int=1),)),)),
        BoundFieldFilter(
            SEEN,
            (
                c(
                    Operator.BETWEEN,
                    (
                        dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
                        dt.datetime(2026, 1, 2, tzinfo=dt.UTC),
                    ),
                    upper_exclusive=True,
                ),
            ),
        ),
        BoundFieldFilter(ODD, (c(Operator.NE, ("x' OR '1'='1",)),)),
    )


def query(columns: tuple[Column, ...], filters: tuple[BoundFieldFilter, ...] = ()) -> TableQuery:
    table = TableSchema("sales", "Orders", (ID, NAME, GUID, SEEN, ODD, NODE, PLACE, VARIANT))
    return TableQuery(table, columns, filters)


def test_probe_parses() -> None:
    assert parse_tsql(PROBE_SQL, 0) is not None


@pytest.mark.parametrize("schemas", [1, 3, 20])
def test_catalog_query_parses(schemas: int) -> None:
    tree = parse_tsql(catalog_sql(schemas), schemas)
    tables = {t.name.upper() for t in tree.find_all(sqlglot.exp.Table)}
    assert tables == {"TABLES", "COLUMNS"}
    with pytest.raises(ValueError, match="at least one schema"):
        catalog_sql(0)


def test_select_with_every_operator_parses() -> None:
    sql, params = select_sql(query((ID, NAME, GUID, SEEN, ODD), every_operator()))
    parse_tsql(sql, len(params))
    assert sql.startswith(
        "SELECT [id], [Name], [guid], [seen], [we]]ird; DROP] FROM [sales].[Orders]"
    )
    assert "[Name] LIKE ? ESCAPE '\\'" in sql
    assert "a\\[b]%_\\%" in params  # ``[`` is a literal under ESCAPE '\' (§3.4)
    assert "x' OR '1'='1" in params
    assert "OR '1'" not in sql
    assert str(uuid.UUID(int=1)) in params  # converted to uniqueidentifier by the server
    assert [p for p in params if isinstance(p, dt.datetime)] == [
        dt.datetime(2026, 1, 1),
        dt.datetime(2026, 1, 2),
    ]  # aware bounds as naive UTC: a datetime2 compared with datetimeoffset is UTC


def test_clr_types_and_variants_are_read_as_text_under_their_names() -> None:
    sql, params = select_sql(query((ID, NODE, PLACE, VARIANT), every_operator()[:1]))
    parse_tsql(sql, len(params))
    assert sql.startswith(
        "SELECT [id], [node].ToString() AS [node], [place].ToString() AS [place], "
        "CAST([v] AS NVARCHAR(4000)) AS [v] FROM (SELECT [id], [node], [place], [v] FROM "
    )
    assert sql.endswith(") AS [fetcher_rows]")
    plain, _ = select_sql(query((ID, NAME)))
    assert plain == "SELECT [id], [Name] FROM [sales].[Orders]"


# --------------------------------------------------------------------------------------------
# Families (§11.4) and discovery rows (§11.3)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data_type", "family"),
    [
        *((t, TypeFamily.INTEGER) for t in ("tinyint", "smallint", "int", "bigint")),
        *((t, TypeFamily.DECIMAL) for t in ("decimal", "numeric", "money", "smallmoney")),
        *((t, TypeFamily.FLOAT) for t in ("real", "float")),
        ("bit", TypeFamily.BOOLEAN),
        *(
            (t, TypeFamily.TEXT)
            for t in ("char", "varchar", "nchar", "nvarchar", "text", "ntext", "xml")
        ),
        ("date", TypeFamily.DATE),
        *((t, TypeFamily.TIMESTAMP) for t in ("datetime", "datetime2", "smalldatetime")),
        ("datetimeoffset", TypeFamily.TIMESTAMPTZ),
        ("time", TypeFamily.TIME),
        ("uniqueidentifier", TypeFamily.UUID),
        *((t, TypeFamily.BYTES) for t in ("binary", "varbinary", "image")),
        *((t, TypeFamily.OTHER) for t in ("sql_variant", "hierarchyid", "geography", "timestamp")),
        ("INT", TypeFamily.INTEGER),
    ],
)
def test_families(data_type: str, family: TypeFamily) -> None:
    assert sqlserver_family(data_type) is family


def test_system_schemas_are_excluded() -> None:
    for schema in ("sys", "SYS", "INFORMATION_SCHEMA", "db_owner", "db_datareader", "guest"):
        assert sqlserver_schema_excluded(schema)
    for schema in ("dbo", "sales", "dbx", "guests"):
        assert not sqlserver_schema_excluded(schema)


def test_tables_from_keeps_empty_tables_and_drops_system_schemas() -> None:
    rows = [
        ("dbo", "Orders", "id", "int"),
        ("dbo", "Orders", "total", "money"),
        ("dbo", "empty_view", None, None),
        ("sys", "objects", "name", "sysname"),
        ("db_owner", "t", "x", "int"),
    ]
    tables = tables_from(rows, "ds")
    assert [(t.schema, t.name) for t in tables] == [("dbo", "Orders"), ("dbo", "empty_view")]
    assert tables[0].columns == (
        Column("id", TypeFamily.INTEGER, "int"),
        Column("total", TypeFamily.DECIMAL, "money"),
    )
    assert tables[1].columns == ()


# --------------------------------------------------------------------------------------------
# Values (§5.3), built as mssql-python returns them
# --------------------------------------------------------------------------------------------


def convert(native: str, values: list[object]) -> list[object]:
    column = Column("c", sqlserver_family(native), native)
    return list(column_converter(column)(values))


def test_values() -> None:
    guid = uuid.UUID("6F9619FF-8B86-D011-B42D-00C04FC964FF")
    assert convert("uniqueidentifier", [guid, None]) == [
        "6f9619ff-8b86-d011-b42d-00c04fc964ff",
        None,
    ]
    offset = dt.timezone(dt.timedelta(hours=-3))
    assert convert("datetimeoffset", [dt.datetime(2026, 1, 2, 21, 0, 0, 500000, offset)]) == [
        "2026-01-03T00:00:00.5Z"
    ]
    assert convert("datetime2", [dt.datetime(2026, 1, 2, 3, 4, 5)]) == ["2026-01-02T03:04:05Z"]
    assert convert("date", [dt.date(2026, 1, 2)]) == ["2026-01-02"]
    assert convert("time", [dt.time(23, 59, 59, 120000)]) == ["23:59:59.12"]
    assert convert("money", [Decimal("1500.0000"), Decimal("-0.0100")]) == ["1500.0000", "-0.0100"]
    assert convert("decimal", [Decimal("1E+3")]) == ["1000"]
    assert convert("bit", [True, False]) == [True, False]
    assert convert("bigint", [2**62]) == [2**62]
    assert convert("varbinary", [b"\x00\xff", bytearray(b"ab")]) == ["AP8=", "YWI="]
    assert convert("xml", ["<a>1</a>"]) == ["<a>1</a>"]
    assert convert("nvarchar", ["a\udc00b"]) == ["a\ufffdb"]
    assert convert("real", [0.10000000149011612]) == [0.1]
    assert convert("float", [float("inf"), 0.1]) == ["Infinity", 0.1]
    assert convert("sql_variant", ["42"]) == ["42"]


# --------------------------------------------------------------------------------------------
# Errors (§4.5, §8.7)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "category", "fixed"),
    [
        (Phase.CONNECT, ErrorCategory.CONNECT, "failed to connect to datasource 'mssql'"),
        (Phase.DISCOVER, ErrorCategory.UNAVAILABLE, "failed to discover datasource schema 'mssql'"),
        (Phase.QUERY, ErrorCategory.UNAVAILABLE, "failed to query datasource 'mssql'"),
    ],
)
def test_driver_errors_map_by_phase(phase: Phase, category: ErrorCategory, fixed: str) -> None:
    error = mssql_python.OperationalError(
        driver_error="Login failed",
        ddbc_error=(
            "[Microsoft][ODBC Driver 18 for SQL Server][SQL Server]Login failed for user 'reader'."
        ),
    )
    with pytest.raises(EngineError) as caught, map_sqlserver_errors(phase, "mssql"):
        raise error
    assert caught.value.category is category
    assert caught.value.message == fixed
    assert caught.value.detail is not None
    assert "Login failed for user 'reader'" in caught.value.detail


def test_connection_string_errors_never_quote_the_string() -> None:
    with pytest.raises(EngineError) as caught, map_sqlserver_errors(Phase.CONNECT, "mssql"):
        raise ConnectionStringParseError([f"bad value near PWD={PASSWORD}"])
    assert caught.value.detail == "invalid connection parameters"


async def test_closed_port_is_a_redacted_connect_failure(unused_tcp_port: int) -> None:
    connection = descriptor(host="127.0.0.1", port=unused_tcp_port)
    started = time.monotonic()
    with pytest.raises(EngineError) as caught:
        async with SqlServerConnector(connection):
            pass
    assert time.monotonic() - started < 14  # the 10 s login timeout, with margin
    error = caught.value
    assert error.category is ErrorCategory.CONNECT
    redacted = error.text(Redactor(secrets=[PASSWORD], hosts=["127.0.0.1"]))
    assert redacted.startswith("failed to connect to datasource 'mssql': ")
    assert "not supported" not in redacted
    assert PASSWORD not in redacted
    assert "127.0.0.1" not in redacted


async def test_unopened_connector_refuses_work_and_closes_twice() -> None:
    connector = SqlServerConnector(descriptor())
    with pytest.raises(EngineError) as caught:
        await connector.probe()
    assert caught.value.message == "failed to connect to datasource 'mssql'"
    await connector.__aexit__(None, None, None)
    await connector.__aexit__(None, None, None)
    with pytest.raises(ValueError, match="batch_size"):
        SqlServerConnector(descriptor(), batch_size=0)


# --------------------------------------------------------------------------------------------
# The driver's own bounded thread pool (§13 "Blocking work")
# --------------------------------------------------------------------------------------------


def test_pool_is_bounded_and_driver_pooling_off() -> None:
    pool = sqlserver._executor()
    assert pool is sqlserver._executor()
    assert pool._max_workers == MSSQL_THREADS
    assert PoolingManager.is_initialized()
    assert not PoolingManager.is_enabled()


async def test_driver_calls_never_block_the_event_loop() -> None:
    connector = SqlServerConnector(descriptor())
    names: list[str] = []

    def blocking() -> str:
        names.append(threading.current_thread().name)
        time.sleep(0.3)
        return "done"

    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        assert await connector._call(blocking) == "done"
    finally:
        task.cancel()
    assert ticks >= 10
    assert names[0].startswith("fetcher-mssql")


class _Recorder:
    """Stands in for a driver connection: records when it is closed."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def close(self) -> None:
        self.events.append("close")


async def test_cancelled_call_finishes_before_the_connection_closes() -> None:
    events: list[str] = []
    connector = SqlServerConnector(descriptor())
    connector._conn = _Recorder(events)

    def slow_fetch() -> None:
        time.sleep(0.2)
        events.append("fetched")

    task = asyncio.create_task(connector._call(slow_fetch))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await connector.__aexit__(None, None, None)
    assert events == ["fetched", "close"]


async def test_abandoned_connect_closes_its_late_connection() -> None:
    events: list[str] = []
    connector = SqlServerConnector(descriptor())
    release = threading.Event()

    def slow_open() -> Any:
        release.wait(2)
        return _Recorder(events)

    task = asyncio.create_task(connector._call(slow_open))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    connector._discard_late_connection()
    release.set()
    for _ in range(100):
        if events:
            break
        await asyncio.sleep(0.01)
    assert events == ["close"]


async def test_cancelling_the_close_propagates_and_still_closes() -> None:
    events: list[str] = []
    connector = SqlServerConnector(descriptor())
    connector._conn = _Recorder(events)
    release = threading.Event()

    def slow_fetch() -> None:
        release.wait(2)
        events.append("fetched")

    call = asyncio.create_task(connector._call(slow_fetch))
    await asyncio.sleep(0.05)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    closer = asyncio.create_task(connector.__aexit__(None, None, None))
    await asyncio.sleep(0.05)
    closer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closer
    release.set()
    for _ in range(200):
        if len(events) == 2:
            break
        await asyncio.sleep(0.01)
    assert events == ["fetched", "close"]


class _RowsCursor:
    """A forward-only cursor over ``rows`` that records each ``fetchmany`` size."""

    def __init__(self, rows: list[tuple[object, ...]]) -> None:
        self.rows = rows
        self.sizes: list[int] = []
        self.description = [("id",), ("Name",)]

    def execute(self, _sql: str, *_params: object) -> None:
        pass

    def fetchmany(self, size: int) -> list[tuple[object, ...]]:
        self.sizes.append(size)
        taken, self.rows = self.rows[:size], self.rows[size:]
        return taken

    def close(self) -> None:
        pass


async def test_stream_fetches_are_sized_by_bytes() -> None:
    """``fetcher.adapters.batch_sizing``: a small first fetch, then about
    ``BATCH_TARGET_BYTES`` of rows, never more than ``batch_size``."""
    from fetcher.adapters.batch_sizing import BATCH_TARGET_BYTES, FIRST_BATCH_ROWS

    width = 100_000
    cursor = _RowsCursor([(n, "w" * width) for n in range(100)])
    connector = SqlServerConnector(descriptor(), batch_size=2_000)
    connector._conn = type("Conn", (), {"cursor": lambda self: cursor})()
    table = TableSchema("dbo", "wide", (ID, NAME))
    rows = [row async for batch in connector.stream(TableQuery(table, (ID, NAME))) for row in batch]
    assert [row["id"] for row in rows] == list(range(100))
    per_batch = BATCH_TARGET_BYTES // (width + 8)
    assert cursor.sizes[:3] == [FIRST_BATCH_ROWS, per_batch, per_batch]
