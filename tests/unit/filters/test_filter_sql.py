"""SQL rendering per dialect (contract §3.4 "Rendering", "Nulls", "LIKE")."""

from __future__ import annotations

import itertools
import uuid
from datetime import date, datetime, time
from decimal import Decimal

import pytest

from fetcher.engine.filters.ast import BoundCondition, BoundFieldFilter, Operator
from fetcher.engine.filters.sql import (
    MYSQL,
    ORACLE,
    POSTGRESQL,
    SQL_SERVER,
    SQLITE,
    Dialect,
    Paramstyle,
    dialect_for,
    like_pattern,
    quote_identifier,
    render_select,
    render_where,
)
from fetcher.engine.types import Column, EngineType, TypeFamily

DIALECTS = [POSTGRESQL, MYSQL, SQL_SERVER, ORACLE, SQLITE]
IDS = [d.engine.value for d in DIALECTS]
NAME = Column("name", TypeFamily.TEXT)
ID = Column("id", TypeFamily.INTEGER)


def ff(column: Column, op: Operator, *values: object, exclusive: bool = False) -> BoundFieldFilter:
    return BoundFieldFilter(column, (BoundCondition(op, values, exclusive),))


def expand(dialect: Dialect, template: str, start: int = 1) -> str:
    """``{f}`` → the quoted ``name``; each ``{p}`` → the next placeholder; ``{esc}``."""
    counter = itertools.count(start)
    out = template.replace("{f}", quote_identifier(dialect, "name"))
    out = out.replace("{esc}", dialect.escape_clause)
    while "{p}" in out:
        if dialect.paramstyle is Paramstyle.NUMERIC:
            mark = f":{next(counter)}"
        elif dialect.paramstyle is Paramstyle.FORMAT:
            mark = "%s"
        else:
            mark = "?"
        out = out.replace("{p}", mark, 1)
    return out


def test_dialect_for() -> None:
    assert dialect_for(EngineType.POSTGRESQL) is POSTGRESQL
    assert dialect_for(EngineType.MYSQL) is MYSQL
    assert dialect_for(EngineType.SQL_SERVER) is SQL_SERVER
    assert dialect_for(EngineType.ORACLE) is ORACLE
    assert dialect_for(EngineType.SQLITE) is SQLITE
    with pytest.raises(ValueError, match="MONGODB"):
        dialect_for(EngineType.MONGODB)


@pytest.mark.parametrize(
    ("dialect", "expected", "params"),
    [
        (POSTGRESQL, """"id" IN (%s, %s) AND "name" LIKE %s ESCAPE '\\'""", [1, 2, "a%"]),
        (MYSQL, """`id` IN (%s, %s) AND `name` LIKE %s ESCAPE '\\\\'""", [1, 2, "a%"]),
        (SQL_SERVER, """[id] IN (?, ?) AND [name] LIKE ? ESCAPE '\\'""", [1, 2, "a%"]),
        (ORACLE, """"ID" IN (:1, :2) AND "NAME" LIKE :3 ESCAPE '\\'""", [1, 2, "a%"]),
        (SQLITE, """"id" IN (?, ?) AND "name" LIKE ? ESCAPE '\\'""", [1, 2, "a%"]),
    ],
    ids=IDS,
)
def test_contract_example_rows(dialect: Dialect, expected: str, params: list[object]) -> None:
    upper = dialect is ORACLE
    id_col = Column("ID" if upper else "id", TypeFamily.INTEGER)
    name_col = Column("NAME" if upper else "name", TypeFamily.TEXT)
    filters = [ff(id_col, Operator.EQ, 1, 2), ff(name_col, Operator.LIKE, "a%")]
    assert render_where(dialect, filters) == (expected, params)


def test_contract_example_literal_text() -> None:
    # The §3.4 table, character for character (MySQL writes the backslash doubled).
    sql, _ = render_where(MYSQL, [ff(ID, Operator.EQ, 1, 2), ff(NAME, Operator.LIKE, "a%")])
    assert "WHERE " + sql == r"WHERE `id` IN (%s, %s) AND `name` LIKE %s ESCAPE '\\'"
    sql, _ = render_where(POSTGRESQL, [ff(ID, Operator.EQ, 1, 2), ff(NAME, Operator.LIKE, "a%")])
    assert "WHERE " + sql == r"""WHERE "id" IN (%s, %s) AND "name" LIKE %s ESCAPE '\'"""


OPERATOR_CASES = [
    (Operator.EQ, ("a",), "{f} = {p}", ["a"]),
    (Operator.EQ, ("a", "b"), "{f} IN ({p}, {p})", ["a", "b"]),
    (Operator.EQ, (None,), "{f} IS NULL", []),
    (Operator.EQ, ("a", None), "({f} = {p} OR {f} IS NULL)", ["a"]),
    (Operator.EQ, ("a", None, "b"), "({f} IN ({p}, {p}) OR {f} IS NULL)", ["a", "b"]),
    (Operator.IN, ("a",), "{f} IN ({p})", ["a"]),
    (Operator.IN, ("a", "b", "c"), "{f} IN ({p}, {p}, {p})", ["a", "b", "c"]),
    (Operator.IN, (None,), "{f} IS NULL", []),
    (Operator.IN, (None, "a"), "({f} IN ({p}) OR {f} IS NULL)", ["a"]),
    (Operator.NE, ("a",), "{f} <> {p}", ["a"]),
    (Operator.NE, ("a", "b"), "{f} <> {p} AND {f} <> {p}", ["a", "b"]),
    (Operator.NE, (None,), "{f} IS NOT NULL", []),
    (Operator.NE, ("a", None), "{f} <> {p} AND {f} IS NOT NULL", ["a"]),
    (Operator.NIN, ("a",), "{f} NOT IN ({p})", ["a"]),
    (Operator.NIN, ("a", "b"), "{f} NOT IN ({p}, {p})", ["a", "b"]),
    (Operator.NIN, (None,), "{f} IS NOT NULL", []),
    (Operator.NIN, ("a", None, "b"), "{f} NOT IN ({p}, {p}) AND {f} IS NOT NULL", ["a", "b"]),
    (Operator.GT, ("a",), "{f} > {p}", ["a"]),
    (Operator.GTE, ("a",), "{f} >= {p}", ["a"]),
    (Operator.LT, ("a",), "{f} < {p}", ["a"]),
    (Operator.LTE, ("a",), "{f} <= {p}", ["a"]),
    (Operator.BETWEEN, ("a", "b"), "{f} >= {p} AND {f} <= {p}", ["a", "b"]),
    (Operator.LIKE, ("a%",), "{f} LIKE {p}{esc}", ["a%"]),
]


@pytest.mark.parametrize("dialect", DIALECTS, ids=IDS)
@pytest.mark.parametrize(("op", "values", "template", "params"), OPERATOR_CASES)
def test_every_operator(
    dialect: Dialect, op: Operator, values: tuple[object, ...], template: str, params: list[object]
) -> None:
    sql, bound = render_where(dialect, [ff(NAME, op, *values)])
    assert sql == expand(dialect, template)
    assert bound == params


@pytest.mark.parametrize("dialect", DIALECTS, ids=IDS)
def test_between_upper_exclusive(dialect: Dialect) -> None:
    lo, hi = datetime(2026, 1, 1), datetime(2026, 2, 1)
    column = Column("name", TypeFamily.TIMESTAMP)
    sql, params = render_where(dialect, [ff(column, Operator.BETWEEN, lo, hi, exclusive=True)])
    assert sql == expand(dialect, "{f} >= {p} AND {f} < {p}")
    if dialect is SQLITE:
        assert params == ["2026-01-01 00:00:00", "2026-02-01 00:00:00"]
    else:
        assert params == [lo, hi]


@pytest.mark.parametrize("dialect", DIALECTS, ids=IDS)
def test_several_fields_and_conditions_are_anded(dialect: Dialect) -> None:
    filters = [
        BoundFieldFilter(
            NAME,
            (BoundCondition(Operator.GT, ("a",)), BoundCondition(Operator.EQ, ("b", None))),
        ),
        ff(NAME, Operator.NIN, "c"),
    ]
    sql, params = render_where(dialect, filters)
    expected = "{f} > {p} AND ({f} = {p} OR {f} IS NULL) AND {f} NOT IN ({p})"
    assert sql == expand(dialect, expected)
    assert params == ["a", "b", "c"]


def test_empty_where() -> None:
    for dialect in DIALECTS:
        assert render_where(dialect, []) == ("", [])


def test_oracle_start_index() -> None:
    sql, params = render_where(ORACLE, [ff(NAME, Operator.IN, 1, 2)], start_index=5)
    assert sql == '"name" IN (:5, :6)'
    assert params == [1, 2]


@pytest.mark.parametrize(
    ("dialect", "name", "expected"),
    [
        (POSTGRESQL, 'we"ird', '"we""ird"'),
        (POSTGRESQL, "100%", '"100%%"'),
        (POSTGRESQL, 'a"%b', '"a""%%b"'),
        (MYSQL, "we`ird", "`we``ird`"),
        (MYSQL, "100%", "`100%%`"),
        (SQL_SERVER, "we]ird", "[we]]ird]"),
        (SQL_SERVER, "[x]", "[[x]]]"),
        (SQL_SERVER, "100%", "[100%]"),
        (ORACLE, 'WE"IRD', '"WE""IRD"'),
        (ORACLE, "100%", '"100%"'),
        (SQLITE, 'we"ird', '"we""ird"'),
        (SQLITE, "100%", '"100%"'),
        (SQLITE, "'; DROP TABLE x; --", '"\'; DROP TABLE x; --"'),
    ],
)
def test_quote_identifier(dialect: Dialect, name: str, expected: str) -> None:
    assert quote_identifier(dialect, name) == expected


@pytest.mark.parametrize(
    ("pattern", "standard", "sql_server"),
    [
        ("a%", "a%", "a%"),
        ("a_b", "a_b", "a_b"),
        (r"100\%", r"100\%", r"100\%"),
        (r"a\_b", r"a\_b", r"a\_b"),
        (r"back\\slash", r"back\\slash", r"back\\slash"),
        ("trailing\\", "trailing\\\\", "trailing\\\\"),
        (r"\q", "q", "q"),
        ("[abc]%", "[abc]%", r"\[abc]%"),
        (r"\[x", "[x", r"\[x"),
        ("naïve ☃", "naïve ☃", "naïve ☃"),
    ],
)
def test_like_pattern_escaping(pattern: str, standard: str, sql_server: str) -> None:
    for dialect in (POSTGRESQL, MYSQL, ORACLE, SQLITE):
        assert like_pattern(dialect, pattern) == standard
    assert like_pattern(SQL_SERVER, pattern) == sql_server


def test_sql_server_like_bracket_is_bound_escaped() -> None:
    sql, params = render_where(SQL_SERVER, [ff(NAME, Operator.LIKE, "[a]%")])
    assert sql == "[name] LIKE ? ESCAPE '\\'"
    assert params == [r"\[a]%"]


def test_injection_like_values_are_parameters() -> None:
    evil = "'; DROP TABLE x; --"
    for dialect in DIALECTS:
        sql, params = render_where(dialect, [ff(NAME, Operator.EQ, evil)])
        assert evil not in sql
        assert params == [evil]


MONEY = Column("amount", TypeFamily.DECIMAL, "money")


def test_postgresql_money_binds_text_with_cast() -> None:
    filters = [
        ff(MONEY, Operator.BETWEEN, 1, Decimal("2.50")),
        ff(MONEY, Operator.EQ, Decimal("3.10"), None),
    ]
    sql, params = render_where(POSTGRESQL, filters)
    assert sql == (
        '"amount" >= %s::money AND "amount" <= %s::money'
        ' AND ("amount" = %s::money OR "amount" IS NULL)'
    )
    assert params == ["1", "2.50", "3.10"]


@pytest.mark.parametrize("dialect", [MYSQL, SQL_SERVER, ORACLE, SQLITE], ids=IDS[1:])
def test_money_is_plain_elsewhere(dialect: Dialect) -> None:
    sql, params = render_where(dialect, [ff(MONEY, Operator.GT, Decimal("2.50"))])
    assert "money" not in sql
    assert params == ["2.50" if dialect is SQLITE else Decimal("2.50")]


def test_sqlite_text_forms() -> None:
    values = (
        Decimal("1.50"),
        date(2026, 1, 2),
        datetime(2026, 1, 2, 3, 4, 5, 600000),
        time(3, 4),
        uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        True,
        7,
        1.5,
        "x",
    )
    _, params = render_where(SQLITE, [ff(NAME, Operator.IN, *values)])
    assert params == [
        "1.50",
        "2026-01-02",
        "2026-01-02 03:04:05.600000",
        "03:04:00",
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        True,
        7,
        1.5,
        "x",
    ]
    _, params = render_where(POSTGRESQL, [ff(NAME, Operator.IN, *values)])
    assert params == list(values)


@pytest.mark.parametrize(
    ("dialect", "expected"),
    [
        (POSTGRESQL, 'SELECT "id", "name" FROM "public"."t" WHERE "id" > %s'),
        (MYSQL, "SELECT `id`, `name` FROM `public`.`t` WHERE `id` > %s"),
        (SQL_SERVER, "SELECT [id], [name] FROM [public].[t] WHERE [id] > ?"),
        (ORACLE, 'SELECT "id", "name" FROM "public"."t" WHERE "id" > :1'),
        (SQLITE, 'SELECT "id", "name" FROM "public"."t" WHERE "id" > ?'),
    ],
    ids=IDS,
)
def test_render_select(dialect: Dialect, expected: str) -> None:
    sql, params = render_select(dialect, "public", "t", [ID, NAME], [ff(ID, Operator.GT, 3)])
    assert sql == expected
    assert params == [3]


def test_render_select_without_schema_or_filters() -> None:
    assert render_select(SQLITE, "", 'we"ird', [ID], []) == ('SELECT "id" FROM "we""ird"', [])
    assert render_select(MYSQL, "db", "100%", [Column("a%b", TypeFamily.TEXT)], []) == (
        "SELECT `a%%b` FROM `db`.`100%%`",
        [],
    )


def test_render_select_money_as_numeric() -> None:
    sql, params = render_select(
        POSTGRESQL, "", "p", [ID, MONEY], [ff(MONEY, Operator.LT, Decimal("9.99"))]
    )
    assert sql == ('SELECT "id", "amount"::numeric AS "amount" FROM "p" WHERE "amount" < %s::money')
    assert params == ["9.99"]
    sql, _ = render_select(SQL_SERVER, "", "p", [MONEY], [])
    assert sql == "SELECT [amount] FROM [p]"


def test_render_select_needs_columns() -> None:
    with pytest.raises(ValueError, match="at least one column"):
        render_select(SQLITE, "", "t", [], [])
