"""The SQLite connector: discovery, families, values, filters, batches, read-only (§11, §5.3)."""

from __future__ import annotations

import sqlite3
from datetime import date
from pathlib import Path

import pytest

from fetcher.adapters.sql.sqlite import SqliteConnector, _converter, sqlite_family
from fetcher.engine.errors import EngineError, ErrorCategory
from fetcher.engine.filters.ast import BoundCondition, BoundFieldFilter, Operator
from fetcher.engine.ports import Connector, Row, TableQuery
from fetcher.engine.types import Column, DiscoveredSchema, TableSchema, TypeFamily
from tests.batches import narrow_batches
from tests.unit.sql.helpers import descriptor


def connector(path: Path, allowed: Path | None, batch_size: int = 10_000) -> SqliteConnector:
    return SqliteConnector(
        descriptor(path), allowed_dir=str(allowed) if allowed else None, batch_size=batch_size
    )


async def discover(path: Path, allowed: Path) -> DiscoveredSchema:
    async with connector(path, allowed) as conn:
        return await conn.discover(["ignored"])


def table(schema: DiscoveredSchema, name: str) -> TableSchema:
    return next(t for t in schema.tables if t.name == name)


async def read_all(
    path: Path,
    allowed: Path,
    name: str,
    filters: tuple[BoundFieldFilter, ...] = (),
    batch_size: int = 10_000,
) -> list[list[Row]]:
    async with connector(path, allowed, batch_size=batch_size) as conn:
        found = table(await conn.discover([]), name)
        query = TableQuery(found, found.columns, filters)
        return [list(batch) async for batch in conn.stream(query)]


async def read_rows(
    path: Path, allowed: Path, name: str, filters: tuple[BoundFieldFilter, ...] = ()
) -> list[Row]:
    """Every row of the stream, whatever its batches."""
    return [row for batch in await read_all(path, allowed, name, filters) for row in batch]


def test_is_a_connector(database: Path, allowed_dir: Path) -> None:
    assert isinstance(connector(database, allowed_dir), Connector)


async def test_probe(database: Path, allowed_dir: Path) -> None:
    async with connector(database, allowed_dir) as conn:
        await conn.probe()


async def test_discovery_lists_tables_and_views_with_catalog_spelling(
    database: Path, allowed_dir: Path
) -> None:
    schema = await discover(database, allowed_dir)
    assert schema.default_schema == "main"
    assert [t.name for t in schema.tables] == ["Accounts", "active_accounts", "counters", "numbers"]
    assert all(t.schema == "main" for t in schema.tables)
    view = table(schema, "active_accounts")
    assert [c.name for c in view.columns] == ["id", "Name"]


async def test_discovery_excludes_sqlite_internal_tables(database: Path, allowed_dir: Path) -> None:
    with sqlite3.connect(database) as check:
        names = {r[0] for r in check.execute("SELECT name FROM sqlite_schema")}
    check.close()
    assert "sqlite_sequence" in names
    schema = await discover(database, allowed_dir)
    assert not [t for t in schema.tables if t.name.lower().startswith("sqlite_")]


async def test_discovered_families(database: Path, allowed_dir: Path) -> None:
    accounts = table(await discover(database, allowed_dir), "Accounts")
    families = {c.name: c.family for c in accounts.columns}
    assert families == {
        "id": TypeFamily.INTEGER,
        "Name": TypeFamily.TEXT,
        "amount": TypeFamily.DECIMAL,
        "ratio": TypeFamily.FLOAT,
        "active": TypeFamily.BOOLEAN,
        "born": TypeFamily.DATE,
        "seen": TypeFamily.TIMESTAMP,
        "at": TypeFamily.TIME,
        "payload": TypeFamily.BYTES,
        "misc": TypeFamily.BYTES,
        "big": TypeFamily.DECIMAL,
    }
    assert accounts.column_named("amount") is not None
    assert accounts.columns[2].native_type == "DECIMAL(10, 2)"


@pytest.mark.parametrize(
    ("declared", "family"),
    [
        ("INTEGER", TypeFamily.INTEGER),
        ("bigint", TypeFamily.INTEGER),
        ("UNSIGNED BIG INT", TypeFamily.INTEGER),
        ("VARCHAR(255)", TypeFamily.TEXT),
        ("nchar(5)", TypeFamily.TEXT),
        ("CLOB", TypeFamily.TEXT),
        ("BLOB", TypeFamily.BYTES),
        ("", TypeFamily.BYTES),
        ("REAL", TypeFamily.FLOAT),
        ("DOUBLE PRECISION", TypeFamily.FLOAT),
        ("FLOAT", TypeFamily.FLOAT),
        ("NUMERIC", TypeFamily.DECIMAL),
        ("DECIMAL(10,5)", TypeFamily.DECIMAL),
        ("BOOLEAN", TypeFamily.BOOLEAN),
        ("bool", TypeFamily.BOOLEAN),
        ("DATE", TypeFamily.DATE),
        ("DATETIME", TypeFamily.TIMESTAMP),
        ("timestamp", TypeFamily.TIMESTAMP),
        ("TIME", TypeFamily.TIME),
    ],
)
def test_sqlite_family(declared: str, family: TypeFamily) -> None:
    assert sqlite_family(declared) is family


async def test_values_are_encoded(database: Path, allowed_dir: Path) -> None:
    rows = await read_rows(database, allowed_dir, "Accounts")
    by_id = {row["id"]: row for row in rows}
    assert by_id[1] == {
        "id": 1,
        "Name": "Ann",
        "amount": "1500",  # NUMERIC affinity stored the text as the integer 1500
        "ratio": 0.5,
        "active": True,
        "born": "2024-01-05",
        "seen": "2024-01-05T10:00:00Z",  # declared TIMESTAMP text → RFC 3339 UTC (§5.3)
        "at": "10:00:00",
        "payload": "AP8=",
        "misc": 7,
        "big": "12.5",  # REAL in a decimal-family column: shortest exact text
    }
    assert by_id[2]["amount"] == "1,500.00"  # stored as text: stays a string
    assert by_id[2]["active"] is False
    assert by_id[2]["misc"] == "x"
    assert by_id[2]["big"] == "3"
    assert by_id[3]["Name"] == "Álvaro"
    assert all(by_id[3][k] is None for k in ("amount", "ratio", "active", "payload", "big"))
    assert by_id[4]["ratio"] == "Infinity"
    assert by_id[4]["payload"] == ""
    assert by_id[4]["big"] == "100000000000000000000"  # no exponent


async def test_invalid_utf8_text_is_replaced(allowed_dir: Path) -> None:
    path = allowed_dir / "bad.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t (s TEXT)")
    db.execute("INSERT INTO t VALUES (CAST(X'61FF62' AS TEXT))")
    db.commit()
    db.close()
    rows = await read_rows(path, allowed_dir, "t")
    assert rows == [{"s": "a\ufffdb"}]


async def test_view_rows(database: Path, allowed_dir: Path) -> None:
    rows = await read_rows(database, allowed_dir, "active_accounts")
    assert rows == [{"id": 1, "Name": "Ann"}, {"id": 4, "Name": "100%"}]


async def test_streams_in_batches(database: Path, allowed_dir: Path) -> None:
    batches = await read_all(database, allowed_dir, "numbers", batch_size=10)
    assert [len(b) for b in batches] == narrow_batches(25, 10)
    assert [row["n"] for batch in batches for row in batch] == list(range(25))


async def test_filters_narrow_rows(database: Path, allowed_dir: Path) -> None:
    accounts = table(await discover(database, allowed_dir), "Accounts")
    born = accounts.column_named("born")
    name = accounts.column_named("Name")
    assert born is not None
    assert name is not None
    between = BoundFieldFilter(
        born, (BoundCondition(Operator.BETWEEN, (date(2024, 1, 1), date(2024, 2, 28))),)
    )
    rows = await read_rows(database, allowed_dir, "Accounts", (between,))
    assert {r["id"] for r in rows} == {1, 2}
    like = BoundFieldFilter(name, (BoundCondition(Operator.LIKE, ("100\\%",)),))
    rows = await read_rows(database, allowed_dir, "Accounts", (like,))
    assert [r["id"] for r in rows] == [4]
    # SQLite LIKE follows the column collation: case-insensitive for ASCII.
    like_b = BoundFieldFilter(name, (BoundCondition(Operator.LIKE, ("B%",)),))
    rows = await read_rows(database, allowed_dir, "Accounts", (like_b,))
    assert [r["id"] for r in rows] == [2]


async def test_injection_like_values_are_harmless(database: Path, allowed_dir: Path) -> None:
    accounts = table(await discover(database, allowed_dir), "Accounts")
    name = accounts.column_named("Name")
    assert name is not None
    hostile = ('\'; DROP TABLE "Accounts"; --', "%", "\\", "ü")
    condition = BoundFieldFilter(name, (BoundCondition(Operator.IN, hostile),))
    batches = await read_all(database, allowed_dir, "Accounts", (condition,))
    assert batches == []
    rows = await read_rows(database, allowed_dir, "Accounts")
    assert len(rows) == 4


async def test_connection_is_read_only(database: Path, allowed_dir: Path) -> None:
    async with connector(database, allowed_dir) as conn:
        db = conn._db  # the private handle: the port itself offers no way to write
        assert db is not None
        with pytest.raises(sqlite3.OperationalError, match=r"readonly|read-only"):
            db.execute("INSERT INTO numbers VALUES (99)")
        db.execute("PRAGMA query_only = OFF")  # mode=ro still refuses writes
        with pytest.raises(sqlite3.OperationalError, match=r"readonly"):
            db.execute("DELETE FROM numbers")
    check = sqlite3.connect(database)
    try:
        assert check.execute("SELECT COUNT(*) FROM numbers").fetchone() == (25,)
    finally:
        check.close()


async def test_query_failure_is_unavailable(database: Path, allowed_dir: Path) -> None:
    async with connector(database, allowed_dir) as conn:
        found = table(await conn.discover([]), "numbers")
        missing = TableSchema("main", "gone", found.columns)
        with pytest.raises(EngineError) as caught:
            async for _ in conn.stream(TableQuery(missing, missing.columns)):
                pass
    assert caught.value.category is ErrorCategory.UNAVAILABLE
    assert caught.value.message == "failed to query datasource 'local'"
    assert caught.value.detail is not None
    assert "gone" in caught.value.detail


async def test_exit_twice_is_safe(database: Path, allowed_dir: Path) -> None:
    conn = connector(database, allowed_dir)
    await conn.__aenter__()
    await conn.__aexit__(None, None, None)
    await conn.__aexit__(None, None, None)
    with pytest.raises(EngineError) as caught:
        await conn.probe()
    assert caught.value.category is ErrorCategory.CONNECT


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        ("2024-01-05 10:00:00", "2024-01-05T10:00:00Z"),
        ("2024-01-05T10:00:00.250+02:00", "2024-01-05T08:00:00.25Z"),
        ("2024-01-05", "2024-01-05T00:00:00Z"),
        ("last tuesday", "last tuesday"),
        (1704448800, 1704448800),
    ],
)
def test_timestamp_text_becomes_rfc3339_and_anything_else_stays(
    stored: object, expected: object
) -> None:

    column = Column("t", TypeFamily.TIMESTAMP)
    assert _converter(column)(stored) == expected


@pytest.mark.parametrize(
    ("stored", "expected"), [("2024-02-29", "2024-02-29"), ("2024-02-30", "2024-02-30"), (3, 3)]
)
def test_date_text(stored: object, expected: object) -> None:

    assert _converter(Column("d", TypeFamily.DATE))(stored) == expected
