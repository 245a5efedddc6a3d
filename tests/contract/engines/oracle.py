"""Oracle under the contract suite, gated on ``FETCHER_TEST_ORACLE_URL`` (no Oracle server can
run on this machine, so this plugin has never run here).

``FETCHER_TEST_ORACLE_URL=oracle://<admin>:<password>@<host>:<port>/<service name>``: an admin
(``system``) that may create users and tables in other schemas. Per session the plugin creates
a fresh user with a password and only ``CREATE SESSION``; the dataset is created in that user's
schema, so the user is both the reader and the §3.3 default owner ``d``. Another fresh user
owns a table that must not be discovered.

Oracle facts the plugin adapts to:
* names are upper-case canonical (§3.3): every dataset name is created upper-cased;
* a quoted identifier cannot contain ``"``, so the injection-shaped names use ``'`` in its place
  (every other quote and ``;``, ``--``, ``%s`` are kept);
* ``''`` is NULL (``adjust``); the families are those of Oracle 19c (no BOOLEAN, JSON, DATE
  without time, TIME or UUID type); ``=`` and ``LIKE`` are case-sensitive.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeVar

import oracledb
import pytest

from fetcher.adapters.sql.registry import SqlConnectorRegistry
from fetcher.engine import ConnectionDescriptor, ConnectorRegistry
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
from tests.contract.engines._common import closed_port, default_expected, fresh_name

URL_VARIABLE = "FETCHER_TEST_ORACLE_URL"
SKIP_REASON = "no Oracle server can run on this machine; set FETCHER_TEST_ORACLE_URL to run"

_T = TypeVar("_T")

_TYPES = {
    TypeFamily.INTEGER: "NUMBER(19)",
    TypeFamily.DECIMAL: "NUMBER(12, 2)",
    TypeFamily.FLOAT: "BINARY_DOUBLE",
    TypeFamily.TEXT: "VARCHAR2(1000 CHAR)",
    TypeFamily.TIMESTAMP: "TIMESTAMP(6)",
    TypeFamily.TIMESTAMPTZ: "TIMESTAMP(6) WITH TIME ZONE",
    TypeFamily.BYTES: "RAW(100)",
}


def canonical(name: str) -> str:
    """The catalog spelling of a dataset name on Oracle (see the module docstring)."""
    return name.upper().replace('"', "'")


def quote(name: str) -> str:
    return '"' + canonical(name) + '"'


def _empty_is_null(column: ColumnSpec, value: object) -> object:
    return None if value == "" else value


def _stored(value: object) -> object:
    """Aware timestamps as naive UTC: the admin session zone is UTC."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def _admin_url() -> urllib.parse.SplitResult:
    raw = os.environ.get(URL_VARIABLE, "")
    if not raw:
        pytest.skip(SKIP_REASON)
    return urllib.parse.urlsplit(raw)


def _service(url: urllib.parse.SplitResult) -> str:
    return url.path.strip("/") or "FREEPDB1"


async def admin(url: urllib.parse.SplitResult, work: Callable[[Any], Any]) -> Any:
    """Run ``await work(cursor)`` in a fresh admin session with a UTC session zone."""
    conn = await oracledb.connect_async(
        user=urllib.parse.unquote(url.username or "system"),
        password=urllib.parse.unquote(url.password or ""),
        host=url.hostname,
        port=url.port or 1521,
        service_name=_service(url),
    )
    try:
        cursor = conn.cursor()
        try:
            await cursor.execute("ALTER SESSION SET TIME_ZONE = 'UTC'")
            result = await work(cursor)
            await conn.commit()
            return result
        finally:
            cursor.close()
    finally:
        await conn.close()


async def _create(cursor: Any, owner: str, table: TableSpec) -> None:
    columns = ", ".join(f"{quote(c.name)} {_TYPES[c.family]}" for c in table.columns)
    await cursor.execute(f"CREATE TABLE {quote(owner)}.{quote(table.name)} ({columns})")
    if table.rows:
        names = [c.name for c in table.columns]
        binds = ", ".join(f":{i}" for i in range(1, len(names) + 1))
        await cursor.executemany(
            f"INSERT INTO {quote(owner)}.{quote(table.name)} "
            f"({', '.join(quote(n) for n in names)}) VALUES ({binds})",
            [tuple(_stored(row[n]) for n in names) for row in table.rows],
        )


def _populate(dataset: Dataset, owner: str, other: str) -> Callable[[Any], Any]:
    async def work(cursor: Any) -> None:
        for table in dataset.tables:
            if not table.is_view:
                await _create(cursor, owner, table)
        await cursor.execute(
            f"INSERT INTO {quote(owner)}.{quote(BULK)} ({quote('n')}, {quote('pad')}) "
            f"SELECT LEVEL, RPAD('x', {BULK_PAD}, 'x') FROM DUAL CONNECT BY LEVEL <= {BULK_ROWS}"
        )
        if dataset.view is not None:
            items = f"{quote(owner)}.{quote('contract_items')}"
            await cursor.execute(
                f"CREATE VIEW {quote(owner)}.{quote('contract_view')} AS "
                f"SELECT {quote('id')}, {quote('txt')} FROM {items}"
            )
        await cursor.execute(f"CREATE TABLE {quote(other)}.{quote('contract_outside')} (X NUMBER)")

    return work


class OracleEngine:
    name = "oracle"
    families = frozenset(_TYPES)
    has_views = True
    case_insensitive_names = False
    collation = Collation(eq_case_insensitive=False, like_case_insensitive=False)
    adjust = staticmethod(_empty_is_null)

    def catalog_name(self, name: str) -> str:
        return canonical(name)

    def expected(self, column: ColumnSpec, value: object) -> object:
        return default_expected(column, value)

    async def load(self, dataset: Dataset) -> LoadedDataset:
        url = _admin_url()
        owner, other = canonical(fresh_name("ct_or")), canonical(fresh_name("ct_ot"))
        password = f"Pw_{fresh_name('x')}#1;'%"

        async def users(cursor: Any) -> None:
            for user in (owner, other):
                await cursor.execute(
                    f'CREATE USER {quote(user)} IDENTIFIED BY "{password}" QUOTA UNLIMITED ON USERS'
                )
            await cursor.execute(f"GRANT CREATE SESSION TO {quote(owner)}")

        await admin(url, users)
        await admin(url, _populate(dataset, owner, other))
        descriptor = ConnectionDescriptor(
            config_name="contract",
            type=EngineType.ORACLE,
            host=url.hostname,
            port=url.port or 1521,
            database="contract",
            username=owner,
            password=password,
            metadata={"serviceName": _service(url)},
        )
        wrong = f"wrong-{password}"
        return LoadedDataset(
            descriptor=descriptor,
            default_schema=owner,
            dataset=dataset,
            hidden_tables=(canonical("contract_outside"),),
            wrong_password=replace(descriptor, password=wrong),
            unreachable=replace(descriptor, host="127.0.0.1", port=closed_port()),
            secrets=(password, wrong),
            state={"url": url, "owner": owner, "other": other},
        )

    async def unload(self, loaded: LoadedDataset) -> None:
        url = loaded.state["url"]
        assert isinstance(url, urllib.parse.SplitResult)

        async def drop(cursor: Any) -> None:
            for key in ("owner", "other"):
                await cursor.execute(f"DROP USER {quote(str(loaded.state[key]))} CASCADE")

        await admin(url, drop)

    def registry(self, loaded: LoadedDataset, batch_size: int) -> ConnectorRegistry:
        return SqlConnectorRegistry(batch_size=batch_size)

    async def _sessions(self, loaded: LoadedDataset) -> Sequence[tuple[Any, ...]]:
        url = loaded.state["url"]
        assert isinstance(url, urllib.parse.SplitResult)

        async def query(cursor: Any) -> list[tuple[Any, ...]]:
            await cursor.execute(
                "SELECT s.SID, "
                "(SELECT COUNT(*) FROM V$OPEN_CURSOR o WHERE o.SID = s.SID "
                "AND o.SQL_TEXT LIKE '%CONTRACT_BULK%') "
                "FROM V$SESSION s WHERE s.USERNAME = :1",
                [loaded.state["owner"]],
            )
            return [tuple(row) for row in await cursor.fetchall()]

        result: list[tuple[Any, ...]] = await admin(url, query)
        return result

    async def assert_streaming(self, loaded: LoadedDataset) -> None:
        """The reader's session still holds the ``CONTRACT_BULK`` cursor open: the stream is
        paused between ``fetchmany`` round trips, with the rest of the rows on the server."""
        [(_sid, open_bulk_cursors)] = await self._sessions(loaded)
        assert open_bulk_cursors >= 1, open_bulk_cursors

    async def open_sessions(self, loaded: LoadedDataset) -> int | None:
        return len(await self._sessions(loaded))


ENGINE = OracleEngine()
