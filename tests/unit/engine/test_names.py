"""§3.3: table-name parsing, result keys, merging and discovery scope."""

from __future__ import annotations

import pytest

from fetcher.engine.errors import EngineError
from fetcher.engine.names import (
    DEFAULT_SCHEMA_MARKER,
    discovery_scope,
    find_table,
    merge_requested_tables,
    parse_table_key,
)
from fetcher.engine.types import Column, DiscoveredSchema, EngineType, TableSchema, TypeFamily

PG, MY, MS, ORA, SQLITE, MONGO = (
    EngineType.POSTGRESQL,
    EngineType.MYSQL,
    EngineType.SQL_SERVER,
    EngineType.ORACLE,
    EngineType.SQLITE,
    EngineType.MONGODB,
)


@pytest.mark.parametrize(
    ("engine", "default", "key", "expected"),
    [
        (PG, "public", "public.accounts", "accounts"),
        (PG, "public", "Public.accounts", "accounts"),
        (PG, "public", "accounts", "accounts"),
        (PG, "public", "accounting.invoices", "accounting.invoices"),
        (MS, "dbo", "dbo.x", "x"),
        (MS, "dbo", "DBO.x", "x"),
        (ORA, "SCOTT", "hr.emp", "HR.EMP"),
        (ORA, "HR", "hr.emp", "EMP"),
        (ORA, "SCOTT", "emp", "EMP"),
        (MY, "shop", "shop.orders", "orders"),
        (MY, "shop", "Orders", "Orders"),
        (SQLITE, "main", "MAIN.t", "t"),
        (MONGO, "", "a.b.c", "a.b.c"),
    ],
)
def test_result_keys_follow_the_contract_examples(
    engine: EngineType, default: str, key: str, expected: str
) -> None:
    assert parse_table_key(engine, key, "ds").result_key(engine, default) == expected


@pytest.mark.parametrize("key", ["a.b.c", ".t", "s.", "a..b"])
def test_more_than_one_dot_or_empty_parts_are_invalid(key: str) -> None:
    with pytest.raises(EngineError) as caught:
        parse_table_key(PG, key, "pg")
    assert caught.value.message == f"invalid table name '{key}' in datasource 'pg'"


def test_mongodb_keys_are_never_split() -> None:
    table = parse_table_key(MONGO, "events.2026", "m")
    assert table.schema is None
    assert table.name == "events.2026"


def test_merge_concatenates_dedups_and_star_wins() -> None:
    tables = [
        (parse_table_key(PG, "public.accounts", "pg"), ["id", "email"]),
        (parse_table_key(PG, "accounts", "pg"), ["email", "status"]),
        (parse_table_key(PG, "x.t", "pg"), ["a"]),
        (parse_table_key(PG, "x.t", "pg"), ["*"]),
    ]
    merged = merge_requested_tables(PG, "public", tables)
    assert merged["accounts"][1] == ["id", "email", "status"]
    assert merged["x.t"][1] == ["*"]
    assert [t.requested for t in merged["accounts"][0]] == ["public.accounts", "accounts"]


def test_discovery_scope_adds_default_only_when_needed() -> None:
    qualified = [parse_table_key(PG, "accounting.invoices", "pg")]
    assert discovery_scope(PG, qualified) == ["accounting"]
    mixed = [*qualified, parse_table_key(PG, "accounts", "pg")]
    assert discovery_scope(PG, mixed) == ["accounting", "public"]
    assert discovery_scope(PG, [parse_table_key(PG, "PUBLIC.a", "pg")]) == ["public"]
    assert discovery_scope(MS, [parse_table_key(MS, "x", "ms")]) == ["dbo"]
    assert discovery_scope(ORA, [parse_table_key(ORA, "hr.emp", "o")]) == ["HR"]
    assert discovery_scope(ORA, [parse_table_key(ORA, "emp", "o")]) == [DEFAULT_SCHEMA_MARKER]
    assert discovery_scope(MY, [parse_table_key(MY, "db.t", "my")]) == []
    assert discovery_scope(SQLITE, [parse_table_key(SQLITE, "t", "s")]) == []


def _schema(default: str, *tables: tuple[str, str]) -> DiscoveredSchema:
    column = (Column("id", TypeFamily.INTEGER),)
    return DiscoveredSchema(default, tuple(TableSchema(s, n, column) for s, n in tables))


def test_catalog_matching_rules() -> None:
    pg = _schema("public", ("public", "Accounts"), ("acct", "inv"))
    assert find_table(PG, pg, parse_table_key(PG, "Accounts", "pg")) is not None
    assert find_table(PG, pg, parse_table_key(PG, "accounts", "pg")) is None  # exact
    assert find_table(PG, pg, parse_table_key(PG, "PUBLIC.Accounts", "pg")) is not None
    assert find_table(PG, pg, parse_table_key(PG, "ACCT.inv", "pg")) is None
    my = _schema("shop", ("shop", "Orders"))
    assert find_table(MY, my, parse_table_key(MY, "orders", "my")) is not None
    assert find_table(MY, my, parse_table_key(MY, "SHOP.ORDERS", "my")) is not None
    assert find_table(MY, my, parse_table_key(MY, "other.orders", "my")) is None
    ora = _schema("SCOTT", ("HR", "EMP"), ("SCOTT", "DEPT"))
    assert find_table(ORA, ora, parse_table_key(ORA, "hr.emp", "o")) is not None
    assert find_table(ORA, ora, parse_table_key(ORA, "dept", "o")) is not None
    lite = _schema("main", ("main", "Ledger"))
    assert find_table(SQLITE, lite, parse_table_key(SQLITE, "ledger", "s")) is not None
    assert find_table(SQLITE, lite, parse_table_key(SQLITE, "temp.ledger", "s")) is None
