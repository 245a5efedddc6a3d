"""Every filter operator narrows PostgreSQL rows exactly like hand-written SQL (§3.4)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from uuid import UUID

import psycopg
import pytest

from fetcher.adapters.sql.postgres import PostgresConnector
from fetcher.engine.filters.ast import BoundCondition, BoundFieldFilter, Operator
from fetcher.engine.ports import Row, TableQuery
from fetcher.engine.types import TableSchema

pytestmark = pytest.mark.integration

TOTAL_PEOPLE = 27
HOSTILE = "'; DROP TABLE people; --"

# (field, operator, bound values, upper_exclusive, hand-written WHERE)
CASES: list[tuple[str, Operator, tuple[object, ...], bool, str]] = [
    ("id", Operator.EQ, (5,), False, "id = 5"),
    ("id", Operator.EQ, (1, 2, 3), False, "id IN (1, 2, 3)"),
    ("name", Operator.EQ, (None,), False, "name IS NULL"),
    ("name", Operator.EQ, ("person 1", None), False, "(name = 'person 1' OR name IS NULL)"),
    ("id", Operator.NE, (5, 6), False, "id <> 5 AND id <> 6"),
    ("name", Operator.NE, (None,), False, "name IS NOT NULL"),
    ("id", Operator.GT, (10,), False, "id > 10"),
    ("id", Operator.GTE, (10,), False, "id >= 10"),
    ("id", Operator.LT, (10,), False, "id < 10"),
    ("id", Operator.LTE, (10,), False, "id <= 10"),
    ("score", Operator.BETWEEN, (Decimal(3), Decimal("9.00")), False, "score BETWEEN 3 AND 9"),
    (
        "born",
        Operator.BETWEEN,
        (date(2024, 1, 5), date(2024, 1, 10)),
        False,
        "born BETWEEN '2024-01-05' AND '2024-01-10'",
    ),
    (
        "seen",
        Operator.BETWEEN,
        (datetime(2024, 1, 2, tzinfo=UTC), datetime(2024, 1, 4, tzinfo=UTC)),
        True,
        "seen >= '2024-01-02 00:00:00+00' AND seen < '2024-01-04 00:00:00+00'",
    ),
    (
        "naive",
        Operator.GT,
        (datetime(2024, 1, 15, 12, 0),),
        False,
        "naive > '2024-01-15 12:00:00'",
    ),
    ("id", Operator.IN, (1, 3, 99), False, "id IN (1, 3, 99)"),
    ("id", Operator.NIN, (1, 2, 3), False, "id NOT IN (1, 2, 3)"),
    (
        "name",
        Operator.NIN,
        ("person 1", None),
        False,
        "name NOT IN ('person 1') AND name IS NOT NULL",
    ),
    ("name", Operator.LIKE, ("person 1%",), False, "name LIKE 'person 1%'"),
    ("name", Operator.LIKE, ("100\\%",), False, "name = '100%'"),
    ("active", Operator.EQ, (True,), False, "active"),
    (
        "tag",
        Operator.EQ,
        (UUID("00000000-0000-0000-0000-000000000005"),),
        False,
        "tag = '00000000-0000-0000-0000-000000000005'",
    ),
    ("fee", Operator.GT, (Decimal(100),), False, "fee > '100'::money"),
    ("feeling", Operator.EQ, ("sad",), False, "feeling = 'sad'"),
    # Injection-like and special values are plain data.
    ("name", Operator.EQ, (HOSTILE,), False, "name = '''; DROP TABLE people; --'"),
    ("name", Operator.EQ, ("%",), False, "name = '%'"),
    ("name", Operator.EQ, ("\\",), False, "name = E'\\\\'"),
    ("name", Operator.EQ, ("ünïcødé ✓",), False, "name = 'ünïcødé ✓'"),
    ("name", Operator.LIKE, ("%\\\\%",), False, "strpos(name, E'\\\\') > 0"),
    ("name", Operator.LIKE, ("%'%",), False, "strpos(name, '''') > 0"),
    ("name", Operator.IN, (HOSTILE, "%", "_"), False, "name = '''; DROP TABLE people; --'"),
]


@pytest.fixture(scope="module")
def sql(
    postgres_dsn: str, pg_descriptor: object
) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        yield conn


def hand_count(sql: psycopg.Connection[tuple[object, ...]], where: str) -> int:
    row = sql.execute(f"SELECT count(*) FROM public.people WHERE {where}").fetchone()
    assert row is not None
    return int(str(row[0]))


async def people(pg: PostgresConnector) -> TableSchema:
    found = await pg.discover(["public"])
    return next(t for t in found.tables if t.name == "people")


async def fetch(pg: PostgresConnector, query: TableQuery) -> list[Row]:
    return [row async for batch in pg.stream(query) for row in batch]


@pytest.mark.parametrize(
    "case", CASES, ids=[f"{c[0]}-{c[1].value}-{i}" for i, c in enumerate(CASES)]
)
async def test_filter_matches_hand_written_sql(
    pg: PostgresConnector,
    sql: psycopg.Connection[tuple[object, ...]],
    case: tuple[str, Operator, tuple[object, ...], bool, str],
) -> None:
    field, op, values, exclusive, where = case
    table = await people(pg)
    column = table.column_named(field)
    assert column is not None
    condition = BoundFieldFilter(column, (BoundCondition(op, values, exclusive),))
    rows = await fetch(pg, TableQuery(table, table.columns, (condition,)))
    expected = hand_count(sql, where)
    assert len(rows) == expected
    assert len(rows) < TOTAL_PEOPLE
    assert hand_count(sql, "true") == TOTAL_PEOPLE  # nothing was dropped or changed


async def test_conditions_and_fields_are_anded(
    pg: PostgresConnector, sql: psycopg.Connection[tuple[object, ...]]
) -> None:
    table = await people(pg)
    id_column = table.column_named("id")
    active = table.column_named("active")
    assert id_column is not None
    assert active is not None
    filters = (
        BoundFieldFilter(
            id_column,
            (BoundCondition(Operator.GTE, (4,)), BoundCondition(Operator.LT, (15,))),
        ),
        BoundFieldFilter(active, (BoundCondition(Operator.EQ, (False,)),)),
    )
    rows = await fetch(pg, TableQuery(table, table.columns, filters))
    assert len(rows) == hand_count(sql, "id >= 4 AND id < 15 AND NOT active")
    assert {row["id"] for row in rows} == {5, 7, 9, 11, 13}


async def test_filter_on_mixed_case_and_percent_names(pg: PostgresConnector) -> None:
    found = await pg.discover(["public"])
    mixed = next(t for t in found.tables if t.name == "MixedCase")
    pct = mixed.column_named("pct%col")
    label = mixed.column_named("Display Name")
    assert pct is not None
    assert label is not None
    condition = BoundFieldFilter(pct, (BoundCondition(Operator.GT, (10,)),))
    rows = await fetch(pg, TableQuery(mixed, (label, pct), (condition,)))
    assert rows == [
        {"Display Name": "Two", "pct%col": 20},
        {"Display Name": "Three", "pct%col": 30},
    ]


async def test_projection_keeps_only_requested_columns(pg: PostgresConnector) -> None:
    table = await people(pg)
    name = table.column_named("name")
    id_column = table.column_named("id")
    assert name is not None
    assert id_column is not None
    condition = BoundFieldFilter(id_column, (BoundCondition(Operator.EQ, (22,)),))
    assert await fetch(pg, TableQuery(table, (name,), (condition,))) == [{"name": "O'Brien"}]
