"""Rendered filters executed on an in-memory SQLite database (contract §3.4).

Each case runs the whole Worker path (parse → bind → render) and proves that the operator
narrows the rows as specified, including SQL three-valued logic for NULL and hostile values.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from fetcher.engine.filters.bind import bind_field_filter
from fetcher.engine.filters.parse import parse_filters
from fetcher.engine.filters.sql import SQLITE, render_select
from fetcher.engine.types import Column, TypeFamily

EVIL = "'; DROP TABLE t; --"
COLUMNS = {
    "id": Column("id", TypeFamily.INTEGER),
    "name": Column("name", TypeFamily.TEXT),
    "amount": Column("amount", TypeFamily.DECIMAL),
    "flag": Column("flag", TypeFamily.BOOLEAN),
    "d": Column("d", TypeFamily.DATE),
    "ts": Column("ts", TypeFamily.TIMESTAMP),
}
ROWS = [
    (1, "alpha", 1.5, 1, "2026-01-01", "2026-01-01 00:00:00"),
    (2, "beta", 2.25, 0, "2026-01-15", "2026-01-31 23:59:59"),
    (3, "Gamma%", None, None, None, "2026-02-01 00:00:00"),
    (4, None, 10, 1, "2026-01-31", None),
    (5, "a_b\\c", 3, 0, "2026-02-01", "2025-12-31 23:59:59"),
    (6, EVIL, -1, 1, "2025-12-31", "2026-01-15 12:00:00"),
    (7, "naïve ☃", 0, 0, "2026-01-10", "2026-01-10 10:00:00"),
    (8, "axb", 5, 1, "2026-03-01", "2026-03-01 00:00:00"),
]
ALL_NAMED = [1, 2, 3, 5, 6, 7, 8]


@pytest.fixture
def db() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(
            "CREATE TABLE t (id INTEGER, name TEXT, amount NUMERIC, flag BOOLEAN, "
            "d DATE, ts DATETIME)"
        )
        conn.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)", ROWS)
        yield conn
    finally:
        conn.close()


def run(conn: sqlite3.Connection, fields: dict[str, object]) -> list[int]:
    spec = parse_filters({"lite": {"main.t": fields}}, {"lite": {"main.t": ["id"]}})
    table = spec.get("lite", {}).get("main.t", ())
    bound = [bind_field_filter("lite", "main.t", COLUMNS[f.field], f) for f in table]
    sql, params = render_select(SQLITE, "main", "t", [COLUMNS["id"]], bound)
    return sorted(row[0] for row in conn.execute(sql, params))


CASES = [
    # eq / in, with the null rule
    ("name", {"eq": ["alpha"]}, [1]),
    ("name", {"eq": ["alpha", "beta"]}, [1, 2]),
    ("name", {"eq": [None]}, [4]),
    ("name", {"eq": ["alpha", None]}, [1, 4]),
    ("name", {"in": ["beta"]}, [2]),
    ("name", {"in": ["beta", None]}, [2, 4]),
    ("name", {"in": [None]}, [4]),
    # ne / nin never match NULL
    ("name", {"ne": ["alpha"]}, [2, 3, 5, 6, 7, 8]),
    ("name", {"ne": ["alpha", "beta"]}, [3, 5, 6, 7, 8]),
    ("name", {"ne": [None]}, ALL_NAMED),
    ("name", {"ne": ["alpha", None]}, [2, 3, 5, 6, 7, 8]),
    ("name", {"nin": ["alpha", "beta"]}, [3, 5, 6, 7, 8]),
    ("name", {"nin": [None]}, ALL_NAMED),
    ("name", {"nin": ["alpha", None]}, [2, 3, 5, 6, 7, 8]),
    ("name", {"gt": ["b"]}, [2, 7]),
    # integer comparisons, numbers as strings too
    ("id", {"gt": [6]}, [7, 8]),
    ("id", {"gte": ["6"]}, [6, 7, 8]),
    ("id", {"lt": [2]}, [1]),
    ("id", {"lte": [2.0]}, [1, 2]),
    ("id", {"between": [3, 5]}, [3, 4, 5]),
    ("id", {"gt": [1], "lt": [5]}, [2, 3, 4]),
    ("id", {"gt": [6.5]}, [7, 8]),
    # decimal (NUMERIC affinity): exact text parameters
    ("amount", {"gt": [2]}, [2, 4, 5, 8]),
    ("amount", {"lt": ["0"]}, [6]),
    ("amount", {"eq": [1.5]}, [1]),
    ("amount", {"eq": ["1.50"]}, [1]),
    ("amount", {"between": ["1.5", 3]}, [1, 2, 5]),
    ("amount", {"ne": [1.5]}, [2, 4, 5, 6, 7, 8]),
    ("amount", {"eq": [None]}, [3]),
    # boolean
    ("flag", {"eq": [True]}, [1, 4, 6, 8]),
    ("flag", {"eq": ["false"]}, [2, 5, 7]),
    ("flag", {"ne": [True]}, [2, 5, 7]),
    ("flag", {"eq": [None]}, [3]),
    # date: no end-of-day adjustment
    ("d", {"between": ["2026-01-01", "2026-01-15"]}, [1, 2, 7]),
    ("d", {"gt": ["2026-01-31"]}, [5, 8]),
    ("d", {"eq": ["2026-01-31"]}, [4]),
    # timestamp: the end-of-day rule
    ("ts", {"between": ["2026-01-01", "2026-01-31"]}, [1, 2, 6, 7]),
    ("ts", {"between": ["2026-01-01", "2026-01-31T00:00:00"]}, [1, 6, 7]),
    ("ts", {"between": ["2026-01-01T01:00:00+01:00", "2026-01-10T10:00:00Z"]}, [1, 7]),
    ("ts", {"gte": ["2026-02-01"]}, [3, 8]),
    ("ts", {"lt": ["2026-01-01"]}, [5]),
    # LIKE: wildcards, escapes, case-insensitivity (SQLite), hostile text
    ("name", {"like": ["gamma%"]}, [3]),
    ("name", {"like": ["Gamma\\%"]}, [3]),
    ("name", {"like": ["%\\%"]}, [3]),
    ("name", {"like": ["Gam\\%"]}, []),
    ("name", {"like": ["a_b%"]}, [5, 8]),
    ("name", {"like": ["a\\_b%"]}, [5]),
    ("name", {"like": ["%\\\\c"]}, [5]),
    ("name", {"like": ["%\\"]}, []),
    ("name", {"like": ["_____"]}, [1, 5]),
    ("name", {"like": ["%"]}, ALL_NAMED),
    ("name", {"like": ["'; DROP%"]}, [6]),
    ("name", {"like": ["naïve%"]}, [7]),
    ("name", {"like": ["%☃"]}, [7]),
    ("name", {"eq": [EVIL]}, [6]),
    ("name", {"eq": ["%"]}, []),
    ("name", {"eq": ["\\"]}, []),
    ("name", {"eq": ["naïve ☃"]}, [7]),
]


@pytest.mark.parametrize(("field", "condition", "expected"), CASES)
def test_operator_narrows_rows(
    db: sqlite3.Connection, field: str, condition: dict[str, object], expected: list[int]
) -> None:
    assert run(db, {field: condition}) == expected


def test_fields_are_anded(db: sqlite3.Connection) -> None:
    assert run(db, {"id": {"gt": [1], "lt": [5]}, "name": {"ne": ["beta"]}}) == [3]
    assert run(db, {"flag": {"eq": [True]}, "amount": {"gte": [5]}}) == [4, 8]


def test_no_filter_selects_everything(db: sqlite3.Connection) -> None:
    assert run(db, {}) == list(range(1, 9))


def test_hostile_values_leave_the_database_intact(db: sqlite3.Connection) -> None:
    for value in (EVIL, "x'); DELETE FROM t; --", '" OR 1=1 --', "%", "\\", "\x00"):
        run(db, {"name": {"eq": [value], "like": [value]}})
    assert db.execute("SELECT count(*) FROM t").fetchone() == (8,)


def test_hostile_identifiers_are_quoted() -> None:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute('CREATE TABLE "we""ird %" ("sp ace""q" TEXT, "x" INTEGER)')
        conn.execute('INSERT INTO "we""ird %" VALUES (?, 1), (?, 2)', ("a", "b"))
        column = Column('sp ace"q', TypeFamily.TEXT)
        spec = parse_filters({"l": {"t": {'sp ace"q': {"eq": ["b"]}}}}, {"l": {"t": ["*"]}})
        bound = [bind_field_filter("l", "t", column, spec["l"]["t"][0])]
        x = Column("x", TypeFamily.INTEGER)
        sql, params = render_select(SQLITE, "main", 'we"ird %', [column, x], bound)
        assert conn.execute(sql, params).fetchall() == [("b", 2)]
    finally:
        conn.close()
