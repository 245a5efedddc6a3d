"""The MySQL connector against the local MariaDB: the §11.1 session, §11.2 TLS modes, the
§2.9.1 pinned address, system schemas, and MySQL-specific §11.4 families and §5.3 values that
the shared contract suite (tests/contract) does not cover."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
from asyncmy.constants import CLIENT

from fetcher.adapters.batch_sizing import FIRST_BATCH_ROWS
from fetcher.adapters.sql.mysql import MysqlConnector
from fetcher.adapters.sql.registry import SqlConnectorRegistry
from fetcher.engine import ConnectionDescriptor, Engine, EngineError, ErrorCategory
from fetcher.engine.document import RowBatch, dumps_document
from fetcher.engine.errors import MAX_JSON_DEPTH
from fetcher.engine.model import ExtractionRequest, TlsSettings
from fetcher.engine.ports import Row, TableQuery
from fetcher.engine.testing import MemorySink
from fetcher.engine.types import EngineType, TableSchema, TypeFamily
from fetcher.engine.values import parse_json_exact_fractions
from tests.contract.engines.mariadb import (
    admin_connect,
    fresh_database,
    nested_json_sql,
    reader_descriptor,
)
from tests.services import MARIADB

pytestmark = pytest.mark.integration

TYPES_SQL = (
    "SET SESSION sql_mode = ''",  # zero dates are stored only under a lax mode
    """CREATE TABLE typed (
        id INT PRIMARY KEY, flag TINYINT(1), y YEAR, bits BIT(12), e ENUM('ok', 'sad'),
        s SET('a', 'b', 'c'), f FLOAT, d DOUBLE, n DECIMAL(20, 6), big BIGINT UNSIGNED,
        t TIME(6), dt DATETIME(6), ts TIMESTAMP(6) NULL DEFAULT NULL, day DATE,
        bin BINARY(4), vb VARBINARY(10), doc JSON, txt LONGTEXT, pt POINT, u UUID
    )""",
    """INSERT INTO typed VALUES (
        1, 1, 2024, b'101000000001', 'sad', 'a,c', 0.1, 0.1, 1500.000000, 18446744073709551615,
        '-838:59:59.000000', '2024-01-02 03:04:05.120000', '2024-01-02 03:04:05.000000',
        '2024-02-29', X'00FF1000', X'DEADBEEF', '{"a": 1.50, "b": [1, 2e3], "c": null}',
        '{"not": "parsed"}', POINT(1, 2), '123e4567-e89b-12d3-a456-426614174000'
    )""",
    """INSERT INTO typed (id, t, dt, ts, day) VALUES (
        2, '100:00:00.5', '0000-00-00 00:00:00', '0000-00-00 00:00:00', '0000-00-00'
    )""",
    "INSERT INTO typed (id) VALUES (3)",
)


@pytest.fixture
async def typed() -> AsyncIterator[ConnectionDescriptor]:
    async with fresh_database(TYPES_SQL) as (database, reader, password):
        yield reader_descriptor(database, reader, password)


def _root(database: str) -> ConnectionDescriptor:
    return ConnectionDescriptor(
        config_name="root",
        type=EngineType.MYSQL,
        host=str(MARIADB["host"]),
        port=int(str(MARIADB["port"])),
        database=database,
        username=str(MARIADB["user"]),
        password=str(MARIADB["password"]),
    )


def _raw(connector: MysqlConnector) -> Any:
    return connector._conn  # the driver connection, to look at the session from inside


async def _session_value(connector: MysqlConnector, sql: str) -> Any:
    async with _raw(connector).cursor() as cursor:
        await cursor.execute(sql)
        return (await cursor.fetchone())[0]


async def test_session_is_read_only_utc_with_backslash_escapes_and_no_local_infile(
    typed: ConnectionDescriptor,
) -> None:
    async with MysqlConnector(typed) as connector:
        assert await _session_value(connector, "SELECT @@session.time_zone") == "+00:00"
        mode = await _session_value(connector, "SELECT @@session.sql_mode")
        assert "NO_BACKSLASH_ESCAPES" not in mode
        assert await _session_value(connector, "SELECT @@session.tx_read_only") == 1
        assert not _raw(connector)._client_flag & CLIENT.LOCAL_FILES
    # Even an account that may write (root) cannot write through the connector's session.
    async with MysqlConnector(_root(typed.database)) as connector:
        with pytest.raises(Exception, match="READ ONLY"):
            await _session_value(connector, "INSERT INTO typed (id) VALUES (99)")


async def test_session_sql_mode_statement_drops_only_no_backslash_escapes() -> None:
    """The §11.1 ``sql_mode`` statement, run on a session whose mode has the flag."""
    from fetcher.adapters.sql.mysql import _SESSION_SQL

    conn = await admin_connect()
    try:
        async with conn.cursor() as cursor:
            for mode, want in (
                ("NO_BACKSLASH_ESCAPES,STRICT_TRANS_TABLES", "STRICT_TRANS_TABLES"),
                ("STRICT_TRANS_TABLES,NO_BACKSLASH_ESCAPES,ANSI_QUOTES", "ANSI_QUOTES"),
                ("NO_BACKSLASH_ESCAPES", ""),
            ):
                await cursor.execute("SET SESSION sql_mode = %s", (mode,))
                await cursor.execute(_SESSION_SQL[1])
                await cursor.execute("SELECT @@session.sql_mode")
                got = (await cursor.fetchone())[0]
                assert "NO_BACKSLASH_ESCAPES" not in got
                assert set(filter(None, got.split(","))) >= set(filter(None, want.split(",")))
    finally:
        conn.close()


@pytest.mark.parametrize("mode", ["true", "skip-verify"])
async def test_tls_required_modes_fail_when_the_server_offers_no_tls(
    typed: ConnectionDescriptor, mode: str
) -> None:
    """This server has TLS disabled: a TLS-required mode must not fall back to plaintext."""
    with pytest.raises(EngineError) as caught:
        async with MysqlConnector(replace(typed, ssl=TlsSettings(mode=mode))):
            pass
    assert caught.value.category is ErrorCategory.CONNECT
    assert caught.value.message == "failed to connect to datasource 'maria'"
    assert typed.password is not None
    assert typed.password not in str(caught.value.detail)


@pytest.mark.parametrize("mode", ["preferred", "false", ""])
async def test_tls_optional_modes_connect_in_plaintext(
    typed: ConnectionDescriptor, mode: str
) -> None:
    async with MysqlConnector(replace(typed, ssl=TlsSettings(mode=mode))) as connector:
        await connector.probe()
        assert _raw(connector)._transport.get_extra_info("ssl_object") is None


async def test_pinned_address_is_dialled_and_the_name_never_resolved(
    typed: ConnectionDescriptor,
) -> None:
    unresolvable = replace(typed, host="mariadb.fetcher-test.invalid")
    async with MysqlConnector(unresolvable, pinned_address="127.0.0.1") as connector:
        await connector.probe()
    with pytest.raises(EngineError) as caught:
        async with MysqlConnector(unresolvable):
            pass
    assert caught.value.category is ErrorCategory.CONNECT


async def test_system_schemas_are_never_discovered() -> None:
    async with MysqlConnector(_root("mysql")) as connector:
        found = await connector.discover(["mysql"])
    assert found.default_schema == "mysql"
    assert found.tables == ()


async def test_named_discovery_is_whole_discovery_cut_to_the_casefolded_names() -> None:
    """``discover_tables`` (the planner's fast path) lists the table names, matches them with
    the same ``casefold`` as catalog matching (§3.3: case-insensitive here) and reads only the
    matching tables' columns: the result is whole discovery cut to those names, a MariaDB
    ``json_valid`` column still a JSON column."""
    statements = (
        "CREATE TABLE Orders (id INT, doc JSON)",
        "CREATE TABLE `100%` (id INT)",
        "CREATE TABLE straße (id INT)",
        "CREATE TABLE other (id INT)",
        "CREATE VIEW order_view AS SELECT id FROM Orders",
    )
    async with (
        fresh_database(statements) as (database, reader, password),
        MysqlConnector(reader_descriptor(database, reader, password)) as connector,
    ):
        whole = await connector.discover([])
        named = await connector.discover_tables([], ["ORDERS", "100%", "STRASSE", "nope"])
        view = await connector.discover_tables([], ["Order_View"])
        nothing = await connector.discover_tables([], ["nope"])
    asked = {"orders", "100%", "strasse"}
    assert named.tables == tuple(t for t in whole.tables if t.name.casefold() in asked)
    assert sorted(t.name for t in named.tables) == ["100%", "Orders", "straße"]
    orders = next(t for t in named.tables if t.name == "Orders")
    assert [(c.name, c.family) for c in orders.columns] == [
        ("id", TypeFamily.INTEGER),
        ("doc", TypeFamily.JSON),
    ]
    assert [t.name for t in view.tables] == ["order_view"]
    assert (nothing.tables, nothing.default_schema) == ((), whole.default_schema)


FAMILIES = {
    "id": TypeFamily.INTEGER,
    "flag": TypeFamily.INTEGER,  # tinyint(1) stays an integer (§11.4)
    "y": TypeFamily.INTEGER,
    "bits": TypeFamily.BYTES,
    "e": TypeFamily.TEXT,
    "s": TypeFamily.TEXT,
    "f": TypeFamily.FLOAT,
    "d": TypeFamily.FLOAT,
    "n": TypeFamily.DECIMAL,
    "big": TypeFamily.INTEGER,
    "t": TypeFamily.TIME,
    "dt": TypeFamily.TIMESTAMP,
    "ts": TypeFamily.TIMESTAMPTZ,
    "day": TypeFamily.DATE,
    "bin": TypeFamily.BYTES,
    "vb": TypeFamily.BYTES,
    "doc": TypeFamily.JSON,  # MariaDB: longtext with a json_valid check
    "txt": TypeFamily.TEXT,  # longtext without the check is never parsed
    "pt": TypeFamily.OTHER,
    "u": TypeFamily.OTHER,
}


async def _typed_rows(descriptor: ConnectionDescriptor) -> tuple[TableSchema, dict[int, Any]]:
    async with MysqlConnector(descriptor, batch_size=2) as connector:
        found = await connector.discover([])
        [table] = found.tables
        rows: dict[int, Any] = {}
        async for batch in connector.stream(TableQuery(table, table.columns)):
            assert isinstance(batch, RowBatch)
            for row in batch:
                rows[int(str(row["id"]))] = dict(row)
    return table, rows


async def test_families_of_mysql_types(typed: ConnectionDescriptor) -> None:
    table, _rows = await _typed_rows(typed)
    assert {c.name: c.family for c in table.columns} == FAMILIES
    assert table.schema == typed.database


async def test_values_of_mysql_types(typed: ConnectionDescriptor) -> None:
    _table, rows = await _typed_rows(typed)
    one = rows[1]
    assert one["flag"] == 1
    assert one["y"] == 2024
    assert one["bits"] == "CgE="  # b'101000000001' = 0x0A01
    assert (one["e"], one["s"]) == ("sad", "a,c")
    assert one["f"] == 0.1
    assert one["d"] == 0.1
    assert one["n"] == "1500.000000"
    assert one["big"] == 18446744073709551615
    assert one["t"] == "-838:59:59"
    assert (one["dt"], one["ts"], one["day"]) == (
        "2024-01-02T03:04:05.12Z",
        "2024-01-02T03:04:05Z",
        "2024-02-29",
    )
    assert (one["bin"], one["vb"]) == ("AP8QAA==", "3q2+7w==")
    assert one["txt"] == '{"not": "parsed"}'
    assert one["u"] == "123e4567-e89b-12d3-a456-426614174000"
    assert isinstance(one["pt"], str)
    assert one["pt"]
    # Parsed JSON whose numbers keep their source text (§5.3).
    text = b"".join(dumps_document({"m": {"t": [{"doc": one["doc"]}]}}).split())
    assert b'"doc":{"a":1.50,"b":[1,2e3],"c":null}' in text
    two = rows[2]
    assert two["t"] == "100:00:00.5"
    assert (two["dt"], two["ts"], two["day"]) == (
        "0000-00-00 00:00:00",
        "0000-00-00 00:00:00",
        "0000-00-00",
    )
    assert all(value is None for key, value in rows[3].items() if key != "id")


async def test_leaving_the_connector_mid_stream_does_not_wait_for_the_server(
    typed: ConnectionDescriptor,
) -> None:
    """An abandoned stream (never closed) must not make ``__aexit__`` wait for the server,
    which is blocked writing rows nobody reads; the server session then ends."""
    async with fresh_database(
        (
            "CREATE TABLE wide (n INT, pad TEXT)",
            "SET SESSION max_recursive_iterations = 1000000",
            "INSERT INTO wide WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s "
            "WHERE n < 20000) SELECT n, REPEAT('x', 1000) FROM s",
        )
    ) as (database, reader, password):
        descriptor = replace(typed, database=database, username=reader, password=password)
        started = asyncio.get_running_loop().time()
        async with MysqlConnector(descriptor, batch_size=100) as connector:
            [table] = (await connector.discover([])).tables
            stream = connector.stream(TableQuery(table, table.columns))
            assert len(await anext(stream)) == FIRST_BATCH_ROWS
        assert asyncio.get_running_loop().time() - started < 5
        assert isinstance(stream, AsyncGenerator)
        await stream.aclose()
        assert await _sessions_of(reader) == 0


async def _sessions_of(user: str) -> int:
    """The user's server sessions, polled for up to 5 s until there are none."""
    conn = await admin_connect()
    try:
        async with conn.cursor() as cursor:
            for _ in range(50):
                await cursor.execute(
                    "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = %s", (user,)
                )
                count = int((await cursor.fetchone())[0])
                if count == 0:
                    break
                await asyncio.sleep(0.1)
    finally:
        conn.close()
    return count


# --- JSON nested deeper than MAX_JSON_DEPTH (issue 12, hardening) -----------------------------


#: MariaDB's ``json_valid`` accepts 31 levels at most, so deeper text reaches a ``json`` column
#: only while check constraints are off (an import, or a check added later).
DEEP_SQL = (
    "SET SESSION check_constraint_checks = 0",
    "CREATE TABLE deep_docs (id INT PRIMARY KEY, doc JSON)",
    f"INSERT INTO deep_docs VALUES (1, '[1]'), (2, {nested_json_sql(3000, '1')}), (3, NULL)",
    "CREATE TABLE past_bound (id INT PRIMARY KEY, doc JSON)",
    f"INSERT INTO past_bound VALUES (1, {nested_json_sql(MAX_JSON_DEPTH + 1, '1.50')})",
    "CREATE TABLE at_bound (id INT PRIMARY KEY, doc JSON)",
    f"INSERT INTO at_bound VALUES (1, {nested_json_sql(MAX_JSON_DEPTH, '-0')}),"
    f" (2, {nested_json_sql(MAX_JSON_DEPTH - 1, '[1.50, 2e3]')})",
)


@pytest.fixture
async def deep() -> AsyncIterator[ConnectionDescriptor]:
    async with fresh_database(DEEP_SQL) as (database, reader, password):
        yield reader_descriptor(database, reader, password)


async def _job_bytes(descriptor: ConnectionDescriptor, table: str) -> bytes:
    request = ExtractionRequest(job_id="deep", mapped_fields={"maria": {table: ("id", "doc")}})
    sink = MemorySink()
    await Engine(SqlConnectorRegistry(batch_size=2)).run(request, {"maria": descriptor}, sink)
    return sink.data


@pytest.mark.parametrize("table", ["deep_docs", "past_bound"])
async def test_json_nested_too_deep_fails_with_the_query_text(
    deep: ConnectionDescriptor, table: str
) -> None:
    """3,000 levels (refused by the connector's parser) and 251 (by the writer): the §4.5 query
    text naming the column and the table, never ``internal error``, and never kept as text."""
    with pytest.raises(EngineError) as caught:
        await _job_bytes(deep, table)
    assert caught.value.category is ErrorCategory.UNAVAILABLE
    assert caught.value.text() == (
        f"failed to query datasource 'maria': column 'doc' of table '{deep.database}.{table}' "
        f"holds a JSON value nested deeper than {MAX_JSON_DEPTH} levels"
    )


async def test_json_nested_at_the_bound_is_extracted_byte_for_byte(
    deep: ConnectionDescriptor,
) -> None:
    data = await _job_bytes(deep, "at_bound")
    conn = await admin_connect(deep.database)
    try:
        async with conn.cursor() as cursor:
            await cursor.execute("SELECT id, doc FROM at_bound ORDER BY id")
            stored = await cursor.fetchall()
    finally:
        conn.close()
    rows: list[Row] = [{"doc": parse_json_exact_fractions(doc), "id": id_} for id_, doc in stored]
    assert data == dumps_document({"maria": {"at_bound": rows}})
    assert [row["doc"] for row in json.loads(data)["maria"]["at_bound"]] == [
        json.loads(doc) for _, doc in stored
    ]
    assert b"-0" in data
    assert b"2e3" in data  # numbers keep their source text
