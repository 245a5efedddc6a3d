"""MariaDB (MySQL connector) under the contract suite: a fresh database and a reader with a
password per session on the local server (127.0.0.1:3306, root with an empty password)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime, time
from typing import Any

import asyncmy

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
from tests.contract.engines._common import (
    ALL_FAMILIES,
    closed_port,
    default_expected,
    fresh_name,
    fresh_password,
)
from tests.services import MARIADB, service_missing

_TYPES = {
    TypeFamily.INTEGER: "BIGINT",
    TypeFamily.DECIMAL: "DECIMAL(12, 2)",
    TypeFamily.FLOAT: "DOUBLE",
    TypeFamily.TEXT: "TEXT",
    TypeFamily.DATE: "DATE",
    TypeFamily.TIMESTAMP: "DATETIME(6)",
    TypeFamily.TIMESTAMPTZ: "TIMESTAMP(6) NULL DEFAULT NULL",
    TypeFamily.TIME: "TIME(6)",
    TypeFamily.JSON: "JSON",  # MariaDB: LONGTEXT with a json_valid check (§5.3)
    TypeFamily.BYTES: "BLOB",
}


def quote(name: str) -> str:
    """A backtick-quoted identifier with ``%`` doubled (the statements carry parameters)."""
    return "`" + name.replace("`", "``").replace("%", "%%") + "`"


def _stored(value: object) -> object:
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)  # the admin session is UTC
    if isinstance(value, dict):
        return json.dumps(value)
    if isinstance(value, time):
        return value.isoformat()
    return value


async def admin_connect(database: str | None = None) -> Any:
    kwargs: dict[str, Any] = {k: v for k, v in MARIADB.items() if k != "db"}
    conn = await asyncmy.connect(**kwargs, database=database, autocommit=True)
    async with conn.cursor() as cursor:
        await cursor.execute("SET time_zone = '+00:00'")
    return conn


async def _create(cursor: Any, database: str, table: TableSpec) -> None:
    columns = ", ".join(f"{quote(c.name)} {_TYPES[c.family]}" for c in table.columns)
    await cursor.execute(f"CREATE TABLE {quote(database)}.{quote(table.name)} ({columns})", ())
    if table.rows:
        names = [c.name for c in table.columns]
        await cursor.executemany(
            f"INSERT INTO {quote(database)}.{quote(table.name)} "
            f"({', '.join(quote(n) for n in names)}) VALUES ({', '.join(['%s'] * len(names))})",
            [tuple(_stored(row[n]) for n in names) for row in table.rows],
        )


class MariadbEngine:
    name = "mariadb"
    families = ALL_FAMILIES - {TypeFamily.BOOLEAN, TypeFamily.UUID}
    has_views = True
    case_insensitive_names = True
    #: utf8mb4_general_ci: ``=`` and ``LIKE`` ignore letter case.
    collation = Collation(eq_case_insensitive=True, like_case_insensitive=True)
    adjust = None

    def catalog_name(self, name: str) -> str:
        return name

    def expected(self, column: ColumnSpec, value: object) -> object:
        return default_expected(column, value)

    async def load(self, dataset: Dataset) -> LoadedDataset:
        try:
            conn = await admin_connect()
        except (asyncmy.errors.MySQLError, OSError) as exc:
            service_missing("MariaDB", exc)
            raise
        database, reader, password = fresh_name("ct_my"), fresh_name("ct_rd"), fresh_password()
        other = f"{database}_other"
        try:
            async with conn.cursor() as cursor:
                await self._populate(cursor, dataset, database, other)
                await cursor.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (reader, password))
                for db in (database, other):
                    await cursor.execute(
                        f"GRANT SELECT, SHOW VIEW ON {quote(db)}.* TO %s@'%%'", (reader,)
                    )
        finally:
            conn.close()
        descriptor = reader_descriptor(database, reader, password, "contract")
        wrong = f"wrong-{password}"
        return LoadedDataset(
            descriptor=descriptor,
            default_schema=database,
            dataset=dataset,
            hidden_tables=("contract_outside",),
            wrong_password=replace(descriptor, password=wrong),
            unreachable=replace(descriptor, port=closed_port()),
            secrets=(password, wrong),
            state={"database": database, "other": other, "reader": reader},
        )

    async def _populate(self, cursor: Any, dataset: Dataset, database: str, other: str) -> None:
        await cursor.execute(f"CREATE DATABASE {quote(database)} CHARACTER SET utf8mb4", ())
        await cursor.execute(f"CREATE DATABASE {quote(other)} CHARACTER SET utf8mb4", ())
        for table in dataset.tables:
            if not table.is_view:
                await _create(cursor, database, table)
        await cursor.execute("SET SESSION max_recursive_iterations = 100000000")
        await cursor.execute(
            f"INSERT INTO {quote(database)}.{BULK} "
            f"WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < "
            f"{BULK_ROWS}) SELECT n, REPEAT('x', {BULK_PAD}) FROM seq"
        )
        if dataset.view is not None:
            await cursor.execute(
                f"CREATE VIEW {quote(database)}.contract_view AS "
                f"SELECT id, txt FROM {quote(database)}.contract_items",
                (),
            )
        await cursor.execute(f"CREATE TABLE {quote(other)}.contract_outside (x INT)", ())

    async def unload(self, loaded: LoadedDataset) -> None:
        conn = await admin_connect()
        try:
            async with conn.cursor() as cursor:
                for key in ("database", "other"):
                    await cursor.execute(
                        f"DROP DATABASE IF EXISTS {quote(str(loaded.state[key]))}", ()
                    )
                await cursor.execute("DROP USER IF EXISTS %s@'%%'", (loaded.state["reader"],))
        finally:
            conn.close()

    def registry(self, loaded: LoadedDataset, batch_size: int) -> ConnectorRegistry:
        return SqlConnectorRegistry(batch_size=batch_size)

    async def _processes(self, loaded: LoadedDataset) -> list[tuple[str, str | None]]:
        conn = await admin_connect()
        try:
            async with conn.cursor() as cursor:
                await cursor.execute(
                    "SELECT COMMAND, INFO FROM information_schema.PROCESSLIST WHERE USER = %s",
                    (loaded.state["reader"],),
                )
                return [(str(command), info) for command, info in await cursor.fetchall()]
        finally:
            conn.close()

    async def assert_streaming(self, loaded: LoadedDataset) -> None:
        """The reader's ``SELECT`` is still executing on the server: the rest of the result
        waits there (an unbuffered cursor), not in the client."""
        [(command, info)] = await self._processes(loaded)
        assert command == "Query", command
        assert (info or "").upper().startswith("SELECT"), info

    async def open_sessions(self, loaded: LoadedDataset) -> int | None:
        return len(await self._processes(loaded))


ENGINE = MariadbEngine()


def reader_descriptor(
    database: str, reader: str, password: str, config_name: str = "maria"
) -> ConnectionDescriptor:
    """The connector's descriptor of ``database`` on the machine's MariaDB, as ``reader``."""
    return ConnectionDescriptor(
        config_name=config_name,
        type=EngineType.MYSQL,
        host=str(MARIADB["host"]),
        port=int(str(MARIADB["port"])),
        database=database,
        username=reader,
        password=password,
    )


def nested_json_sql(depth: int, leaf: str) -> str:
    """A SQL string literal of JSON text nesting ``depth`` levels around ``leaf`` (arrays and
    ``{"a": …}`` objects alternating)."""
    opening = "".join('{"a": ' if level % 2 else "[" for level in range(depth))
    closing = "".join("}" if level % 2 else "]" for level in reversed(range(depth)))
    return f"'{opening}{leaf}{closing}'"


@asynccontextmanager
async def fresh_database(statements: Sequence[str] = ()) -> AsyncIterator[tuple[str, str, str]]:
    """A brand-new database (``statements`` run inside it as root) and a reader with a password
    and ``SELECT`` on it; ``(database, reader, password)``; both dropped on exit. For the
    MySQL connector's own integration and Manager tests."""
    try:
        conn = await admin_connect()
    except (asyncmy.errors.MySQLError, OSError) as exc:
        service_missing("MariaDB", exc)
        raise
    database, reader, password = fresh_name("ct_my"), fresh_name("ct_rd"), fresh_password()
    try:
        async with conn.cursor() as cursor:
            await cursor.execute(f"CREATE DATABASE {quote(database)} CHARACTER SET utf8mb4", ())
            await cursor.execute(f"USE {quote(database)}", ())
            for statement in statements:
                await cursor.execute(statement)
            await cursor.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (reader, password))
            await cursor.execute(f"GRANT SELECT ON {quote(database)}.* TO %s@'%%'", (reader,))
        yield database, reader, password
    finally:
        async with conn.cursor() as cursor:
            await cursor.execute(f"DROP DATABASE IF EXISTS {quote(database)}", ())
            await cursor.execute("DROP USER IF EXISTS %s@'%%'", (reader,))
        conn.close()
