"""SQL Server under the contract suite, gated on ``FETCHER_TEST_MSSQL_URL`` (no SQL Server can
run on this machine, so this plugin has never run here).

``FETCHER_TEST_MSSQL_URL=mssql://<admin>:<password>@<host>:<port>/?ssl=<mode>``: an admin login
(``sa``) that may create databases and logins; ``ssl`` is the §11.2 mode used by the admin
session and the reader (default ``true``: TLS, server certificate trusted). Per session the
plugin creates a fresh database, the dataset in ``dbo`` (§3.3 ``d``), a table in another schema
that must not be discovered, and a reader login with a password in ``db_datareader``.
"""

from __future__ import annotations

import asyncio
import os
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, date, datetime, time
from typing import Any, TypeVar
from uuid import UUID

import pytest

from fetcher.adapters.sql.registry import SqlConnectorRegistry
from fetcher.adapters.sql.sqlserver import odbc_value, tls_options
from fetcher.engine import ConnectionDescriptor, ConnectorRegistry
from fetcher.engine.model import TlsSettings
from fetcher.engine.types import EngineType, TypeFamily
from tests.contract.dataset import (
    BULK,
    BULK_PAD,
    BULK_ROWS,
    Collation,
    ColumnSpec,
    Dataset,
    TableSpec,
)
from tests.contract.engines import LoadedDataset
from tests.contract.engines._common import (
    ALL_FAMILIES,
    closed_port,
    default_expected,
    fresh_name,
    fresh_password,
)

URL_VARIABLE = "FETCHER_TEST_MSSQL_URL"
SKIP_REASON = "no SQL Server server can run on this machine; set FETCHER_TEST_MSSQL_URL to run"

_T = TypeVar("_T")

_TYPES = {
    TypeFamily.INTEGER: "BIGINT",
    TypeFamily.DECIMAL: "DECIMAL(12, 2)",
    TypeFamily.FLOAT: "FLOAT",
    TypeFamily.BOOLEAN: "BIT",
    TypeFamily.TEXT: "NVARCHAR(1000)",
    TypeFamily.DATE: "DATE",
    TypeFamily.TIMESTAMP: "DATETIME2(6)",
    TypeFamily.TIMESTAMPTZ: "DATETIMEOFFSET(6)",
    TypeFamily.TIME: "TIME(6)",
    TypeFamily.UUID: "UNIQUEIDENTIFIER",
    TypeFamily.BYTES: "VARBINARY(MAX)",
}


def quote(name: str) -> str:
    return "[" + name.replace("]", "]]") + "]"


def literal(text: str) -> str:
    """An ``N'…'`` literal (``CREATE LOGIN`` takes no parameters)."""
    return "N'" + text.replace("'", "''") + "'"


def _stored(value: object) -> object:
    """Temporal and UUID values as the text forms SQL Server converts implicitly and exactly."""
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f +00:00")
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    return value


def _admin_url() -> urllib.parse.SplitResult:
    raw = os.environ.get(URL_VARIABLE, "")
    if not raw:
        pytest.skip(SKIP_REASON)
    return urllib.parse.urlsplit(raw)


def _mode(url: urllib.parse.SplitResult) -> str:
    return urllib.parse.parse_qs(url.query).get("ssl", ["true"])[0]


def _admin_string(url: urllib.parse.SplitResult, database: str = "master") -> str:
    tls = ";".join(tls_options(TlsSettings(_mode(url))))
    user = urllib.parse.unquote(url.username or "sa")
    password = urllib.parse.unquote(url.password or "")
    server = f"{url.hostname},{url.port or 1433}"
    return (
        f"Server={odbc_value(server)};Database={odbc_value(database)};UID={odbc_value(user)};"
        f"PWD={odbc_value(password)};{tls}"
    )


def _run(url: urllib.parse.SplitResult, database: str, work: Callable[[Any], _T]) -> _T:
    import mssql_python

    conn = mssql_python.connect(_admin_string(url, database), autocommit=True, timeout=10)
    try:
        cursor = conn.cursor()
        try:
            return work(cursor)
        finally:
            cursor.close()
    finally:
        conn.close()


async def admin(url: urllib.parse.SplitResult, database: str, work: Callable[[Any], _T]) -> _T:
    return await asyncio.to_thread(_run, url, database, work)


def _create(cursor: Any, table: TableSpec) -> None:
    columns = ", ".join(f"{quote(c.name)} {_TYPES[c.family]}" for c in table.columns)
    cursor.execute(f"CREATE TABLE dbo.{quote(table.name)} ({columns})")
    if table.rows:
        names = [c.name for c in table.columns]
        cursor.executemany(
            f"INSERT INTO dbo.{quote(table.name)} ({', '.join(quote(n) for n in names)}) "
            f"VALUES ({', '.join('?' for _ in names)})",
            [tuple(_stored(row[n]) for n in names) for row in table.rows],
        )


def _populate(dataset: Dataset, reader: str, password: str) -> Callable[[Any], None]:
    def work(cursor: Any) -> None:
        for table in dataset.tables:
            if not table.is_view:
                _create(cursor, table)
        cursor.execute(
            f"INSERT INTO dbo.{BULK} (n, pad) SELECT TOP ({BULK_ROWS}) "
            f"ROW_NUMBER() OVER (ORDER BY (SELECT NULL)), REPLICATE(N'x', {BULK_PAD}) "
            "FROM sys.all_objects AS a CROSS JOIN sys.all_objects AS b"
        )
        if dataset.view is not None:
            cursor.execute(
                "CREATE VIEW dbo.contract_view AS SELECT id, txt FROM dbo.contract_items"
            )
        cursor.execute("CREATE SCHEMA ct_other")
        cursor.execute("CREATE TABLE ct_other.contract_outside (x INT)")
        cursor.execute(f"CREATE USER {quote(reader)} FOR LOGIN {quote(reader)}")
        cursor.execute(f"ALTER ROLE db_datareader ADD MEMBER {quote(reader)}")

    return work


class SqlServerEngine:
    name = "sqlserver"
    families = ALL_FAMILIES - {TypeFamily.JSON}
    has_views = True
    case_insensitive_names = False
    #: The default SQL_Latin1_General_CP1_CI_AS: ``=`` and ``LIKE`` ignore letter case.
    collation = Collation(eq_case_insensitive=True, like_case_insensitive=True)
    adjust = None

    def catalog_name(self, name: str) -> str:
        return name

    def expected(self, column: ColumnSpec, value: object) -> object:
        return default_expected(column, value)

    async def load(self, dataset: Dataset) -> LoadedDataset:
        url = _admin_url()
        database, reader, password = fresh_name("ct_ms"), fresh_name("ct_rd"), fresh_password()

        def create(cursor: Any) -> None:
            cursor.execute(f"CREATE DATABASE {quote(database)}")
            cursor.execute(
                f"CREATE LOGIN {quote(reader)} WITH PASSWORD = {literal(password)}, "
                "CHECK_POLICY = OFF"
            )

        await admin(url, "master", create)
        await admin(url, database, _populate(dataset, reader, password))
        descriptor = ConnectionDescriptor(
            config_name="contract",
            type=EngineType.SQL_SERVER,
            host=url.hostname,
            port=url.port or 1433,
            database=database,
            username=reader,
            password=password,
            ssl=TlsSettings(_mode(url)),
        )
        wrong = f"wrong-{password}"
        return LoadedDataset(
            descriptor=descriptor,
            default_schema="dbo",
            dataset=dataset,
            hidden_tables=("contract_outside",),
            wrong_password=replace(descriptor, password=wrong),
            unreachable=replace(descriptor, host="127.0.0.1", port=closed_port()),
            secrets=(password, wrong),
            state={"url": url, "database": database, "reader": reader},
        )

    async def unload(self, loaded: LoadedDataset) -> None:
        url = loaded.state["url"]
        assert isinstance(url, urllib.parse.SplitResult)
        database, reader = quote(str(loaded.state["database"])), quote(str(loaded.state["reader"]))

        def drop(cursor: Any) -> None:
            cursor.execute(f"ALTER DATABASE {database} SET SINGLE_USER WITH ROLLBACK IMMEDIATE")
            cursor.execute(f"DROP DATABASE {database}")
            cursor.execute(f"DROP LOGIN {reader}")

        await admin(url, "master", drop)

    def registry(self, loaded: LoadedDataset, batch_size: int) -> ConnectorRegistry:
        return SqlConnectorRegistry(batch_size=batch_size)

    async def _requests(self, loaded: LoadedDataset) -> Sequence[tuple[Any, ...]]:
        url = loaded.state["url"]
        assert isinstance(url, urllib.parse.SplitResult)

        def query(cursor: Any) -> list[tuple[Any, ...]]:
            cursor.execute(
                "SELECT s.session_id, r.command, r.wait_type FROM sys.dm_exec_sessions AS s "
                "LEFT JOIN sys.dm_exec_requests AS r ON r.session_id = s.session_id "
                "WHERE s.login_name = ?",
                str(loaded.state["reader"]),
            )
            return [tuple(row) for row in cursor.fetchall()]

        return await admin(url, "master", query)

    async def assert_streaming(self, loaded: LoadedDataset) -> None:
        """The reader's ``SELECT`` is still a running request, waiting for the client to read
        (``ASYNC_NETWORK_IO``): the rest of the result waits on the server."""
        [(_session, command, wait_type)] = await self._requests(loaded)
        assert command == "SELECT", command
        assert wait_type == "ASYNC_NETWORK_IO", wait_type

    async def open_sessions(self, loaded: LoadedDataset) -> int | None:
        return len(await self._requests(loaded))


ENGINE = SqlServerEngine()
